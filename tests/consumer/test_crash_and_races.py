"""Crash at every AWS call, consumers racing on one event, FIFO groups: the invariants still hold."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.config import Settings
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import build_pipeline
from tests.consumer.harness import (
    ArmedFault,
    Crash,
    World,
    cancelled_for,
    seed,
    sqs_record,
    written_event_ids,
)

# A clean delivery of the chaos batch makes exactly these AWS calls (asserted below), so crashing
# at every N in 1..MAX_CALLS covers every call of the batch: 3 record transactions (a transaction names
# an item once, so a record whose keys are already in it starts the next one: evt-1, evt-2 and o-3,
# committed; the re-sent copy of evt-1, the sent and the pending record, cancelled, each finding its
# own; the conflict on evt-sent), one PublishBatch for the records to notify, their sent marks (one
# BatchExecuteStatement), one SendMessageBatch parking the conflict and the invalid message.
CLEAN_CALLS = {"transact_write_items": 3, "publish_batch": 1, "batch_execute_statement": 1, "send_message_batch": 1}
MAX_CALLS = sum(CLEAN_CALLS.values())


def build_batch(world: World) -> tuple[list[dict[str, Any]], dict[str, str], set[str]]:
    """GIVEN-state and a batch with new, duplicate, pending, conflicting and invalid messages.

    Returns the records, the accepted event id per order id that this batch must notify, and
    the message ids that must end in the DLQ. In a FIFO world the records alternate between two
    message groups.
    """
    group = itertools.cycle(["g1", "g2"]) if world.fifo else itertools.repeat(None)
    seed(world, {"order_id": "o-sent"}, status="sent", event_id="evt-sent")
    seed(world, {"order_id": "o-pend"}, status="pending", event_id="evt-pend")
    new_body = {"order_id": "o-1", "event_id": "evt-1", "amount": 10}
    conflict = sqs_record({"order_id": "o-sent", "event_id": "evt-sent", "amount": 1}, group=next(group))
    invalid = sqs_record('{"order_id": ', group=next(group))
    records = [
        sqs_record(new_body, group=next(group)),
        sqs_record({"order_id": "o-2", "amount": 2}, key="evt-2", group=next(group)),
        sqs_record({"order_id": "o-3", "amount": 3}, group=next(group)),
        sqs_record(new_body, group=next(group)),  # the producer re-sent it: new message id, same key, same batch
        sqs_record({"order_id": "o-sent", "event_id": "evt-sent"}, group=next(group)),
        sqs_record({"order_id": "o-pend", "event_id": "evt-pend"}, group=next(group)),
        conflict,
        invalid,
    ]
    must_notify = {"o-1": "evt-1", "o-2": "evt-2", "o-3": derive_event_id({"order_id": "o-3"}), "o-pend": "evt-pend"}
    return records, must_notify, {conflict["messageId"], invalid["messageId"]}


def assert_invariants(world: World, must_notify: dict[str, str], parked: set[str]) -> None:
    rows = world.order_rows()
    states = world.event_records()
    # exactly one row per accepted order, carrying the accepted event, and no other rows
    assert set(rows) == {*must_notify, "o-sent"}
    for order_id, event_id in must_notify.items():
        assert rows[order_id]["event_id"] == event_id
        # every accepted event ends sent, and was notified at least once
        assert states[event_id]["status"] == "sent"
    notified = world.notified_events()
    assert all(notified[event_id] >= 1 for event_id in must_notify.values()), notified
    # the already-sent event was not re-published, and the conflict changed nothing
    assert notified["evt-sent"] == 0
    assert "amount" not in rows["o-sent"]
    # nothing lost: the conflict and the invalid message are in the DLQ (a crash after the send may
    # park a copy twice: at least once, never zero)
    dead = world.dead_letters()
    assert {m["MessageAttributes"]["source_message_id"]["StringValue"] for m in dead} == parked
    codes = {m["MessageAttributes"]["error_code"]["StringValue"] for m in dead}
    assert codes == {"IDEMPOTENCY_CONFLICT", "INVALID_MESSAGE"}


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_a_clean_batch_stays_within_the_crash_matrix(make_world: Callable[..., World], fifo: bool) -> None:
    # GIVEN the chaos batch and no faults
    world = make_world(fifo=fifo)
    records, must_notify, parked = build_batch(world)
    # WHEN it is delivered once
    response = world.invoke(records)
    # THEN it completes, within the number of calls the crash matrix covers
    assert response == {"batchItemFailures": []}
    assert world.board.calls == CLEAN_CALLS
    assert_invariants(world, must_notify, parked)


@pytest.mark.slow
@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
@pytest.mark.parametrize("after_success", [False, True], ids=["before-call", "after-success"])
@pytest.mark.parametrize("n", range(1, MAX_CALLS + 1))
def test_crash_at_every_call_loses_and_duplicates_nothing(
    make_world: Callable[..., World], n: int, after_success: bool, fifo: bool
) -> None:
    # GIVEN the chaos batch (standard or FIFO) and a crash armed at the n-th AWS call (before it is
    # sent, or after it succeeded)
    world = make_world(fifo=fifo)
    records, must_notify, parked = build_batch(world)
    world.board.arm(ArmedFault(Crash(f"crash at call {n}"), at=n, after_success=after_success))
    # WHEN SQS redelivers the batch until every record is acknowledged
    crashes = world.deliver_until_done(records)
    # THEN the crash happened at most once and every invariant holds
    assert crashes <= 1
    assert_invariants(world, must_notify, parked)


def test_two_consumers_racing_on_one_event_write_one_row(world: World) -> None:
    # GIVEN two consumers (two Lambda containers) and the same event delivered to both at once
    other = build_pipeline(Settings.from_env(world.env), world.clients)
    for round_number in range(20):
        body = {"order_id": f"o-race-{round_number}", "event_id": f"evt-race-{round_number}"}
        first, second = sqs_record(body), sqs_record(body)
        start = threading.Barrier(2)
        results: dict[str, Any] = {}

        def run_handler(
            record: dict[str, Any] = first, barrier: threading.Barrier = start, out: dict[str, Any] = results
        ) -> None:
            barrier.wait()
            out["handler"] = world.invoke([record])

        def run_other(
            record: dict[str, Any] = second, barrier: threading.Barrier = start, out: dict[str, Any] = results
        ) -> None:
            barrier.wait()
            out["other"] = other.process_batch([record])

        # WHEN both process it concurrently
        threads = [threading.Thread(target=run_handler), threading.Thread(target=run_other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # THEN both succeed
        assert results["handler"] == {"batchItemFailures": []}
        assert not results["other"][0].failed
    # AND each order has one row, its event is sent and notified at least once
    rows = world.order_rows()
    notified = world.notified_events()
    for round_number in range(20):
        assert rows[f"o-race-{round_number}"]["event_id"] == f"evt-race-{round_number}"
        assert world.event_records()[f"evt-race-{round_number}"]["status"] == "sent"
        assert notified[f"evt-race-{round_number}"] >= 1
    assert len(rows) == 20


def test_fifo_group_keeps_order_and_stops_after_a_failure(world: World) -> None:
    # GIVEN two FIFO groups, the second message of g1 fails transiently (its transaction conflicts)
    g1 = [sqs_record({"order_id": f"g1-{i}", "event_id": f"g1-{i}"}, group="g1") for i in range(3)]
    g2 = [sqs_record({"order_id": f"g2-{i}", "event_id": f"g2-{i}"}, group="g2") for i in range(2)]
    committed: list[str] = []

    def note_commit(request: dict[str, Any]) -> bool:
        committed.extend(written_event_ids(request))
        return False  # never fires: it only records the order of the committed writes

    world.board.arm(ArmedFault(Crash("never"), "transact_write_items", when=note_commit, after_success=True))
    conflict = cancelled_for(lambda event_id: event_id == "g1-1", "TransactionConflict", "None")
    world.board.arm(ArmedFault(conflict, "transact_write_items", when=lambda r: "g1-1" in written_event_ids(r)))
    interleaved = [g1[0], g2[0], g1[1], g2[1], g1[2]]
    # WHEN the batch is processed
    response = world.invoke(interleaved)
    # THEN the failed message and the rest of its group are reported, in order
    assert world.failures(response) == {g1[1]["messageId"], g1[2]["messageId"]}
    # AND the rest of g1 was never written nor notified, while g2 went through in order
    assert "g1-2" not in committed
    assert [e for e in committed if e.startswith("g1")] == ["g1-0"]
    assert [e for e in committed if e.startswith("g2")] == ["g2-0", "g2-1"]
    assert set(world.order_rows()) == {"g1-0", "g2-0", "g2-1"}
    assert set(world.notified_events()) == {"g1-0", "g2-0", "g2-1"}


def test_large_batch_beyond_the_worker_pool_is_processed(world: World) -> None:
    # GIVEN a batch of 35 records (more than the 10 worker threads)
    records = [sqs_record({"order_id": f"o-{i}"}) for i in range(35)]
    # WHEN processed
    response = world.invoke(records)
    # THEN every order is recorded and notified
    assert response == {"batchItemFailures": []}
    assert len(world.order_rows()) == 35
    assert len(world.notified_events()) == 35


def test_notification_body_is_json_with_the_keys(world: World) -> None:
    # GIVEN an order
    world.invoke([sqs_record({"order_id": "o-j", "event_id": "e-j", "secret": "4242"})])
    # WHEN a subscriber reads the notification
    [notification] = world.new_notifications()
    message = json.loads(notification["Message"])
    # THEN it names the event and order, with the payload fingerprint, and not the order's content
    assert message["event_id"] == "e-j"
    assert message["order_id"] == "o-j"
    assert len(message["payload_sha256"]) == 64
    assert "4242" not in notification["Message"]
