"""The reconciler's checkpoints: each shard's entries are read once, a pending one holds its shard's
checkpoint until it is notified, racing runs never move a checkpoint past what either handled, and a
record adopted from an earlier version is found whatever its own creation time."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import DEFAULT_IDENTITY_FIELDS
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_order_message
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.notification import Notification
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    CHECKPOINT_EVENT_ID,
    INDEX_PROPAGATION_MARGIN_SECONDS,
    PENDING_SHARD_ATTRIBUTE,
    pending_shard,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.pending_records import Checkpoints, PendingIndex
from idempotent_order_pipeline._lambda_asset.order_consumer.store import OrderStore
from tests.consumer.harness import client_error
from tests.reconciler.harness import TTL_SECONDS, ArmedFault, ReconcilerWorld, order

NOW = 1_800_000_000.0
HOUR = 3600.0


def clock_at(now: float) -> Callable[[], float]:
    return lambda: now


def record_reads(world: ReconcilerWorld) -> int:
    """Event ids the reconciler's BatchGetItems asked for on the events table, so far."""
    return sum(
        len(part["Keys"])
        for request in world.board.requests.get("batch_get_item", [])
        for table, part in request["RequestItems"].items()
        if table == world.events_table
    )


def test_a_sent_record_behind_the_checkpoint_is_not_read_again(world: ReconcilerWorld) -> None:
    # GIVEN orders delivered normally (sent, their entries left in the index) an hour before a run
    world.deliver_normally([order(i) for i in range(5)])
    world.forget_notifications()  # the deliveries' own
    sent = set(world.records())
    assert world.pending_in_index() == sent

    # WHEN a run reads them, and later runs follow
    first = world.reconciler(clock=clock_at(NOW)).run()
    reads_after_first = record_reads(world)
    later = [world.reconciler(clock=clock_at(NOW + minutes * 60)).run() for minutes in (5, 10)]

    # THEN the first run read each record once and notified none; the later runs read none of them
    assert (first.found, first.already_sent, first.reconciled) == (5, 5, 0)
    assert reads_after_first == 5
    assert [report.found for report in later] == [0, 0]
    assert record_reads(world) == 5
    assert world.notified() == {}
    # AND every shard's checkpoint is the first run's upper bound (nothing was left behind)
    checkpoints = world.checkpoints()["checkpoints"]
    assert set(checkpoints) >= {pending_shard(event_id) for event_id in sent}
    assert all(Decimal(str(start)) >= Decimal(NOW - 900) for start in checkpoints.values())


def test_a_record_pending_past_the_threshold_after_a_run_is_published_by_a_later_one(world: ReconcilerWorld) -> None:
    # GIVEN a run that found nothing, then a record left pending just after its upper bound
    assert world.reconciler(clock=clock_at(NOW)).run().found == 0
    [event_id] = world.pend([order(1)], created_at=NOW - 900 + 10)

    # WHEN the next run comes five minutes later (the record is now older than the threshold)
    report = world.reconciler(clock=clock_at(NOW + 300)).run()

    # THEN it is published and sent
    assert report.reconciled == 1
    assert world.notified() == {event_id: 1}
    assert world.pending_records() == set()


def test_a_stuck_pending_record_keeps_its_shards_checkpoint_behind_it(world: ReconcilerWorld) -> None:
    # GIVEN an old pending record, a sent one created after it in the same shard, and SNS failing
    [stuck] = world.pend([order(1)], created_at=NOW - 2 * HOUR)
    shard = pending_shard(stuck)
    later = next(i for i in range(2, 500) if pending_shard(world_event_id(order(i))) == shard)
    [sent] = world.pend([order(later)], created_at=NOW - HOUR)
    OrderStore(
        client=world.dynamodb,
        processed_events_table=world.events_table,
        order_records_table=world.orders_table,
        record_ttl_seconds=TTL_SECONDS,
    ).mark_sent_batch([notification_of(world, sent)])
    world.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))

    # WHEN a run meets the outage
    first = world.reconciler(clock=clock_at(NOW)).run()

    # THEN the stuck record is left pending and its shard's checkpoint stays at its creation time
    assert first.left_pending == 1
    assert Decimal(str(world.checkpoints()["checkpoints"][shard])) == Decimal(int(NOW - 2 * HOUR))
    # AND the next run, with SNS back, reads it again and notifies it; the checkpoint passes it
    world.board.disarm()
    second = world.reconciler(clock=clock_at(NOW + 300)).run()
    assert second.reconciled == 1
    assert world.notified() == {stuck: 1}
    assert Decimal(str(world.checkpoints()["checkpoints"][shard])) > Decimal(NOW - HOUR)


