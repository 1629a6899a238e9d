"""Negative controls: deliberate weakenings of the real code, applied by the harness for one exploration.

Each control patches the real modules (never their source) while its scenario is explored; the
explorer must find a violation for every one of them, or it is not good enough to trust its "0
violations". Each names the scenario and bounds where its violation is within reach.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer import dead_letter, pipeline, reconciliation, store
from idempotent_order_pipeline._lambda_asset.order_consumer.contract import message, parked
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import PENDING_SHARD_ATTRIBUTE
from tests.verify import checks, scenarios
from tests.verify.scenarios import Scenario
from tests.verify.scheduler import Bounds
from tests.verify.world import EVENTS_TABLE, World, _Http, stale_read


@dataclass(frozen=True)
class Control:
    """A weakening: its name, what it does, where it is caught, and the patch itself."""

    name: str
    weakening: str
    scenario: Callable[[], Scenario]
    bounds: Bounds
    patch: Callable[[], contextlib.AbstractContextManager[None]]
    #: Per execution, before the actors start: overrides or checks on the world.
    prepare: Callable[[World], None] | None = field(default=None)


@contextlib.contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def _mark_before_publish() -> contextlib.AbstractContextManager[None]:
    original = pipeline.OrderPipeline._publish_and_park

    def publish_and_park(self: Any, pool: Any, batch: Any, to_notify: Mapping[int, Any], to_park: Any) -> Any:
        self._mark(pool, batch, to_notify)
        return original(self, pool, batch, to_notify, to_park)

    return _replaced(pipeline.OrderPipeline, "_publish_and_park", publish_and_park)


def _mark_condition_dropped() -> contextlib.AbstractContextManager[None]:
    # Each mark an unconditional UpdateItem of its record (a PartiQL UPDATE never creates an item, so
    # dropping its WHERE alone would hide what a mark without its condition does): the mark no longer
    # depends on the record being pending with this content, nor on its being there.
    def mark_chunk(self: Any, notifications: Sequence[Any]) -> list[Any]:
        for notification in notifications:
            self._client.update_item(
                TableName=self._events_table,
                Key={"event_id": {"S": notification.event_id}},
                UpdateExpression="SET #status = :sent, sent_at = :now",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":sent": {"S": "sent"}, ":now": {"N": str(int(self._clock()))}},
            )
        return [store.MarkResult(notification, None) for notification in notifications]

    return _replaced(store.OrderStore, "_mark_chunk", mark_chunk)


def _acknowledge_before_commit() -> contextlib.AbstractContextManager[None]:
    original = pipeline._outcome

    def outcome(index: int, started: bool, facts: Any, *stages: Any) -> Any:
        if facts is not None and facts.next is pipeline.Next.RETRY:
            return pipeline.Outcome.DUPLICATE, None  # a failed transaction acknowledged
        return original(index, started, facts, *stages)

    return _replaced(pipeline, "_outcome", outcome)


def _index_entry_removed_before_notifying() -> contextlib.AbstractContextManager[None]:
    original = pipeline.OrderPipeline._publish_and_park

    def publish_and_park(self: Any, pool: Any, batch: Any, to_notify: Mapping[int, Any], to_park: Any) -> Any:
        for notification in to_notify.values():
            self._store._client.update_item(
                TableName=self._store._events_table,
                Key={"event_id": {"S": notification.event_id}},
                UpdateExpression=f"REMOVE {PENDING_SHARD_ATTRIBUTE}",
            )
        return original(self, pool, batch, to_notify, to_park)

    return _replaced(pipeline.OrderPipeline, "_publish_and_park", publish_and_park)


def _checkpoint_past_pending() -> contextlib.AbstractContextManager[None]:
    """The reconciler's checkpoint moved to the bound it read to, whatever it left pending."""
    original = reconciliation.Reconciler._advance

    def advance(self: Any, progress: Any, upper: Any) -> None:
        with progress.lock:
            for shard in progress.shards:
                shard.left, shard.buffer, shard.next_key = [], [], None
        original(self, progress, upper)

    return _replaced(reconciliation.Reconciler, "_advance", advance)


def _sns_refusing_until_the_drain(world: World) -> None:
    """SNS refusing every entry of every PublishBatch until the drain (an outage the drain outlives)."""

    def refuse(world: World, actor: str, request: Mapping[str, Any]) -> Any:
        if world.draining:
            return None
        failed = [
            {"Id": entry["Id"], "Code": "InternalError", "Message": "outage", "SenderFault": False}
            for entry in request["PublishBatchRequestEntries"]
        ]
        return _Http(200), {"Successful": [], "Failed": failed}

    world.overrides["PublishBatch"] = refuse


