"""The reconciler returns before its deadline, with its metrics, whatever SNS or DynamoDB does.

Each case runs ``order_consumer.reconciler.handler`` in a child process against a stand-in endpoint
over real HTTP (:mod:`tests.reconciler.standin`), with the reconciler's own client configuration
and a Lambda context of :data:`BUDGET_MS` (30 s: 15 s of work before the run's stop margin). One shard
lists 30 records pending for an hour, so the first chunk of 25 needs three ``PublishBatch`` calls
and a mark transaction. One kind of call never answers, or trickles one byte every 0.25 s (a read
timeout never fires). The parent plays Lambda: it kills the child :data:`KILL_AFTER_S` after the
deadline, so a run that overruns prints nothing. The cases run side by side (they mostly wait).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import (
    OLDEST_PENDING_AGE_SECONDS,
    PENDING_RECONCILED,
)
from tests.consumer.standin import ANSWER, HANG, TRICKLE
from tests.reconciler import standin as reconciler_standin

ROOT = Path(__file__).resolve().parents[2]
#: Starts processes (the test tiers' rule).
pytestmark = pytest.mark.slow
BUDGET_MS = 30_000  # 15 s of work before the stop margin: room for 32 shard queries on a loaded machine
#: Lambda ends an invocation at its deadline; the parent gives the child this much more, then kills it.
KILL_AFTER_S = 1.0
#: The longest the children may take to import (on a loaded machine) before the invocations start.
STARTUP_S = 180.0
#: The control's budget: time for all 30 records however loaded the machine (it checks the stand-in, not the bound).
CONTROL_BUDGET_MS = {"control-all-answer": 60_000}
CASES = {
    "publish-never-answers": ("publish", HANG),
    "publish-trickles": ("publish", TRICKLE),
    "mark-trickles": ("mark", TRICKLE),
    "read-never-answers": ("read", HANG),
    "query-trickles": ("query", TRICKLE),
    "control-all-answer": ("publish", ANSWER),
}

CHILD = """
import json, os, sys, time
from pathlib import Path
from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciler import CLIENT_CONFIG, ReconcilerClients
from tests.consumer.test_deadline import ENV, RealContext
import boto3
session = boto3.session.Session(aws_access_key_id="t", aws_secret_access_key="t", region_name="eu-west-1")
url = sys.argv[1]
reconciler.configure(
    ReconcilerClients(
        dynamodb=session.client("dynamodb", endpoint_url=url, config=CLIENT_CONFIG),
        sns=session.client("sns", endpoint_url=url, config=CLIENT_CONFIG),
    ),
    {**ENV, "RECONCILE_AFTER_SECONDS": "900"},
)
# Imported (Lambda's init is outside the timeout): say so, then the parent gives the deadline, one
# instant of CLOCK_MONOTONIC, the same in every process.
Path(sys.argv[2]).touch()
context = RealContext(0)
context.deadline = float(sys.stdin.readline())
answer = reconciler.handler({}, context)
print(json.dumps({"left_ms": context.get_remaining_time_in_millis(), "answer": answer}), flush=True)
os._exit(0)  # Lambda freezes the sandbox once the handler returned: no interpreter shutdown to wait for
"""


def _metrics(lines: list[str]) -> dict[str, Any]:
    """The EMF blob with the reconciler's metrics, or {} if none was printed."""
    for line in lines:
        if line.startswith("{") and '"_aws"' in line and PENDING_RECONCILED in line:
            return dict(json.loads(line))
    return {}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    """Every case's child, started together; per case: its last line, its metrics and the calls seen."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "infra"), str(ROOT)])}
    folder = tmp_path_factory.mktemp("reconciler-deadline")
    with ExitStack() as stack:
        children = {}
        for case, (kind, behaviour) in CASES.items():
            server = stack.enter_context(reconciler_standin.running())
            server.behaviour[kind] = behaviour
            output = stack.enter_context((folder / f"{case}.out").open("w"))
            child = subprocess.Popen(  # noqa: S603 - this interpreter, this test's own code
                [sys.executable, "-c", CHILD, server.url, str(folder / f"{case}.ready")],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=output,  # a file, not a pipe: nothing blocks the child while the parent waits for another
                stderr=subprocess.STDOUT,
                text=True,
            )
            stack.callback(lambda child=child: child.poll() is None and child.kill())
            children[case] = (child, server)
        # The invocations start once every child has imported, however loaded the machine is.
        waited = time.monotonic() + STARTUP_S
        while not all((folder / f"{case}.ready").exists() for case in CASES):
            assert time.monotonic() < waited, "the children did not import in time"
            time.sleep(0.1)
        started = time.monotonic()
        deadlines = {case: started + CONTROL_BUDGET_MS.get(case, BUDGET_MS) / 1000 for case in CASES}
        for case, (child, _) in children.items():
            assert child.stdin is not None
            child.stdin.write(f"{deadlines[case]!r}\n")
            child.stdin.flush()
        results = {}
        for case, (child, server) in children.items():
            killed_at = deadlines[case] + KILL_AFTER_S
            try:
                child.wait(timeout=max(0.0, killed_at - time.monotonic()))
                killed = False
            except subprocess.TimeoutExpired:  # Lambda's kill at the deadline
                child.kill()
                child.wait()
                killed = True
            lines = (folder / f"{case}.out").read_text().splitlines()
            last = next((json.loads(line) for line in reversed(lines) if line.startswith('{"left_ms"')), None)
            results[case] = {
                "killed": killed,
                "last": last,
                "metrics": _metrics(lines),
                "received": dict(server.received),
            }
        yield results


@pytest.mark.parametrize("case", [case for case in CASES if not case.startswith("control")])
def test_a_stalled_call_cannot_make_the_reconciler_overrun_or_lose_its_metrics(
    runs: dict[str, dict[str, Any]], case: str
) -> None:
    # GIVEN 30 records pending for an hour, and one kind of call that never answers or trickles
    kind, _ = CASES[case]
    # WHEN the reconciler runs with 30 s left (the fixture ran every case)
    result = runs[case]
    # THEN the stalled call was made
    assert result["received"][kind] >= 1, result["received"]
    # AND the run returned before its deadline, on its own
    assert not result["killed"], f"{case}: killed at the deadline (overran)"
    assert result["last"]["left_ms"] > 0, result["last"]
    # AND it emitted PendingReconciled, and the age of the oldest pending record when the index was read
    metrics = result["metrics"]
    assert metrics.get(PENDING_RECONCILED) == [0.0], metrics
    answer = result["last"]["answer"]
    assert answer["reconciled"] == 0
    if kind == "query":
        # the index was not read: the age is unknown, so it is not emitted (the alarm treats
        # missing data as breaching) and the report says how many shards were not read
        assert OLDEST_PENDING_AGE_SECONDS not in metrics
        assert answer["shards_unread"] >= 1
    else:
        [age] = metrics[OLDEST_PENDING_AGE_SECONDS]
        assert age >= reconciler_standin.PENDING_AGE_S - 900
        assert answer["left_pending"] == reconciler_standin.PENDING_PER_SHARD
        assert answer["shards_unread"] == 0


def test_the_stand_in_answers_so_a_run_reconciles_everything(runs: dict[str, dict[str, Any]]) -> None:
    # GIVEN the same stand-in answering every call (the control for the cases above)
    result = runs["control-all-answer"]
    # WHEN / THEN the run reconciled all 30 records, complete, and reported an age of 0
    assert not result["killed"]
    assert result["last"]["answer"]["reconciled"] == reconciler_standin.PENDING_PER_SHARD
    assert result["last"]["answer"]["complete"] is True
    assert result["metrics"][PENDING_RECONCILED] == [30.0]
    assert result["metrics"][OLDEST_PENDING_AGE_SECONDS] == [0.0]
    assert result["received"]["publish"] == 4  # 25 records in 3 calls, then 5 in one
