"""``order-pipeline migrate``: records of older releases into today's shape, and every promise of the command.

Each property has a test that fails without it: the end state (every record current, the pending
ones where the reconciler and ``pending`` look), idempotence (a second run changes nothing),
``--dry-run`` (writes nothing, counts what a run changes), resuming (a crash mid-run, then a rerun
from the checkpoint or the printed ``--start-key``), the conditions (a record a consumer marked,
or the TTL deleted, meanwhile is left as they left it), progress only on a terminal, and the figures.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import DEFAULT_RECORD_TTL_SECONDS
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import pending_shard
from idempotent_order_pipeline._lambda_asset.order_consumer.notifier import Notification
from idempotent_order_pipeline._lambda_asset.order_consumer.store import OrderStore
from idempotent_order_pipeline.cli import migrate as migrate_module
from tests.compat.shapes import (
    TTL_SECONDS,
    record_0_1_0,
    record_0_2_0,
    shard_0_2_0,
    wait_past_their_creation_second,
)
from tests.ops.conftest import OpsWorld

NOW = int(time.time())
CREATED = NOW - 3600


def ids_whose_0_2_0_shard(differs: bool, count: int, prefix: str) -> list[str]:
    """Event ids whose 0.2.0 shard (16) differs from today's (32), or equals it."""
    found: list[str] = []
    number = 0
    while len(found) < count:
        event_id = f"{prefix}-{number}"
        if (shard_0_2_0(event_id) != pending_shard(event_id)) == differs:
            found.append(event_id)
        number += 1
    return found


def current_record(event_id: str, *, sent: bool) -> dict[str, Any]:
    """A record as today's consumer writes it (today's shard; sent: a ttl too, the shard kept)."""
    item = {
        "event_id": {"S": event_id},
        "status": {"S": "sent" if sent else "pending"},
        "order_id": {"S": f"o-{event_id}"},
        "payload_sha256": {"S": "sha-" + event_id},
        "created_at": {"N": str(CREATED)},
    }
    item["pending_shard"] = {"S": pending_shard(event_id)}
    if sent:
        item |= {"sent_at": {"N": str(CREATED + 1)}, "ttl": {"N": str(CREATED + 1 + TTL_SECONDS)}}
    return item


def sent_by_0_1_0_after_rollback(event_id: str) -> dict[str, Any]:
    """Today's pending record that 0.1.0 (rolled back to) marked: sent, no ttl."""
    item = current_record(event_id, sent=False)
    return item | {"status": {"S": "sent"}, "sent_at": {"N": str(CREATED + 1)}}


def seed_every_shape(ops: OpsWorld) -> dict[str, list[str]]:
    """One table holding what 0.1.0, 0.2.0, a rollback and today leave; event ids by what they need."""
    seeded: dict[str, list[str]] = {
        "pending_not_indexed": [f"v1-pending-{i}" for i in range(4)],
        "pending_other_shard": ids_whose_0_2_0_shard(True, 3, "v2-pending"),
        "sent_without_ttl": [f"rollback-sent-{i}" for i in range(2)],
        "current": [
            *ids_whose_0_2_0_shard(False, 2, "v2-pending-same"),
            *(f"v1-sent-{i}" for i in range(2)),
            *(f"v2-sent-{i}" for i in range(2)),
            *(f"today-{i}" for i in range(3)),
        ],
    }
    items = [
        *(record_0_1_0(e, f"o-{e}", "sha-" + e, created_at=CREATED, sent=False) for e in seeded["pending_not_indexed"]),
        *(record_0_2_0(e, f"o-{e}", "sha-" + e, created_at=CREATED, sent=False) for e in seeded["pending_other_shard"]),
        *(sent_by_0_1_0_after_rollback(e) for e in seeded["sent_without_ttl"]),
        *(record_0_2_0(e, f"o-{e}", "sha-" + e, created_at=CREATED, sent=False) for e in seeded["current"][:2]),
        *(record_0_1_0(e, f"o-{e}", "sha-" + e, created_at=CREATED, sent=True) for e in seeded["current"][2:4]),
        *(record_0_2_0(e, f"o-{e}", "sha-" + e, created_at=CREATED, sent=True) for e in seeded["current"][4:6]),
        *(current_record(e, sent=i == 0) for i, e in enumerate(seeded["current"][6:])),
    ]
    for item in items:
        ops.dynamodb.put_item(TableName=ops.events_table, Item=item)
    return seeded


