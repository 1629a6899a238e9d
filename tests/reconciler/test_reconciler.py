"""The reconciler on moto: which records it finds, what it publishes and marks, crashes, races, deadlines, FIFO."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    PENDING_SHARD_ATTRIBUTE,
    every_shard,
    pending_shard,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciliation import RunReport
from tests.consumer.harness import client_error
from tests.reconciler.harness import ArmedFault, Crash, ReconcilerWorld, order

NOW = 1_800_000_000.0
HOUR = 3600.0


def clock_at(now: float) -> Callable[[], float]:
    return lambda: now


def run_until_done(world: ReconcilerWorld, max_runs: int = 50, **options: Any) -> tuple[int, list[RunReport]]:
    """Run the reconciler (a fresh one each time, like each scheduled run) until a run ends clean; count crashes."""
    crashes, reports = 0, []
    for _ in range(max_runs):
        try:
            report = world.reconciler(**options).run()
        except Crash:
            crashes += 1
            continue
        reports.append(report)
        if report.complete and report.left_pending == 0 and not report.errors:
            return crashes, reports
    raise AssertionError(f"not done after {max_runs} runs")


def test_finds_exactly_the_records_pending_longer_than_the_threshold(world: ReconcilerWorld) -> None:
    # GIVEN records pending for 2 hours, records pending for 10 minutes, and orders delivered normally
    old = world.pend([order(i) for i in range(12)], created_at=NOW - 2 * HOUR)
    fresh = world.pend([order(i) for i in range(100, 105)], created_at=NOW - 600)
    world.deliver_normally([order(i) for i in range(200, 203)])
    world.forget_notifications()  # the normal deliveries' notifications
    rows_before = world.order_rows()

    # WHEN the reconciler runs with a threshold of 15 minutes
    report = world.reconciler(reconcile_after_seconds=900, clock=clock_at(NOW)).run()

    # THEN exactly the old pending records were published, once each, and marked sent with a ttl (every
    # entry older than the threshold was read: the delivered ones too)
    assert world.notified() == dict.fromkeys(old, 1)
    assert (report.found, report.reconciled, report.left_pending, report.anomalies) == (15, 12, 0, 0)
    assert report.already_sent == 3  # the delivered orders' entries: read once, found sent
    assert report.oldest_pending_age_seconds == 0
    assert report.complete
    records = world.records()
    for event_id in old:
        assert records[event_id]["status"] == "sent"
        assert PENDING_SHARD_ATTRIBUTE in records[event_id]  # the mark leaves the index entry
        assert int(records[event_id]["ttl"]) > time.time()
    # AND the fresh ones are left to the normal redelivery: still pending, still in the index
    assert all(records[event_id]["status"] == "pending" for event_id in fresh)
    assert world.pending_records() == set(fresh)
    assert world.pending_in_index() >= set(fresh)
    # AND no order row was written or changed
    assert world.order_rows() == rows_before


def test_each_notification_has_the_consumers_content(world: ReconcilerWorld) -> None:
    # GIVEN one record left pending by a consumer that crashed between its transaction and its publish
    world.crash_consumer_before_publish([order(1, note="x")])
    [record] = world.records().values()

    # WHEN the reconciler runs with a threshold of 0
    world.reconciler(reconcile_after_seconds=0, clock=clock_at(time.time() + 1)).run()

    # THEN the notification carries the same event id, order id and fingerprint, body and attributes
    [notification] = world.new_notifications()
    assert json.loads(notification["Message"]) == {
        "event_id": record["event_id"],
        "order_id": "order-00001",
        "payload_sha256": record["payload_sha256"],
    }
    assert notification["MessageAttributes"]["event_id"]["Value"] == record["event_id"]
    assert notification["MessageAttributes"]["order_id"]["Value"] == "order-00001"


def test_publishes_once_per_run_per_record_across_shards_and_chunks(world: ReconcilerWorld) -> None:
    # GIVEN 160 old pending records spread over every shard (160 of these ids cover all 32)
    event_ids = world.pend_many([order(i) for i in range(160)], created_at=NOW - HOUR)
    assert {pending_shard(event_id) for event_id in event_ids} == set(every_shard())

    # WHEN one run handles them in small pages and chunks
    report = world.reconciler(clock=clock_at(NOW), page_size=7, chunk_size=4).run()

    # THEN every record was in exactly one PublishBatch entry and is marked sent
    assert report.reconciled == 160
    assert world.notified() == dict.fromkeys(event_ids, 1)
    assert {event_id: record["status"] for event_id, record in world.records().items()} == dict.fromkeys(
        event_ids, "sent"
    )
    # AND at most 10 entries went into each PublishBatch call
    assert world.board.calls["publish_batch"] >= 160 / 10


def test_a_record_already_sent_by_a_delivery_is_not_published_again(world: ReconcilerWorld) -> None:
    # GIVEN old pending records, one of which a late redelivery marks sent after the index was read
    event_ids = world.pend([order(i) for i in range(3)], created_at=NOW - HOUR)
    late = event_ids[0]

    def delivery_wins(request: dict[str, Any]) -> bool:
        world.dynamodb.update_item(
            TableName=world.events_table,
            Key={"event_id": {"S": late}},
            UpdateExpression="SET #s = :sent REMOVE pending_shard",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":sent": {"S": "sent"}},
        )
        return False

    world.board.arm(ArmedFault(Crash(), operation="batch_get_item", when=delivery_wins))

    # WHEN the reconciler runs (its consistent read comes after the delivery's mark)
    report = world.reconciler(clock=clock_at(NOW)).run()

    # THEN only the two still pending are published; the third is counted as already sent
    assert world.notified() == dict.fromkeys(event_ids[1:], 1)
    assert (report.reconciled, report.already_sent) == (2, 1)


def test_a_record_without_its_order_row_is_never_notified_and_stays_visible(world: ReconcilerWorld) -> None:
    # GIVEN an old pending record whose order row is gone, and one whose row belongs to another event
    missing, foreign, good = world.pend([order(1), order(2), order(3)], created_at=NOW - HOUR)
    world.dynamodb.delete_item(TableName=world.orders_table, Key={"order_id": {"S": "order-00001"}})
    world.dynamodb.update_item(
        TableName=world.orders_table,
        Key={"order_id": {"S": "order-00002"}},
        UpdateExpression="SET event_id = :other",
        ExpressionAttributeValues={":other": {"S": "another-event"}},
    )

    # WHEN the reconciler runs
    report = world.reconciler(clock=clock_at(NOW)).run()

    # THEN only the consistent one is notified; the anomalies stay pending and make the age metric
    assert world.notified() == {good: 1}
    assert report.anomalies == 2
    assert report.oldest_pending_age_seconds == HOUR
    assert world.pending_records() == {missing, foreign}
    # AND no order row was written
    assert "order-00001" not in world.order_rows()


def test_refused_notifications_stay_pending_and_the_next_run_sends_them(world: ReconcilerWorld) -> None:
    # GIVEN old pending records and SNS refusing every PublishBatch call
    event_ids = world.pend([order(i) for i in range(5)], created_at=NOW - HOUR)
    world.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))

    # WHEN a run meets the outage
    first = world.reconciler(clock=clock_at(NOW)).run()

    # THEN nothing is marked, the age metric shows the oldest, and the errors are reported
    assert first.reconciled == 0
    assert first.left_pending == 5
    assert first.oldest_pending_age_seconds == HOUR
    assert first.errors
    assert world.pending_records() == set(event_ids)
    assert world.notified() == {}

    # WHEN SNS recovers and the next run comes
    world.board.disarm()
    second = world.reconciler(clock=clock_at(NOW + 300)).run()

    # THEN every record is notified once and marked sent
    assert second.reconciled == 5
    assert world.notified() == dict.fromkeys(event_ids, 1)
    assert world.pending_records() == set()


def test_one_refused_entry_does_not_hold_back_the_others(world: ReconcilerWorld) -> None:
    # GIVEN old pending records and SNS refusing the entry of one of them
    event_ids = world.pend([order(i) for i in range(4)], created_at=NOW - HOUR)
    refused = event_ids[2]
    original = world.sns.publish_batch

    def partial(**request: Any) -> Any:
        entries = [e for e in request["PublishBatchRequestEntries"] if refused not in e["Message"]]
        failed = [e for e in request["PublishBatchRequestEntries"] if refused in e["Message"]]
        response = original(**{**request, "PublishBatchRequestEntries": entries}) if entries else {"Successful": []}
        response["Failed"] = [{"Id": e["Id"], "Code": "InternalError", "SenderFault": False} for e in failed]
        return response

    world.sns.publish_batch = partial  # type: ignore[method-assign]

    # WHEN the reconciler runs
    report = world.reconciler(clock=clock_at(NOW)).run()

    # THEN the others are notified and sent; the refused one stays pending
    assert report.reconciled == 3
    assert world.pending_records() == {refused}
    assert set(world.notified()) == set(event_ids) - {refused}


@pytest.mark.slow
@pytest.mark.parametrize("after_success", [False, True], ids=["crash-before-call", "crash-after-call"])
def test_survives_a_crash_at_every_call(make_world: Callable[..., ReconcilerWorld], after_success: bool) -> None:
    # GIVEN the number of AWS calls a clean run over 7 old pending records makes
    probe = make_world()
    probe.pend_many([order(i) for i in range(7)], created_at=NOW - HOUR)
    probe.reconciler(clock=clock_at(NOW), chunk_size=4).run()
    calls = probe.board.total
    assert calls > 16  # a query per shard, reads, publishes, marks

    for at in range(1, calls + 1):
        # GIVEN the same backlog and a crash armed at the at-th call
        world = make_world()
        event_ids = world.pend_many([order(i) for i in range(7)], created_at=NOW - HOUR)
        rows_before = world.order_rows()
        world.board.arm(ArmedFault(Crash(), at=at, after_success=after_success))

        # WHEN the scheduled runs go on until one finds nothing
        crashes, _ = run_until_done(world, clock=clock_at(NOW), chunk_size=4)

        # THEN the crash happened, every record is sent and notified at least once, rows untouched
        assert crashes == 1, at
        records = world.records()
        assert all(records[event_id]["status"] == "sent" for event_id in event_ids), at
        assert set(world.notified()) == set(event_ids), at
        assert world.pending_records() == set(), at
        assert world.order_rows() == rows_before, at


def test_two_concurrent_runs_notify_everything_and_agree_on_the_marks(world: ReconcilerWorld) -> None:
    # GIVEN 60 old pending records
    event_ids = world.pend_many([order(i) for i in range(60)], created_at=NOW - HOUR)

    # WHEN two runs start at the same moment (their calls interleave one by one)
    reports: list[RunReport] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        barrier.wait()
        reports.append(world.reconciler(clock=clock_at(NOW), chunk_size=3, page_size=5).run())

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # THEN every record is sent, notified once or twice (at least once), and nothing failed
    assert len(reports) == 2
    assert all(not report.errors and report.complete for report in reports)
    notified = world.notified()
    assert set(notified) == set(event_ids)
    assert set(notified.values()) <= {1, 2}
    assert {event_id: record["status"] for event_id, record in world.records().items()} == dict.fromkeys(
        event_ids, "sent"
    )
    # AND each record was published by each run at most once: the marks agree (True for the loser too)
    assert sum(report.reconciled for report in reports) == sum(notified.values())


@pytest.mark.slow
def test_a_huge_backlog_stops_before_the_deadline_and_resumes(world: ReconcilerWorld) -> None:
    # GIVEN 250 old pending records, and every AWS call costing 100 ms of a 12 s invocation
    event_ids = world.pend_many([order(i) for i in range(250)], created_at=NOW - HOUR)
    budget_ms, per_call_ms, margin_ms = 12_000, 100, 3_000

    def remaining_at(start_calls: int) -> Callable[[], int]:
        return lambda: budget_ms - (world.board.total - start_calls) * per_call_ms

    runs: list[RunReport] = []
    for _ in range(30):
        start = world.board.total
        remaining = remaining_at(start)
        # WHEN a scheduled run starts with that deadline
        report = world.reconciler(clock=clock_at(NOW), min_remaining_ms=margin_ms, chunk_size=10).run(remaining)
        runs.append(report)
        # THEN it returned before its deadline (no call started once less than the margin was left,
        # and the calls it had started by then fit in the rest)
        assert remaining() > 0
        if report.complete and report.found == 0:
            break

    # THEN the first run stopped short, later runs resumed where it stopped, and all were notified once
    assert not runs[0].complete
    assert 0 < runs[0].reconciled < 250
    assert runs[0].oldest_pending_age_seconds == HOUR
    assert sum(report.reconciled for report in runs) == 250
    assert world.notified() == dict.fromkeys(event_ids, 1)
    assert world.pending_records() == set()


def test_fifo_topic_gets_the_ids_the_consumer_sends(make_world: Callable[..., ReconcilerWorld]) -> None:
    # GIVEN a FIFO world where the consumer delivers an order normally, and another where it crashed
    normal, crashed = make_world(fifo=True), make_world(fifo=True)
    body = order(7, note="fifo")
    normal.deliver_normally([body])
    crashed.crash_consumer_before_publish([body])

    # WHEN the reconciler handles the crashed world's pending record
    report = crashed.reconciler(reconcile_after_seconds=0, clock=clock_at(time.time() + 1)).run()

    # THEN its notification has the same group and deduplication ids, and the same body, as the consumer's
    assert report.reconciled == 1
    [expected] = normal.new_notifications()
    [got] = crashed.new_notifications()
    assert json.loads(got["Message"]) == json.loads(expected["Message"])
    for attribute in ("MessageGroupId", "MessageDeduplicationId"):
        assert got["_sqs_attributes"].get(attribute) == expected["_sqs_attributes"].get(attribute), attribute
    assert got["_sqs_attributes"].get("MessageGroupId")
    assert [record["status"] for record in crashed.records().values()] == ["sent"]


def test_marks_that_fail_leave_the_published_records_pending_and_report_why(world: ReconcilerWorld) -> None:
    # GIVEN old pending records and DynamoDB throttling the sent marks (SNS works)
    event_ids = world.pend([order(i) for i in range(3)], created_at=NOW - HOUR)
    throttled = client_error("BatchExecuteStatement", "ThrottlingException", "slow down")
    world.board.arm(ArmedFault(throttled, operation="batch_execute_statement"))

    # WHEN a run publishes them and then cannot mark them
    report = world.reconciler(clock=clock_at(NOW)).run()

    # THEN each was notified, none is counted reconciled, all stay pending for the next run, and the
    # report says which call failed and why (once per chunk: the records' shards are read apart)
    assert world.notified() == dict.fromkeys(event_ids, 1)
    assert report.reconciled == 0
    assert report.left_pending == 3
    assert world.pending_records() == set(event_ids)
    assert report.errors
    assert set(report.errors) == {"DynamoDB failed the sent marks: ThrottlingException: slow down"}
