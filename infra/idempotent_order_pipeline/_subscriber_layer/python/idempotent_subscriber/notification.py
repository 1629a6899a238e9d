"""The pipeline's notification, read from an SQS record of a queue subscribed to its topic.

Both deliveries are read, so a subscription can switch between them while messages are queued:

- SNS envelope (``RawMessageDelivery`` off): the body is SNS's JSON envelope; the notification is
  its ``Message`` and the message attributes are in its ``MessageAttributes``;
- raw delivery (``IdempotentSubscriber``'s default): the body is the notification itself and the
  message attributes are the SQS record's ``messageAttributes``.

Every body the pipeline publishes, thin (``{event_id, order_id, payload_sha256}``) or the stored
order (``notification_body="order"``), carries ``event_id`` and ``order_id``: ``event_id`` is what
the subscriber deduplicates on, the same for every copy of one event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import NotANotification

#: The envelope's fields that tell it from a raw body (a raw order body could have a ``Type`` field).
_ENVELOPE_FIELDS = ("Type", "MessageId", "TopicArn", "Message")


@dataclass(frozen=True)
class OrderNotification:
    """One copy of a notification: the same ``event_id``, ``order_id`` and body for every copy."""

    event_id: str
    order_id: str
    #: The whole body as published: the thin body, or the stored order with ``notification_body="order"``.
    body: Mapping[str, Any]
    #: The message attributes by name, each as its string value (a Number as written, a String.Array as JSON).
    attributes: Mapping[str, str] = field(default_factory=dict)


def _is_envelope(body: Any) -> bool:
    return isinstance(body, dict) and body.get("Type") == "Notification" and all(f in body for f in _ENVELOPE_FIELDS)


def _envelope_attributes(envelope: Mapping[str, Any]) -> dict[str, str]:
    attributes = envelope.get("MessageAttributes") or {}
    return {name: str(value.get("Value")) for name, value in attributes.items() if isinstance(value, dict)}


def _record_attributes(record: Mapping[str, Any]) -> dict[str, str]:
    attributes = record.get("messageAttributes") or {}
    return {
        name: str(value["stringValue"])
        for name, value in attributes.items()
        if isinstance(value, dict) and value.get("stringValue") is not None
    }


def parse(record: Mapping[str, Any]) -> OrderNotification:
    """The notification in a Lambda SQS record, delivered raw or in the SNS envelope.

    Raises:
        NotANotification: the body is not JSON (or nested too deep to parse), has no string
            ``event_id`` or ``order_id``, or its ``event_id`` message attribute (when present)
            disagrees with the body's.
    """
    try:
        outer = json.loads(record["body"])
        if _is_envelope(outer):
            message, attributes = json.loads(outer["Message"]), _envelope_attributes(outer)
        else:
            message, attributes = outer, _record_attributes(record)
    # ValueError: not JSON, or an integer of more digits than int() converts (sys.get_int_max_str_digits);
    # RecursionError: nested deeper than the interpreter's stack allows (about 1,000 levels on 3.11;
    # 3.14 measures the C stack instead and parses 10,000 levels).
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise NotANotification(f"not an order notification: {exc!r}") from exc
    if not isinstance(message, dict):
        raise NotANotification(f"not an order notification: the body is {type(message).__name__}, not an object")
    event_id, order_id = message.get("event_id"), message.get("order_id")
    if not isinstance(event_id, str) or not event_id or not isinstance(order_id, str) or not order_id:
        raise NotANotification("not an order notification: event_id and order_id must be non-empty strings")
    if "event_id" in attributes and attributes["event_id"] != event_id:
        raise NotANotification("the event_id message attribute and the body's event_id differ")
    return OrderNotification(event_id=event_id, order_id=order_id, body=message, attributes=attributes)