def assert_every_record_current(ops: OpsWorld) -> None:
    records = ops.event_records()
    assert records
    for event_id, record in records.items():
        if record["status"] == "pending":
            assert record.get("pending_shard") == pending_shard(event_id), event_id
            assert "ttl" not in record, event_id
        else:
            assert int(record["ttl"]) > NOW, event_id  # its index entry, if any, stays until TTL deletes it


def figures_of(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    return json.loads(line)


def test_migrate_brings_every_older_shape_into_todays(ops: OpsWorld) -> None:
    # GIVEN records as 0.1.0, 0.2.0, a rollback to 0.1.0 and today's consumer left them
    seeded = seed_every_shape(ops)
    pending = {
        *seeded["pending_not_indexed"],
        *seeded["pending_other_shard"],
        *seeded["current"][:2],
        "today-1",
        "today-2",
    }
    listed_before = {
        json.loads(line)["event_id"] for line in ops.run("pending", "--older-than", "0s", "--json").stdout.splitlines()
    }
    assert listed_before == pending - set(seeded["pending_not_indexed"])  # 0.1.0's are invisible

    # WHEN migrate runs
    figures = figures_of(ops.run("migrate", "--yes", "--json"))

    # THEN every record is in today's shape, and every pending one is where `pending` (and the reconciler) look
    assert_every_record_current(ops)
    wait_past_their_creation_second(ops.event_records().values())  # those indexed now are as created now
    listed = {
        json.loads(line)["event_id"] for line in ops.run("pending", "--older-than", "0s", "--json").stdout.splitlines()
    }
    assert listed == pending
    # AND those it put on a shard are indexed as created now (never behind a reconciler checkpoint)
    records = ops.event_records()
    for event_id in (*seeded["pending_not_indexed"], *seeded["pending_other_shard"]):
        assert int(records[event_id]["created_at"]) >= NOW, event_id
    # AND the figures count each kind
    assert figures["by_kind"] == {
        "pending_not_indexed": 4,
        "pending_other_shard": 3,
        "pending_expiring": 0,
        "sent_still_indexed": 0,
        "sent_without_ttl": 2,
    }
    assert (figures["scanned"], figures["changed"], figures["already_current"]) == (18, 9, 9)
    assert (figures["changed_meanwhile"], figures["unrecognised"], figures["dry_run"]) == (0, 0, False)
    assert figures["records_per_second"] > 0


def test_a_second_run_changes_nothing(ops: OpsWorld) -> None:
    # GIVEN a table migrated once
    seed_every_shape(ops)
    assert figures_of(ops.run("migrate", "--yes", "--json"))["changed"] == 9
    after_first = ops.event_records()

    # WHEN migrate runs again
    figures = figures_of(ops.run("migrate", "--yes", "--json"))

    # THEN it finds everything current and writes nothing
    assert (figures["changed"], figures["already_current"], figures["scanned"]) == (0, 18, 18)
    assert ops.event_records() == after_first


def test_dry_run_counts_what_a_run_changes_and_writes_nothing(ops: OpsWorld) -> None:
    # GIVEN the older shapes, and no --yes (a dry run needs none)
    seed_every_shape(ops)
    before = ops.event_records()

    # WHEN migrate runs with --dry-run
    dry = figures_of(ops.run("migrate", "--dry-run", "--json"))

    # THEN nothing changed, and it counted exactly what the real run then changes
    assert ops.event_records() == before
    assert dry["dry_run"] is True
    real = figures_of(ops.run("migrate", "--yes", "--json"))
    assert (dry["by_kind"], dry["changed"], dry["already_current"]) == (
        real["by_kind"],
        real["changed"],
        real["already_current"],
    )


def test_without_a_terminal_it_needs_yes(ops: OpsWorld) -> None:
    # GIVEN an older record / WHEN migrate runs from a script without --yes
    seed_every_shape(ops)
    before = ops.event_records()
    result = ops.run("migrate")
    # THEN it refuses (usage error) and writes nothing
    assert result.exit_code == 2
    assert "--yes" in result.stderr
    assert ops.event_records() == before


class CrashingDynamoDB:
    """A DynamoDB client whose ``update_item`` raises ``error`` on call number ``at`` (a crash or an outage)."""

    def __init__(self, client: Any, *, at: int, error: BaseException) -> None:
        self._client, self._at, self._error = client, at, error
        self.updates = 0
        self.scanned = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def scan(self, **kwargs: Any) -> Any:
        response = self._client.scan(**kwargs)
        self.scanned += len(response.get("Items", []))
        return response

    def update_item(self, **kwargs: Any) -> Any:
        self.updates += 1
        if self.updates == self._at:
            raise self._error
        return self._client.update_item(**kwargs)


def test_a_crash_mid_run_then_a_rerun_with_the_checkpoint_completes(ops: OpsWorld, tmp_path: Path) -> None:
    # GIVEN the older shapes and a run that crashes (an unforeseen error, the process dies) at its 6th write,
    # saving its position every 4 records
    seed_every_shape(ops)
    checkpoint = tmp_path / "migrate.json"
    crashing = CrashingDynamoDB(ops.dynamodb, at=6, error=RuntimeError("the process died here"))
    crashed = ops.run(
        "migrate", "--yes", "--json", "--page-size", "4", "--checkpoint", str(checkpoint), dynamodb=crashing
    )
    assert isinstance(crashed.exception, RuntimeError)
    assert checkpoint.exists()
    saved = json.loads(checkpoint.read_text())
    assert saved["start_key"] is not None
    assert 0 < saved["figures"]["scanned"] < 18

    # WHEN it is run again with the same checkpoint
    counting = CrashingDynamoDB(ops.dynamodb, at=0, error=RuntimeError("never"))
    figures = figures_of(
        ops.run("migrate", "--yes", "--json", "--page-size", "4", "--checkpoint", str(checkpoint), dynamodb=counting)
    )

    # THEN it resumed (it scanned only what the first run had not finished) and completed the table
    assert counting.scanned == 18 - saved["figures"]["scanned"]
    assert_every_record_current(ops)
    # AND its figures cover the whole table, each record once
    assert figures["scanned"] == 18
    assert figures["changed"] + figures["already_current"] == 18
    assert not checkpoint.exists()  # done: a later run starts over (and finds everything current)


def test_an_aws_error_stops_the_run_with_the_key_to_resume_from(ops: OpsWorld) -> None:
    # GIVEN the older shapes and DynamoDB refusing the 5th write (throttled beyond botocore's retries)
    seed_every_shape(ops)
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "UpdateItem")
    failing = CrashingDynamoDB(ops.dynamodb, at=5, error=throttled)

    # WHEN migrate runs
    stopped = ops.run("migrate", "--yes", "--page-size", "4", dynamodb=failing)

    # THEN it stops (exit 1) saying why and how to go on
    assert stopped.exit_code == 1
    assert "ThrottlingException" in stopped.stderr
    start_key = stopped.stderr.split("--start-key ", 1)[1].split()[0]
    # AND a rerun from that key completes the table
    rerun = ops.run("migrate", "--yes", "--json", "--start-key", start_key)
    assert rerun.exit_code == 0, rerun.output
    assert_every_record_current(ops)


