"""A rollback to 0.2.0, and the seconds of a deploy when 0.2.0 and the current code both run.

0.2.0 (``tests/compat/v0_2_0/``, run as released in a child process on this test's moto) meets what
the current code wrote. Its consumer finishes any record the current one left pending when the
message comes back (same record shape, same conditions). Its reconciler and its ``pending`` query
only shards ``"0"`` to ``"15"``, while today's consumer spreads pending records over 32: a record
the current code left pending on shard 16-31 with no message left would wait, unseen, until the
next upgrade. And today's sent records keep their index entry (the mark writes no index key),
while 0.2.0's index held only pending records: its reconciler reads every entry older than its
threshold on every run, so it would read every sent record of the retention period, oldest first,
on every run (it notifies none of them: it reads each record's status). The guard
(docs/upgrading.md): with the rollback, ``order-pipeline migrate --for-rollback-to 0.2.0`` puts
every pending record on 0.2.0's shards and takes every sent record out of the index.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import pending_shard
from idempotent_order_pipeline.keys import derive_event_id
from tests.compat.released import V0_2_0, ReleasedFunctions, released_functions
from tests.compat.shapes import shard_0_2_0, wait_past_their_creation_second
from tests.consumer.harness import ArmedFault, client_error, sqs_record
from tests.ops.conftest import OpsWorld

#: Starts processes (the test tiers' rule).
pytestmark = pytest.mark.slow

ORDERS = [{"order_id": f"r-{i}", "amount": i + 1} for i in range(12)]
EVENT_IDS = {derive_event_id(order) for order in ORDERS}


def sns_down(ops: OpsWorld) -> None:
    ops.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))


def left_pending_by_the_current_consumer(ops: OpsWorld) -> list[dict[str, Any]]:
    """The current consumer records the orders while SNS is down: pending on today's 32 shards."""
    sns_down(ops)
    records = [sqs_record(order) for order in ORDERS]
    assert len(ops.invoke(records)["batchItemFailures"]) == len(ORDERS)
    ops.board.disarm()
    shards = {int(r["pending_shard"]) for r in ops.event_records().values()}
    assert any(shard >= 16 for shard in shards)  # beyond what 0.2.0 reads
    return records


def test_0_2_0_notifies_what_the_current_consumer_left_pending_when_the_messages_come_back(
    ops: OpsWorld, v0_2_0: ReleasedFunctions
) -> None:
    # GIVEN orders the current consumer left pending, then a rollback to 0.2.0
    records = left_pending_by_the_current_consumer(ops)
    rows = ops.order_rows()

    # WHEN 0.2.0 receives their messages again
    response = v0_2_0.invoke(records)

    # THEN each is notified once and marked sent the way 0.2.0 marks (out of the index, with a ttl)
    assert response == {"batchItemFailures": []}
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)
    assert all(r["status"] == "sent" and "pending_shard" not in r and "ttl" in r for r in ops.event_records().values())
    assert ops.order_rows() == rows


def test_0_2_0_reconciler_misses_shards_16_to_31_until_migrate_for_rollback_puts_them_on_its_own(
    ops: OpsWorld, v0_2_0: ReleasedFunctions
) -> None:
    # GIVEN orders the current consumer left pending with no message left, then a rollback to 0.2.0
    left_pending_by_the_current_consumer(ops)
    beyond = {e for e in EVENT_IDS if int(pending_shard(e)) >= 16}
    assert beyond

    # WHEN 0.2.0's reconciler runs
    first = v0_2_0.reconcile()

    # THEN it notifies only the records on shards 0-15: the others are stuck while 0.2.0 runs
    assert first["reconciled"] == len(EVENT_IDS - beyond)
    assert {e for e, r in ops.event_records().items() if r["status"] == "pending"} == beyond

    # WHEN the guard runs (docs/upgrading.md, "Rolling back to 0.2.0"), then 0.2.0's reconciler again
    migrated = ops.run("migrate", "--for-rollback-to", "0.2.0", "--yes", "--json")
    second = v0_2_0.reconcile()

    # THEN the stuck ones were put on 0.2.0's shards, and now every order is notified exactly once
    assert migrated.exit_code == 0, migrated.output
    assert json.loads(migrated.stdout)["by_kind"]["pending_other_shard"] == len(beyond)
    assert second["reconciled"] == len(beyond)
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)
    assert {r["status"] for r in ops.event_records().values()} == {"sent"}