def test_the_checkpoint_stays_the_index_margin_behind_the_threshold(world: ReconcilerWorld) -> None:
    # GIVEN a record pending 20 s longer than the threshold, inside the index's 60 s propagation margin
    [event_id] = world.pend([order(1)], created_at=NOW - 900 - 20)

    # WHEN a run with the margin comes now, and another a minute later
    first = world.reconciler(clock=clock_at(NOW), index_margin_seconds=60).run()
    checkpoint = Decimal(str(world.checkpoints()["checkpoints"][pending_shard(event_id)]))
    second = world.reconciler(clock=clock_at(NOW + 60), index_margin_seconds=60).run()

    # THEN the first neither read it nor moved its checkpoint past it; the second published it
    assert first.found == 0
    assert checkpoint == Decimal(f"{NOW - 900 - 60:.3f}") < Decimal(int(NOW - 900 - 20))
    assert second.reconciled == 1
    assert world.notified() == {event_id: 1}


def test_an_adopted_record_is_found_behind_its_shards_checkpoint(world: ReconcilerWorld) -> None:
    # GIVEN a record an earlier version left pending without a shard (0.1.0: no index), created two
    # hours ago, and a run that moved every checkpoint past that time
    body = order(1)
    event_id = world_event_id(body)
    world.pend([body], created_at=NOW - 2 * HOUR)
    world.dynamodb.update_item(
        TableName=world.events_table,
        Key={"event_id": {"S": event_id}},
        UpdateExpression=f"REMOVE {PENDING_SHARD_ATTRIBUTE}",
    )
    world.reconciler(clock=clock_at(NOW)).run()
    assert world.pending_records() == {event_id}

    # WHEN a redelivery adopts it (the consumer's adoption, at its own time), and a run comes after
    adopted = OrderStore(
        client=world.dynamodb,
        processed_events_table=world.events_table,
        order_records_table=world.orders_table,
        record_ttl_seconds=TTL_SECONDS,
        clock=clock_at(NOW),
    ).adopt_pending(event_id, parse_order_message_sha(body))
    report = world.reconciler(clock=clock_at(NOW + 900 + 60)).run()

    # THEN the adoption gave it the time of the adoption, and the run published it
    assert adopted
    assert world.records()[event_id]["created_at"] == int(NOW)
    assert report.reconciled == 1
    assert world.notified() == {event_id: 1}


