"""The reliability invariants, one home for the stateful chaos (``test_stateful``) and the explorer (``tests.verify``).

Each check takes what a run observed (the state records, the order rows, the notifications, the
parked messages and the messages the producer sent) and raises ``AssertionError`` naming what broke.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import payload_sha256, resolve_event_id
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_body

Records = Mapping[str, Mapping[str, Any]]


@dataclass
class Message:
    """One message the producer sent, as a model of SQS tracks it."""

    record: dict[str, Any]
    valid: bool
    event_id: str | None = None
    order_id: str | None = None
    sha: str | None = None
    receives: int = 0
    in_flight: bool = False
    acknowledged: bool = False
    #: Moved to the DLQ by the queue's redrive policy (never by the consumer): not lost, not checked.
    redriven: bool = False

    @property
    def message_id(self) -> str:
        return str(self.record["messageId"])


def describe(body: str, key: str | None) -> tuple[str, str, str] | None:
    """(event_id, order_id, payload sha) for a valid message, None for an invalid one."""
    try:
        order = parse_body(body)
        if not isinstance(order.get("order_id"), str) or not order["order_id"]:
            return None
        return resolve_event_id(order, key), order["order_id"], payload_sha256(order)
    except Exception:
        return None


@dataclass(frozen=True)
class Observed:
    """The end state of a run: tables, notifications per event, error codes per parked message id."""

    records: Records
    rows: Records
    notified: Counter[str]
    parked: Mapping[str, list[str]]
    #: Events whose record DynamoDB's TTL deleted once it was sent (the explorer models the expiry).
    expired: frozenset[str] = field(default_factory=frozenset)


def parked_reasons(dead_letters: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Error codes per source message id, from DLQ messages as ReceiveMessage returns them."""
    parked: dict[str, list[str]] = {}
    for dead in dead_letters:
        attributes = dead["MessageAttributes"]
        parked.setdefault(attributes["source_message_id"]["StringValue"], []).append(
            attributes["error_code"]["StringValue"]
        )
    return parked


def recorded_events_own_their_rows_and_sent_ones_were_published(
    records: Records, rows: Records, notified: Counter[str]
) -> None:
    """At all times: a record's order row is its own (same event, same content); a sent one was notified."""
    for event_id, record in records.items():
        assert "order_id" in record, f"state record {event_id!r} without its order id: {dict(record)}"
        row = rows.get(record["order_id"])
        assert row is not None, f"state record {event_id!r} without its order row {record['order_id']!r}"
        assert row["event_id"] == event_id, (event_id, row)
        assert row["payload_sha256"] == record["payload_sha256"], (event_id, row)
        if record["status"] == "sent":  # never marked sent before the notification was accepted
            assert notified[event_id] >= 1, f"{event_id!r} is sent but was never notified"


def every_row_has_a_state_record(records: Records, rows: Records, expired: frozenset[str] = frozenset()) -> None:
    """At all times: an order row's state record exists (or expired after it was sent)."""
    for order_id, row in rows.items():
        assert row["event_id"] in records or row["event_id"] in expired, f"order row {order_id!r} without its record"


def final_state(messages: Iterable[Message], observed: Observed) -> None:
    """After the queue drained and the reconciler ran: every message's fate, every record sent and notified."""
    records, rows, notified, parked = observed.records, observed.rows, observed.notified, observed.parked
    for message in messages:
        message_id = message.message_id
        if message.redriven and message_id not in parked:
            continue  # moved to the DLQ by the queue's redrive policy: not lost
        if not message.valid:
            assert set(parked.get(message_id, [])) == {"INVALID_MESSAGE"}, message_id
            continue
        record = records.get(message.event_id or "")
        row = rows.get(message.order_id or "")
        if record is not None:
            holds_my_payload = record["payload_sha256"] == message.sha
        else:
            holds_my_payload = row is not None and row["payload_sha256"] == message.sha
        if message_id in parked:
            # parked only as a conflict, and only when the recorded content differs
            assert set(parked[message_id]) == {"IDEMPOTENCY_CONFLICT"}, (message_id, parked[message_id])
            assert not holds_my_payload, f"message {message_id} parked as a conflict, yet its content is recorded"
            continue
        # acknowledged: its content is what is recorded, and it was notified once sent
        assert message.acknowledged, f"message {message_id} neither acknowledged nor parked"
        assert holds_my_payload, f"message {message_id} acknowledged, yet another content is recorded"
        if record:
            assert record["status"] == "sent", f"{message.event_id!r} acknowledged but {record['status']}"
            assert notified[message.event_id or ""] >= 1, f"{message.event_id!r} acknowledged, never notified"
    # every recorded event (accepted) has exactly its own row, is sent and notified at least once:
    # unconditionally, since the reconciler notified what no copy of a message was left to redeliver
    for event_id, record in records.items():
        assert rows[record["order_id"]]["event_id"] == event_id
        assert record["status"] == "sent", f"{event_id!r} still {record['status']} after the drain and the reconciler"
        assert notified[event_id] >= 1, f"{event_id!r} sent but never notified"
