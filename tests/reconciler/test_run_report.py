"""What a run reports and logs: completeness, a call in flight at the deadline, failed reads and marks, anomalies.

The deadline is ``remaining_ms``, a function the test controls; a call is held in flight by a rewrite
that waits for the test to let it go. The log lines are the Powertools logger's JSON (``log_stream``).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import every_shard
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciliation import ABANDONED
from tests.consumer.harness import client_error
from tests.reconciler.harness import ArmedFault, ReconcilerWorld, order

NOW = 1_800_000_000.0
HOUR = 3600.0
MARGIN_MS = 1_000


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


def logged(stream: io.StringIO, message: str) -> list[dict[str, Any]]:
    return [line for line in log_lines(stream) if line["message"] == message]


def hold_reads(world: ReconcilerWorld) -> tuple[threading.Event, threading.Event]:
    """BatchGetItem calls wait for ``release`` (at most 5 s); ``started`` is set when the first one begins."""
    started, release = threading.Event(), threading.Event()

    def rewrite(request: dict[str, Any], send: Callable[..., Any]) -> Any:
        started.set()
        release.wait(timeout=5)
        return send(**request)

    world.board.rewrites["batch_get_item"] = rewrite
    return started, release


def test_a_run_with_no_time_left_reads_nothing_and_reports_itself_incomplete(world: ReconcilerWorld) -> None:
    # GIVEN an old pending record and an invocation with less time left than a call needs
    world.pend([order(1)], created_at=NOW - HOUR)
    # WHEN a run starts
    report = world.reconciler(clock=lambda: NOW, min_remaining_ms=5_000, return_margin_ms=0).run(lambda: 1_000)
    # THEN it read no shard, found nothing, and says it is incomplete (the next run must not be skipped)
    assert (report.found, report.shards_unread, report.complete) == (0, len(every_shard()), False)
    assert world.board.total == 0


def test_a_call_in_flight_at_the_deadline_is_abandoned_and_its_records_stay_pending(
    world: ReconcilerWorld, log_stream: io.StringIO
) -> None:
    # GIVEN an old pending record (its shard read to the end at once), and its read held in flight until the
    # deadline has come (less time left than a call needs, and than the margin the run returns at, as by default)
    world.pend([order(1)], created_at=NOW - HOUR)
    started, release = hold_reads(world)
    remaining = lambda: MARGIN_MS if started.is_set() else 60_000  # noqa: E731 - the deadline comes with the read
    try:
        # WHEN a run meets it
        report = world.reconciler(clock=lambda: NOW, min_remaining_ms=2 * MARGIN_MS, return_margin_ms=MARGIN_MS).run(
            remaining
        )
        # (the run's threads, taken while its read is still held: once released, the worker may end at once)
        workers = [thread for thread in threading.enumerate() if thread.name == "reconciler-run"]
    finally:
        release.set()
    # THEN the run returns at its margin, incomplete for the call in flight alone, its record counted as left
    # pending, nothing notified
    assert report.errors == [ABANDONED]
    assert (report.complete, report.reconciled, report.left_pending) == (False, 0, 1)
    assert report.oldest_pending_age_seconds == HOUR
    assert world.notified() == {}
    # AND it logged why, on the warning level
    [warning] = logged(log_stream, ABANDONED)
    assert warning["level"] == "WARNING"
    # AND the abandoned work was the run's own named thread, which ends once its call answers, out of time:
    # it publishes nothing more
    [worker] = workers
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert world.notified() == {}


def test_a_run_waits_for_its_work_while_any_time_is_left_before_the_margin(world: ReconcilerWorld) -> None:
    # GIVEN three old pending records, reads that take a moment, and 1 ms more than the margin left, for ever
    world.pend([order(i) for i in range(3)], created_at=NOW - HOUR)
    started, release = hold_reads(world)
    threading.Timer(0.3, release.set).start()
    # WHEN a run starts
    report = world.reconciler(clock=lambda: NOW, min_remaining_ms=0, return_margin_ms=MARGIN_MS).run(
        lambda: MARGIN_MS + 1
    )
    # THEN it waited for its work: all three reconciled, complete, nothing abandoned
    assert started.is_set()
    assert (report.reconciled, report.complete, report.errors) == (3, True, [])


def test_each_run_logs_its_report(world: ReconcilerWorld, log_stream: io.StringIO) -> None:
    # GIVEN two old pending records
    world.pend([order(i) for i in range(2)], created_at=NOW - HOUR)
    # WHEN a run reconciles them
    report = world.reconciler(clock=lambda: NOW).run()
    # THEN its one report line carries the report's figures
    [line] = logged(log_stream, "reconciliation run")
    assert {key: line[key] for key in report.as_dict()} == report.as_dict()
    assert (line["reconciled"], line["complete"]) == (2, True)


def test_reads_that_fail_are_logged_with_their_error(world: ReconcilerWorld, log_stream: io.StringIO) -> None:
    # GIVEN an old pending record whose read DynamoDB throttles
    world.pend([order(1)], created_at=NOW - HOUR)
    world.board.arm(ArmedFault(client_error("BatchGetItem", "ThrottlingException", "slow down"), "batch_get_item"))
    # WHEN a run meets it
    report = world.reconciler(clock=lambda: NOW).run()
    # THEN the record stays pending and the warning names the failed call and why
    assert report.left_pending == 1
    [warning] = logged(log_stream, "pending records not read")
    assert warning["level"] == "WARNING"
    assert warning["error"].startswith("DynamoDB failed BatchGetItem on ")
    assert warning["error"].endswith(
        ": An error occurred (ThrottlingException) when calling the BatchGetItem operation: slow down"
    )


def test_marks_that_fail_are_logged_with_their_error(world: ReconcilerWorld, log_stream: io.StringIO) -> None:
    # GIVEN an old pending record, and DynamoDB throttling the sent marks
    world.pend([order(1)], created_at=NOW - HOUR)
    world.board.arm(
        ArmedFault(client_error("BatchExecuteStatement", "ThrottlingException", "slow down"), "batch_execute_statement")
    )
    # WHEN a run publishes it and cannot mark it
    world.reconciler(clock=lambda: NOW).run()
    # THEN the warning names the failed call and why
    [warning] = logged(log_stream, "published records not marked sent")
    assert warning["error"] == "DynamoDB failed the sent marks: ThrottlingException: slow down"


def test_a_record_without_its_order_row_is_logged_as_an_anomaly_naming_it(
    world: ReconcilerWorld, log_stream: io.StringIO
) -> None:
    # GIVEN an old pending record whose order row is gone
    [event_id] = world.pend([order(1)], created_at=NOW - HOUR)
    world.dynamodb.delete_item(TableName=world.orders_table, Key={"order_id": {"S": "order-00001"}})
    # WHEN a run finds it
    world.reconciler(clock=lambda: NOW).run()
    # THEN an error line names the event and the order, for the operator to look at
    [anomaly] = logged(log_stream, "ANOMALY: a pending record without its order row; not notified")
    assert (anomaly["level"], anomaly["event_id"], anomaly["order_id"]) == ("ERROR", event_id, "order-00001")
