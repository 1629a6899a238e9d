"""The invariants the explorer checks: at a call, at an acknowledgement, after every move, at the end.

The state invariants shared with the stateful chaos live in :mod:`tests.reliability.invariants`; the
checks here need what only the explorer sees: the order of calls, the moment of each
acknowledgement, each actor's logical clock and the state at the moment of a read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import STATUS_PENDING, STATUS_SENT
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import (
    ADDED_ATTRIBUTES,
    REASON_ATTRIBUTES,
    producer_attributes,
)
from tests.reliability import invariants
from tests.reliability.invariants import Message
from tests.verify import redrive
from tests.verify.world import EVENTS_TABLE, PENDING_SHARD_ATTRIBUTE, World, is_mark, marked

# --- at the moment of a call (after-call hooks) -------------------------------------------------------


def marked_only_after_sns_accepted(
    world: World, actor: str, operation: str, request: Mapping[str, Any], response: Mapping[str, Any]
) -> None:
    """A sent mark that applied follows SNS accepting that event's notification with that content."""
    if operation != "BatchExecuteStatement" or not is_mark(request) or "Error" in response:
        return
    answers = response.get("Responses", [])
    for (event_id, sha), answer in zip(marked(request), answers, strict=True):
        if "Error" in answer:
            continue  # this statement did not apply
        assert any(e == event_id and s == sha for e, s, _ in world.notifications), (
            f"{actor} marked {event_id} sent before SNS accepted its notification"
        )


def fifo_groups_commit_in_order(messages: Sequence[Message]) -> Any:
    """On a FIFO queue a message's order is committed only once every earlier message of its group is
    committed with its content, parked or acknowledged (SQS hands a group over in order)."""
    groups: dict[str, list[Message]] = {}
    for message in messages:
        group = message.record["attributes"].get("MessageGroupId")
        if group is not None and message not in groups.get(group, []):
            groups.setdefault(group, []).append(message)

    def check(
        world: World, actor: str, operation: str, request: Mapping[str, Any], response: Mapping[str, Any]
    ) -> None:
        if operation != "TransactWriteItems" or "Error" in response:
            return
        event_id = request["TransactItems"][0]["Put"]["Item"]["event_id"]["S"]
        records, parked = world.records(), world.parked_ever()
        for group in groups.values():
            ids = [m.event_id for m in group]
            if event_id not in ids:
                continue
            for earlier in group[: ids.index(event_id)]:
                record = records.get(earlier.event_id or "")
                done = (record is not None and record["payload_sha256"] == earlier.sha) or earlier.acknowledged
                assert done or earlier.message_id in parked, (
                    f"{actor} committed {event_id} before {earlier.event_id}, earlier in its FIFO group"
                )

    return check


def reconciler_reads_are_current(reads: dict[str, dict[str, str | None]]) -> Any:
    """The reconciler notifies only a record that was pending at the moment it read it (its reads are
    consistent: an eventually consistent read could show a record sent meanwhile as pending)."""

    def check(
        world: World, actor: str, operation: str, request: Mapping[str, Any], response: Mapping[str, Any]
    ) -> None:
        if not actor.startswith("R") or "Error" in response:
            return
        if operation == "BatchGetItem" and EVENTS_TABLE in request["RequestItems"]:
            records = world.records()
            reads[actor] = {
                key["event_id"]["S"]: (records.get(key["event_id"]["S"]) or {}).get("status")
                for key in request["RequestItems"][EVENTS_TABLE]["Keys"]
            }
        if operation == "PublishBatch":
            for entry in request["PublishBatchRequestEntries"]:
                event_id = entry["MessageAttributes"]["event_id"]["StringValue"]
                status = reads.get(actor, {}).get(event_id)
                assert status == STATUS_PENDING, (
                    f"{actor} notified {event_id}, which was {status} when it read it (a stale read)"
                )

    return check


# --- at an acknowledgement ------------------------------------------------------------------------------


def acknowledged_ones_are_sent_or_parked(world: World, actor: str, acknowledged: Sequence[Message]) -> None:
    """At the handler's return: every message it acknowledges is parked (a redrive may have moved the park
    out of the DLQ since), or its event is sent (or expired)."""
    records, parked = world.records(), world.parked_ever()
    for message in acknowledged:
        if message.message_id in parked or not message.valid:
            continue
        record = records.get(message.event_id or "")
        status = None if record is None else record.get("status")
        assert status == STATUS_SENT or message.event_id in world.expired, (
            f"{actor} acknowledged message {message.message_id} while {message.event_id} is {status}"
        )