def test_migrate_for_rollback_takes_sent_records_out_of_the_index_0_2_0_reads_whole(
    ops: OpsWorld, v0_2_0: ReleasedFunctions
) -> None:
    # GIVEN orders the current consumer delivered normally (sent, their index entries kept), then a
    # rollback to 0.2.0
    assert ops.invoke([sqs_record(order) for order in ORDERS]) == {"batchItemFailures": []}
    assert all(r["status"] == "sent" and "pending_shard" in r for r in ops.event_records().values())
    wait_past_their_creation_second(ops.event_records().values())

    # WHEN 0.2.0's reconciler runs before the guard
    before = v0_2_0.reconcile()

    # THEN it notifies none of them (it reads each record's status) but reads every one on shards 0-15
    on_its_shards = {e for e in EVENT_IDS if int(pending_shard(e)) < 16}
    assert on_its_shards
    assert (before["found"], before["reconciled"], before["already_sent"]) == (
        len(on_its_shards),
        0,
        len(on_its_shards),
    )

    # WHEN the guard runs (docs/upgrading.md, "Rolling back to 0.2.0"), then 0.2.0's reconciler again
    migrated = ops.run("migrate", "--for-rollback-to", "0.2.0", "--yes", "--json")
    after = v0_2_0.reconcile()

    # THEN every sent record left the index (0.2.0's shape: sent, a ttl, no shard), and the run reads none
    assert migrated.exit_code == 0, migrated.output
    assert json.loads(migrated.stdout)["by_kind"]["sent_still_indexed"] == len(EVENT_IDS)
    assert all(r["status"] == "sent" and "pending_shard" not in r and "ttl" in r for r in ops.event_records().values())
    assert after["found"] == 0
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)


def test_after_migrate_for_rollback_the_current_code_still_finds_every_pending_record(ops: OpsWorld) -> None:
    # GIVEN records the current consumer left pending, put on 0.2.0's shards for a rollback that was
    # then abandoned (the current version deployed again)
    left_pending_by_the_current_consumer(ops)
    assert ops.run("migrate", "--for-rollback-to", "0.2.0", "--yes").exit_code == 0
    assert all(r["pending_shard"] == shard_0_2_0(e) for e, r in ops.event_records().items())

    # WHEN the operator lists them and migrates back to today's shape
    wait_past_their_creation_second(ops.event_records().values())
    listed = ops.run("pending", "--older-than", "0s", "--json")
    back = ops.run("migrate", "--yes", "--json")

    # THEN every one was listed (today's reads query every shard), and each is on today's shard again
    assert {json.loads(line)["event_id"] for line in listed.stdout.splitlines()} == EVENT_IDS
    assert back.exit_code == 0, back.output
    assert all(r["pending_shard"] == pending_shard(e) for e, r in ops.event_records().items())


def test_both_versions_at_once_lose_nothing_and_leave_nothing_pending(ops: OpsWorld) -> None:
    # GIVEN a deploy in progress: some deliveries reach 0.2.0, some the current consumer, and each
    # version sees SNS fail at times
    first_half = [sqs_record(order) for order in ORDERS[:6]]
    second_half = [sqs_record(order) for order in ORDERS[6:]]
    sns_env = {**ops.env, "RECONCILE_AFTER_SECONDS": "0"}
    down_env = {**sns_env, "TOPIC_ARN": ops.topic_arn + "-gone"}
    with released_functions(V0_2_0, down_env) as old_without_sns, released_functions(V0_2_0, sns_env) as old:
        # WHEN 0.2.0 records the first half and fails to notify, the current consumer records the
        # second half and fails to notify, and each half is redelivered to the other version once,
        # and then once more to the version that failed
        assert len(old_without_sns.invoke(first_half)["batchItemFailures"]) == 6
        sns_down(ops)
        assert len(ops.invoke(second_half)["batchItemFailures"]) == 6
        assert len(ops.invoke(first_half)["batchItemFailures"]) == 6  # current, SNS still down for it
        ops.board.disarm()
        assert len(old_without_sns.invoke(second_half)["batchItemFailures"]) == 6
        assert ops.invoke(first_half) == {"batchItemFailures": []}
        assert old.invoke(second_half) == {"batchItemFailures": []}
        # AND later deliveries of everything reach both
        assert ops.invoke(first_half + second_half) == {"batchItemFailures": []}
        assert old.invoke(first_half + second_half) == {"batchItemFailures": []}

    # THEN every order was notified exactly once, every record is sent with a ttl (0.2.0's marks took
    # theirs out of the index, the current ones left their entry), one row each
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)
    assert all(r["status"] == "sent" and "ttl" in r for r in ops.event_records().values())
    assert set(ops.order_rows()) == {order["order_id"] for order in ORDERS}
