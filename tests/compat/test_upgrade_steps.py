"""docs/upgrading.md's upgrade steps, run as written against tables 0.1.0 and 0.2.0 left records in.

The steps are read from the page (between its ``upgrade-steps`` markers), never copied here: a
step changed there is the step run here. ``cdk deploy`` is where the current code takes over (in
this moto world the current consumer and reconciler are the deployed functions); every
``order-pipeline`` line runs through the CLI as an operator would type it. Then the reconciler runs
as its schedule would, and the end state is checked: every record current, every order notified.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from idempotent_order_pipeline.keys import derive_event_id
from tests.compat.released import V0_1_0, V0_2_0, released_functions, v0_1_0_keys
from tests.compat.shapes import wait_past_their_creation_second
from tests.consumer.harness import FakeContext, sqs_record
from tests.ops.conftest import STACK, OpsWorld

#: Starts processes (the test tiers' rule).
pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parents[2] / "docs" / "upgrading.md"
_STEPS = re.compile(r"<!-- upgrade-steps -->\s*```sh\n(.*?)```\s*<!-- /upgrade-steps -->", re.DOTALL)

# What each release left: pending (SNS was down when it ran, the message is gone since) or sent.
ORDERS_0_1_0_PENDING = [{"order_id": "acme|2026|1", "amount": 1}, {"order_id": "v1-p-2", "amount": 2}]
ORDERS_0_1_0_SENT = [{"order_id": "v1-s-1", "amount": 3}]
ORDERS_0_2_0_PENDING = [{"order_id": f"v2-p-{i}", "amount": i} for i in range(6)]
ORDERS_0_2_0_SENT = [{"order_id": "v2-s-1", "amount": 9}]


def upgrade_steps() -> list[list[str]]:
    """Each command line of the page's upgrade steps, split as a shell would."""
    match = _STEPS.search(PAGE.read_text())
    assert match, f"{PAGE} has no upgrade-steps block"
    lines = [line.strip() for line in match.group(1).splitlines() if line.strip() and not line.startswith("#")]
    return [shlex.split(line.replace('"$STACK"', STACK)) for line in lines]


def left_by_older_releases(ops: OpsWorld) -> None:
    """0.1.0 and 0.2.0, as released, each record orders: some left pending (SNS down), some sent."""
    down = {**ops.env, "TOPIC_ARN": ops.topic_arn + "-gone", "RECONCILE_AFTER_SECONDS": "0"}
    up = {**ops.env, "RECONCILE_AFTER_SECONDS": "0"}
    for root, pending, sent in (
        (V0_1_0, ORDERS_0_1_0_PENDING, ORDERS_0_1_0_SENT),
        (V0_2_0, ORDERS_0_2_0_PENDING, ORDERS_0_2_0_SENT),
    ):
        with released_functions(root, down) as without_sns:
            assert len(without_sns.invoke([sqs_record(o) for o in pending])["batchItemFailures"]) == len(pending)
        with released_functions(root, up) as with_sns:
            assert with_sns.invoke([sqs_record(o) for o in sent]) == {"batchItemFailures": []}


def run_step(ops: OpsWorld, step: list[str]) -> Any:
    if step[:2] == ["cdk", "deploy"]:
        return None  # the current consumer and reconciler are this world's functions from here on
    assert step[0] == "order-pipeline", step
    if "pending" in step:  # migrate indexed records as created now: an operator's next command is a second later
        wait_past_their_creation_second(ops.event_records().values())
    result = ops.run(*step[1:])
    assert result.exit_code == 0, (step, result.output)
    return result


def test_the_upgrade_steps_as_written_leave_every_record_current_and_every_order_notified(
    ops: OpsWorld, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN tables 0.1.0 and 0.2.0 left orders in, pending (their messages gone) and sent
    left_by_older_releases(ops)
    pending_keys = {key for key, _ in v0_1_0_keys(ORDERS_0_1_0_PENDING)} | {
        derive_event_id(o) for o in ORDERS_0_2_0_PENDING
    }
    sent_before = ops.notified_events()
    assert set(sent_before) == {key for key, _ in v0_1_0_keys(ORDERS_0_1_0_SENT)} | {
        derive_event_id(o) for o in ORDERS_0_2_0_SENT
    }
    records = ops.event_records()
    assert {e for e, r in records.items() if r["status"] == "pending"} == pending_keys
    steps = upgrade_steps()
    assert steps[0][:2] == ["cdk", "deploy"]
    assert any("migrate" in step and "--dry-run" not in step for step in steps)

    # WHEN an operator runs the upgrade steps as the page writes them (in a directory of their own)
    monkeypatch.chdir(tmp_path)
    results = [run_step(ops, step) for step in steps]
    reconciler_entry.configure(
        reconciler_entry.ReconcilerClients(dynamodb=ops.dynamodb, sns=ops.sns),
        {**ops.env, "RECONCILE_AFTER_SECONDS": "0"},
    )
    report = reconciler_entry.handler({}, FakeContext())  # the reconciler's next scheduled run

    # THEN the last step listed every order left pending (0.1.0's too, once migrated)
    listed = {line.split()[0] for line in results[-1].stdout.splitlines()}
    assert listed == pending_keys
    # AND the reconciler notified each of them once; nothing was notified twice
    assert (report["reconciled"], report["complete"]) == (len(pending_keys), True)
    assert ops.notified_events() == sent_before + Counter(pending_keys)
    # AND every record is in today's shape: sent, with a ttl (its index entry, if any, until TTL deletes it)
    records = ops.event_records()
    assert set(records) == set(sent_before) | pending_keys
    assert all(r["status"] == "sent" and "ttl" in r for r in records.values())
    # AND the migration left no checkpoint behind, and a second run finds nothing to change
    assert not any(tmp_path.iterdir())
    again = ops.run("migrate", "--yes", "--json")
    assert json.loads(again.stdout)["changed"] == 0