class ActsBeforeUpdate:
    """A DynamoDB client that lets ``act(event_id)`` run just before migrate's update of that record."""

    def __init__(self, client: Any, act: Callable[[str], None]) -> None:
        self._client, self._act = client, act

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def update_item(self, **kwargs: Any) -> Any:
        self._act(kwargs["Key"]["event_id"]["S"])
        return self._client.update_item(**kwargs)


def test_a_record_a_consumer_marks_sent_meanwhile_is_left_as_the_consumer_left_it(ops: OpsWorld) -> None:
    # GIVEN a record 0.1.0 left pending, and a consumer that notifies and marks it while migrate runs
    event_id = "v1-pending-raced"
    ops.dynamodb.put_item(
        TableName=ops.events_table, Item=record_0_1_0(event_id, "o-1", "sha-1", created_at=CREATED, sent=False)
    )
    store = OrderStore(
        client=ops.dynamodb,
        processed_events_table=ops.events_table,
        order_records_table=ops.orders_table,
        record_ttl_seconds=TTL_SECONDS,
    )
    consumer = ActsBeforeUpdate(
        ops.dynamodb, lambda e: store.mark_sent(Notification(event_id=e, order_id="o-1", payload_sha256="sha-1"))
    )

    # WHEN migrate reaches it after the consumer's mark
    figures = figures_of(ops.run("migrate", "--yes", "--json", dynamodb=consumer))

    # THEN the sent record is not put back into the pending index (the condition failed), and it says so
    record = ops.event_records()[event_id]
    assert record["status"] == "sent"
    assert "pending_shard" not in record
    assert (figures["changed"], figures["changed_meanwhile"]) == (0, 1)