def _group_not_stopped() -> contextlib.AbstractContextManager[None]:
    # each record its own group while writing: a failure never stops the rest of its real FIFO group
    return _replaced(pipeline._Batch, "group", lambda self, index: index)


def _deadline_ignored() -> contextlib.AbstractContextManager[None]:
    return _replaced(pipeline.Deadlines, "passed", staticmethod(lambda instant: False))


@contextlib.contextmanager
def _packed_attributes_ignored() -> Iterator[None]:
    """The consumer reading a parked message's attributes without its envelope's packed originals (a
    packed ``idempotency_key`` unseen); a message never parked has no envelope, so only a redrive shows it."""

    def producer_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        return parked.unparked(attributes, parked.envelope_of(attributes, string_key="stringValue"))

    # every reader of the one function, under the name each imported it by
    with (
        _replaced(message, "producer_attributes", producer_attributes),
        _replaced(dead_letter, "producer_attributes", producer_attributes),
    ):
        yield


def _stale_reconciler_reads(world: World) -> None:
    """The reconciler's read of the records served from the table as it was at its index query."""
    snapshot: dict[str, Any] = {}

    def remember(
        world: World, actor: str, operation: str, request: Mapping[str, Any], response: Mapping[str, Any]
    ) -> None:
        if actor.startswith("R") and operation == "Query" and "Error" not in response:
            snapshot.clear()
            snapshot.update(_dynamodb_items(world))

    def answer(world: World, actor: str, request: Mapping[str, Any]) -> Any:
        if not actor.startswith("R") or EVENTS_TABLE not in request["RequestItems"]:
            return None
        return stale_read(snapshot, request)

    world.call_checks.insert(0, remember)
    world.call_checks.append(checks.reconciler_reads_are_current({}))
    world.overrides["BatchGetItem"] = answer


def _dynamodb_items(world: World) -> dict[str, dict[str, Any]]:
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    return {
        event_id: {name: serializer.serialize(value) for name, value in record.items()}
        for event_id, record in world.records().items()
    }


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


ONE_CRASH = Bounds(crashes=1, faults=0)
ONE_FAULT = Bounds(crashes=0, faults=1)
CLEAN = Bounds(crashes=0, faults=0)


def _same_content() -> Scenario:
    return next(s for s in scenarios.published() if s.name == "standard/same-content")


def _last_receive() -> Scenario:
    return next(s for s in scenarios.published() if s.name == "standard/last-receive")


def _conflict_redriven() -> Scenario:
    return next(s for s in scenarios.redrives() if s.name == "standard/conflict-redriven")


def _fifo_group() -> Scenario:
    return next(s for s in scenarios.published() if s.name == "fifo/group-of-two")


CONTROLS = (
    Control(
        "mark-before-publish", "the sent mark made before PublishBatch", _same_content, CLEAN, _mark_before_publish
    ),
    Control(
        "mark-condition-dropped",
        "the sent mark's condition always true (a late mark recreates an expired record)",
        scenarios.late_mark_after_expiry,
        CLEAN,
        _mark_condition_dropped,
    ),
    Control(
        "acknowledge-before-commit",
        "a record whose transaction failed acknowledged",
        _same_content,
        ONE_FAULT,
        _acknowledge_before_commit,
    ),
    Control(
        "eventually-consistent-read",
        "the reconciler's read of the records served from the table as of its index query",
        _same_content,
        CLEAN,
        _nothing,
        prepare=_stale_reconciler_reads,
    ),
    Control(
        "index-entry-removed-before-notifying",
        "the record taken out of the pending index before its notification",
        _last_receive,
        ONE_CRASH,
        _index_entry_removed_before_notifying,
    ),
    Control(
        "checkpoint-past-pending",
        "the reconciler's checkpoint moved past an entry it left pending (SNS refusing until the drain)",
        _last_receive,
        CLEAN,
        _checkpoint_past_pending,
        prepare=_sns_refusing_until_the_drain,
    ),
    Control(
        "fifo-group-not-stopped",
        "the rest of a FIFO group written after a failed record",
        _fifo_group,
        ONE_FAULT,
        _group_not_stopped,
    ),
    Control(
        "packed-attributes-ignored",
        "a parked message's packed attributes (its idempotency_key) ignored when it comes back",
        _conflict_redriven,
        CLEAN,
        _packed_attributes_ignored,
    ),
    Control(
        "deadline-ignored",
        "records started whatever time is left",
        scenarios.short_invocation,
        CLEAN,
        _deadline_ignored,
    ),
)