class _RacedIndex(PendingIndex):
    """A PendingIndex whose first checkpoint write lets another run go first (from start to end)."""

    def __init__(self, other_run: Callable[[], Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._other_run: Callable[[], Any] | None = other_run
        self.written: list[bool] = []

    def advance(self, read: Checkpoints, starts: Mapping[str, Decimal]) -> bool:
        if self._other_run is not None:
            other, self._other_run = self._other_run, None
            other()
        self.written.append(super().advance(read, starts))
        return self.written[-1]


def test_of_two_racing_runs_only_one_writes_and_neither_passes_what_it_left_pending(world: ReconcilerWorld) -> None:
    # GIVEN two old pending records of one shard
    shard = pending_shard(world_event_id(order(1)))
    other = next(i for i in range(2, 500) if pending_shard(world_event_id(order(i))) == shard)
    first = world.pend([order(1)], created_at=NOW - 2 * HOUR)[0]
    second = world.pend([order(other)], created_at=NOW - HOUR)[0]

    # WHEN run A reads, publishes and marks both, and before its checkpoint write run B (a second
    # later) runs whole: it finds both sent and writes its checkpoints
    def run_b() -> None:
        world.reconciler(clock=clock_at(NOW + 1)).run()

    index = _RacedIndex(
        run_b,
        client=world.guarded_dynamodb,
        processed_events_table=world.events_table,
        order_records_table=world.orders_table,
    )
    run_a = world.reconciler(clock=clock_at(NOW))
    run_a._index = index  # the same reconciler, its index raced
    report_a = run_a.run()

    # THEN A's write found B's revision and wrote nothing; B's checkpoint stands; both records were
    # notified (by A) and are sent
    assert index.written == [False]
    assert report_a.checkpoints_advanced == 0
    stored = world.checkpoints()
    assert stored["revision"] == 1
    assert Decimal(str(stored["checkpoints"][shard])) == Decimal(f"{NOW + 1 - 900:.3f}")
    assert world.pending_records() == set()
    assert world.notified() == {first: 1, second: 1}


def test_racing_runs_never_pass_an_entry_the_winner_left_pending(world: ReconcilerWorld) -> None:
    # GIVEN an old pending record, and SNS failing for the run that writes its checkpoints first
    [event_id] = world.pend([order(1)], created_at=NOW - 2 * HOUR)
    shard = pending_shard(event_id)

    def run_b_with_sns_down() -> None:
        world.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))
        world.reconciler(clock=clock_at(NOW)).run()
        world.board.disarm()

    # WHEN run A reads the checkpoints first, and B runs whole (and fails to publish) before A's scan
    class _ReadThenRace(PendingIndex):
        raced = False

        def checkpoints(self) -> Checkpoints:
            read = super().checkpoints()
            if not self.raced:
                self.raced = True
                run_b_with_sns_down()
            return read

    index = _ReadThenRace(
        client=world.guarded_dynamodb, processed_events_table=world.events_table, order_records_table=world.orders_table
    )
    run_a = world.reconciler(clock=clock_at(NOW))
    run_a._index = index
    report_a = run_a.run()

    # THEN B's checkpoint (at the record) stood: it is the only write, since A's was over the revision
    # it read before B wrote; A published the record all the same, and the stored checkpoint never
    # passed the record while it was pending
    assert report_a.reconciled == 1
    assert report_a.checkpoints_advanced == 0
    stored = world.checkpoints()
    assert stored["revision"] == 1
    assert Decimal(str(stored["checkpoints"][shard])) == Decimal(int(NOW - 2 * HOUR))
    assert world.notified() == {event_id: 1}


def test_a_failed_checkpoint_read_reads_no_shard_and_leaves_the_age_unknown(world: ReconcilerWorld) -> None:
    # GIVEN an old pending record, and DynamoDB throttling the checkpoint read
    world.pend([order(1)], created_at=NOW - HOUR)
    world.board.arm(ArmedFault(client_error("GetItem", "ThrottlingException", "slow down"), operation="get_item"))

    # WHEN a run comes
    report = world.reconciler(clock=clock_at(NOW)).run()

    # THEN no shard was read (the age is unknown: its alarm treats that as breaching), nothing written
    assert report.shards_unread == 32
    assert not report.oldest_pending_age_known
    assert not report.complete
    assert "reconciler's checkpoints" in report.errors[0]
    assert "query" not in world.board.requests
    assert world.checkpoints() == {}


def test_the_checkpoint_item_is_never_an_order(world: ReconcilerWorld) -> None:
    # GIVEN a run that wrote its checkpoints
    world.deliver_normally([order(1)])
    world.reconciler(clock=clock_at(NOW)).run()
    assert world.checkpoints()["event_id"] == CHECKPOINT_EVENT_ID

    # WHEN the consumer is sent a message whose key is the checkpoint item's
    body = {**order(2), "event_id": CHECKPOINT_EVENT_ID}
    world.deliver_expecting_a_park(body)

    # THEN it is parked as invalid; the checkpoint item is unchanged and no order row was written
    assert "order-00002" not in world.order_rows()
    assert world.checkpoints()["revision"] == 1


def world_event_id(body: dict[str, Any]) -> str:
    return parse_order_message(json.dumps(body), {}, DEFAULT_IDENTITY_FIELDS).event_id


def parse_order_message_sha(body: dict[str, Any]) -> str:
    return parse_order_message(json.dumps(body), {}, DEFAULT_IDENTITY_FIELDS).payload_sha256


def notification_of(world: ReconcilerWorld, event_id: str) -> Notification:
    record = world.records()[event_id]
    return Notification(event_id=event_id, order_id=record["order_id"], payload_sha256=record["payload_sha256"])


def test_the_deployed_reconciler_allows_the_index_a_minute_of_lag() -> None:
    # GIVEN the contract's margin (the test session sets the module's copy to 0: moto has no lag)
    # WHEN the reconciler's default is read / THEN it is a minute, past reconcile_after
    assert INDEX_PROPAGATION_MARGIN_SECONDS == 60