def test_a_record_the_ttl_deletes_meanwhile_is_not_created_again(ops: OpsWorld) -> None:
    # GIVEN a sent record 0.1.0 left in the pending index after a rollback, deleted by the TTL while migrate runs
    event_id = "rollback-sent-expired"
    ops.dynamodb.put_item(TableName=ops.events_table, Item=sent_by_0_1_0_after_rollback(event_id))
    expiring = ActsBeforeUpdate(
        ops.dynamodb, lambda e: ops.dynamodb.delete_item(TableName=ops.events_table, Key={"event_id": {"S": e}})
    )

    # WHEN migrate reaches it
    figures = figures_of(ops.run("migrate", "--yes", "--json", dynamodb=expiring))

    # THEN no stub record is written in its place
    assert ops.event_records() == {}
    assert figures["changed_meanwhile"] == 1


@pytest.mark.parametrize("terminal", [True, False])
def test_progress_is_shown_only_on_a_terminal(ops: OpsWorld, monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    # GIVEN the older shapes, and stdout a terminal or not
    seed_every_shape(ops)
    monkeypatch.setattr(migrate_module, "stdout_is_terminal", lambda: terminal)
    # WHEN migrate runs
    result = ops.run("migrate", "--yes")
    # THEN the progress bar is drawn on a terminal only; the figures are printed either way
    assert result.exit_code == 0, result.output
    assert ("migrating" in result.stdout) == terminal
    summary = result.stdout.splitlines()[-1]
    assert "scanned 18, changed 9 [4 pending_not_indexed, 3 pending_other_shard, 2 sent_without_ttl]" in summary
    assert "already current 9" in summary
    assert "records/s" in summary


def test_keys_0_1_0_derived_without_escaping_are_counted_and_kept(ops: OpsWorld) -> None:
    # GIVEN a record under 0.1.0's unescaped key of an order id holding '|'
    import hashlib

    order_id = "acme|2026|1"
    legacy = hashlib.sha256(order_id.encode()).hexdigest()
    ops.dynamodb.put_item(
        TableName=ops.events_table, Item=record_0_1_0(legacy, order_id, "s", created_at=CREATED, sent=True)
    )
    # WHEN migrate runs
    figures = figures_of(ops.run("migrate", "--yes", "--json"))
    # THEN it is counted, and stays under its key (its order row and subscribers know it by that key)
    assert figures["legacy_key"] == 1
    assert set(ops.event_records()) == {legacy}


def test_checkpoint_of_another_table_is_refused(ops: OpsWorld, tmp_path: Path) -> None:
    # GIVEN a checkpoint file of another table
    checkpoint = tmp_path / "c.json"
    checkpoint.write_text(json.dumps({"version": 1, "table": "other", "start_key": "x", "figures": {}}))
    # WHEN / THEN migrate refuses to resume from it
    result = ops.run("migrate", "--yes", "--checkpoint", str(checkpoint))
    assert result.exit_code == 1
    assert "not a migrate checkpoint of table 'processed-events'" in result.stderr


def test_a_sent_record_without_ttl_gets_the_pipelines_record_retention(ops: OpsWorld) -> None:
    # GIVEN a consumer function kept records 40 days (record_retention), and a sent record without a ttl
    iam = boto3.client("iam")
    role = iam.create_role(RoleName="consumer", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    forty_days = 40 * 86400
    boto3.client("lambda").create_function(
        FunctionName="order-consumer",
        Runtime="python3.14",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
        Environment={"Variables": {"RECORD_TTL_SECONDS": str(forty_days)}},
    )
    record = current_record("kept-40-days", sent=True)
    del record["ttl"]
    ops.dynamodb.put_item(TableName=ops.events_table, Item=record)
    # WHEN migrate runs
    before = int(time.time())
    result = ops.run("migrate", "--yes")
    # THEN the record expires 40 days from now, not after the 30-day default, and the run says where that came from
    assert result.exit_code == 0, result.output
    ttl = int(
        ops.dynamodb.get_item(TableName=ops.events_table, Key={"event_id": {"S": "kept-40-days"}})["Item"]["ttl"]["N"]
    )
    assert before + forty_days <= ttl <= int(time.time()) + forty_days
    assert f"{forty_days} s from now (RECORD_TTL_SECONDS of function order-consumer)" in result.stderr


def test_without_a_readable_function_the_default_retention_is_used_and_said() -> None:
    # GIVEN a sent record without ttl, classified with no retention given / THEN the consumer's default applies
    change = migrate_module.classify(
        {k: v for k, v in current_record("e", sent=True).items() if k != "ttl"}, now=1000, shards=32
    )
    assert isinstance(change, migrate_module.Change)
    assert change.values[":ttl"] == {"N": str(1000 + DEFAULT_RECORD_TTL_SECONDS)}