def returned_before_the_deadline(world: World, actor: str, budget_ms: int) -> None:
    """The handler returns before its invocation's deadline (each call costs ``world.call_ms`` of it)."""
    assert world.clock_ms[actor] < budget_ms, (
        f"{actor} returned after its deadline: {world.clock_ms[actor]} ms of calls in a {budget_ms} ms invocation"
    )


# --- after every move -------------------------------------------------------------------------------------


def state_now(world: World, messages: Sequence[Message], *, messages_redeliver: bool) -> None:
    """Rows and records belong together, nothing is sent unnotified, and nothing pending is unreachable:
    a pending record is in the index at or after its shard's reconciler checkpoint, or a message that
    will be redelivered carries its event."""
    records, rows = world.records(), world.rows()
    invariants.recorded_events_own_their_rows_and_sent_ones_were_published(records, rows, world.notified())
    invariants.every_row_has_a_state_record(records, rows, frozenset(world.expired))
    parked = world.parked_ever()
    for event_id, record in records.items():
        behind = world.behind_checkpoint(record)
        if record["status"] != STATUS_PENDING or (PENDING_SHARD_ATTRIBUTE in record and not behind):
            continue
        carried = messages_redeliver and any(
            m.event_id == event_id
            and m.sha == record["payload_sha256"]
            and not m.acknowledged
            and m.message_id not in parked
            for m in messages
        )
        where = "behind its shard's reconciler checkpoint" if behind else "out of the index"
        assert carried, f"{event_id} is pending, {where}, and no message will redeliver it"


# --- at the end ------------------------------------------------------------------------------------------


def dead_letters_carry_their_reason(messages: Sequence[Message]) -> Any:
    """Every message in the DLQ is one SQS's redrive policy moved there (it carries no reason of the
    consumer's, whatever attributes it has), or one the consumer parked: then it carries its reason
    (``error_code``, ``error_message``, the id of the message it received) and the producer's attributes
    as sent, beside the reason or packed in the envelope, so that a redrive returns the message as the
    producer sent it. A message parked again after a redrive carries its new reason, and the producer's
    attributes, never the earlier reason, as its originals.

    A call check (``SendMessage``/``SendMessageBatch`` to the DLQ) and, called with ``world`` alone, a
    final one; ``messages`` grows by the copies a redrive makes."""

    def check(world: World, *call: Any) -> None:
        if call and (call[1] not in ("SendMessage", "SendMessageBatch") or "Error" in call[3]):
            return
        ids = {m.message_id for m in messages}
        for entry in world.dlq():
            envelope = entry.envelope()
            if envelope is None:
                assert entry.moved_by_sqs, f"DLQ message {entry.message_id} has no envelope, and SQS did not move it"
                continue
            source = entry.attribute("source_message_id")
            assert source in ids, f"a parked message whose source_message_id {source!r} is no message received"
            for name in REASON_ATTRIBUTES:
                assert entry.attribute(name), f"parked message {source!r} without its reason ({name})"
            assert set(envelope.added) == set(ADDED_ATTRIBUTES), (source, envelope.added)
            kept = redrive.producer_view(producer_attributes(redrive.lambda_attributes(entry.attributes)))
            sent = redrive.producer_view(redrive.original_record(source, messages, world.origins)["messageAttributes"])
            assert kept == sent, (
                f"parked message {source!r} does not carry the producer's attributes as sent: {kept} != {sent}"
            )

    return check


def final(world: World, messages: Sequence[Message]) -> None:
    """After the drain: the shared final invariants, every parked message's reason, and every event sent
    was notified after its commit. A message whose every park a redrive moved back hands its fate to
    its copy (the copy is checked instead)."""
    observed = invariants.Observed(
        records=world.records(),
        rows=world.rows(),
        notified=world.notified(),
        parked=world.parked(),
        expired=frozenset(world.expired),
    )
    handed_over = set(world.origins.values()) - set(observed.parked)
    invariants.every_row_has_a_state_record(observed.records, observed.rows, observed.expired)
    invariants.final_state([m for m in messages if m.message_id not in handed_over], observed)
    dead_letters_carry_their_reason(messages)(world)
    for event_id, position in world.commits.items():
        assert any(e == event_id and at > position for e, _, at in world.notifications), (
            f"{event_id} was never notified after its commit"
        )
