"""The "order recorded" notification, built from the stored order row: body, message attributes, FIFO ids.

Every path that publishes builds its notification here, from the order row as DynamoDB stores it
(attribute values, numbers as their canonical text): the consumer's first delivery and its
``pending`` branch (from the row it wrote, or the same content it just found), the reconciler (from
the row it reads) and so ``order-pipeline pending --resend`` too (the order it re-enqueues comes
back through the consumer's ``pending`` branch). So a republished notification is the first one
again, byte for byte, and subscribers deduplicate on ``event_id``.

* **Body** (:class:`NotificationFormat` ``body``): ``thin`` (the default) is the JSON object
  ``{"event_id", "order_id", "payload_sha256"}``; ``order`` is the whole stored row as canonical
  JSON (the order's fields plus ``event_id`` and ``payload_sha256``) when the entry fits SNS's
  :data:`~order_consumer.contract.batching.MAX_MESSAGE_BYTES`, else the thin body. Either way the
  body carries ``event_id`` (the subscribers' deduplication key) and ``order_id``.
* **Attributes**: ``event_id`` and ``order_id`` (String), then each configured field path
  (``country``, ``customer.tier``: a dotted path walks into objects), named by the path as written:
  a string is a ``String``, a number a ``Number`` (its exact text), an array of strings, numbers,
  booleans and nulls a ``String.Array`` (its JSON). A field that is absent, empty, of another type
  (an object, a boolean, null), a number outside SNS's range or a string with a character SQS
  refuses is left out, never an error. Should the attributes not fit next to the thin body, the
  largest configured ones are left out until they do.
* **FIFO ids** (on a FIFO topic): :mod:`order_consumer.contract.sns_ids`.

Standard library only: the Lambda asset ships it, and the library imports it from the distribution.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .batching import MAX_MESSAGE_ATTRIBUTES, MAX_MESSAGE_BYTES, NOT_SQS_TEXT, message_bytes, sqs_text
from .canonical_json import canonical_json
from .keys import EVENT_ID_FIELD
from .message import from_attribute_value
from .sns_ids import sns_deduplication_id, sns_group_id

ORDER_ID_FIELD = "order_id"
PAYLOAD_SHA256_FIELD = "payload_sha256"

#: ``notification_body``: the three ids only (the default).
BODY_THIN = "thin"
#: ``notification_body``: the whole stored order when it fits, else the thin body.
BODY_ORDER = "order"
BODIES = (BODY_THIN, BODY_ORDER)
#: The thin body's fields, in order.
THIN_BODY_FIELDS = (EVENT_ID_FIELD, ORDER_ID_FIELD, PAYLOAD_SHA256_FIELD)
#: The attributes every notification carries, whatever is configured.
BUILT_IN_ATTRIBUTES = (EVENT_ID_FIELD, ORDER_ID_FIELD)
#: Configurable attributes: SNS delivers at most 10 to an SQS subscription with raw message delivery.
MAX_CONFIGURED_ATTRIBUTES = MAX_MESSAGE_ATTRIBUTES - len(BUILT_IN_ATTRIBUTES)
#: SNS's rule for a message attribute name: letters, digits, ``_``, ``-`` and ``.``, at most 256 characters,
#: no leading, trailing or doubled ``.``, not starting with ``AWS.`` or ``Amazon.``.
ATTRIBUTE_NAME = re.compile(r"(?!\.)(?!.*\.\.)(?!.*\.$)(?!(?i:aws|amazon)\.)[A-Za-z0-9_.\-]{1,256}")
# SNS's Number range (message attribute data types): 38 digits of precision, magnitude 1E-128 to 1E+126.
_MIN_NUMBER_EXPONENT, _MAX_NUMBER_EXPONENT = -128, 126

AttributeValue = Mapping[str, Any]


def attribute_name_problem(path: str) -> str | None:
    """Why ``path`` cannot be a configured attribute (None when it can): the construct checks it at synth."""
    if not isinstance(path, str) or ATTRIBUTE_NAME.fullmatch(path) is None:
        return (
            f"{path!r} is not an SNS attribute name (letters, digits, _ - and ., 1-256 characters, "
            "no leading, trailing or doubled '.', not starting with 'AWS.' or 'Amazon.')"
        )
    if path in BUILT_IN_ATTRIBUTES:
        return f"{path!r} is always sent; list only other fields"
    return None


@dataclass(frozen=True)
class NotificationFormat:
    """What a pipeline's notifications carry on top of the ids (the construct's props, the functions' environment)."""

    attributes: tuple[str, ...] = ()
    body: str = BODY_THIN

    @property
    def needs_row(self) -> bool:
        """Whether building a notification reads the order's fields (else the ids are enough)."""
        return bool(self.attributes) or self.body == BODY_ORDER

    def row_attributes(self, identity: Sequence[str]) -> tuple[str, ...] | None:
        """The order row's attributes a notification reads: ``identity`` plus each path's top-level
        field, or None for the whole row (``body="order"``). The reconciler reads exactly these."""
        if self.body == BODY_ORDER:
            return None
        return tuple(dict.fromkeys((*identity, *(path.split(".", 1)[0] for path in self.attributes))))

    def attributes_text(self) -> str:
        """``NOTIFICATION_ATTRIBUTES``: the paths as a JSON array ("" when there are none)."""
        return json.dumps(list(self.attributes)) if self.attributes else ""

    @classmethod
    def parse(cls, attributes_text: str | None, body: str | None) -> NotificationFormat:
        """The format from the two environment variables; ValueError naming what is wrong."""
        paths: tuple[str, ...] = ()
        if attributes_text:
            try:
                parsed = json.loads(attributes_text)
            except ValueError:
                parsed = None
            if not isinstance(parsed, list) or not all(isinstance(path, str) for path in parsed):
                raise ValueError(f"{attributes_text!r:.200}: expected a JSON array of field paths")
            paths = tuple(parsed)
        problems = [problem for path in paths if (problem := attribute_name_problem(path))]
        if len(paths) > MAX_CONFIGURED_ATTRIBUTES:
            problems.append(f"{len(paths)} attributes; at most {MAX_CONFIGURED_ATTRIBUTES} besides event_id, order_id")
        if body not in (None, "", *BODIES):
            problems.append(f"body {body!r}: allowed {', '.join(BODIES)}")
        if problems:
            raise ValueError("; ".join(problems))
        return cls(attributes=paths, body=body or BODY_THIN)


@dataclass(frozen=True)
class Notification:
    """One notification as it is published: the ids (for the ``sent`` mark), the body and the attributes.

    Built by :func:`build_notification`; given the ids alone, it is the thin notification.
    """

    event_id: str
    order_id: str
    payload_sha256: str
    message: str = field(default="", repr=False)
    attributes: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.message:
            object.__setattr__(self, "message", _thin_body(self.event_id, self.order_id, self.payload_sha256))
        if not self.attributes:
            built_in = {EVENT_ID_FIELD: _string(self.event_id), ORDER_ID_FIELD: _string(self.order_id)}
            object.__setattr__(self, "attributes", built_in)

    @property
    def group_id(self) -> str:
        """The ``MessageGroupId`` on a FIFO topic: the order."""
        return sns_group_id(self.order_id)

    @property
    def deduplication_id(self) -> str:
        """The ``MessageDeduplicationId`` on a FIFO topic: the event."""
        return sns_deduplication_id(self.event_id)


def _thin_body(event_id: str, order_id: str, payload_sha256: str) -> str:
    return json.dumps(dict(zip(THIN_BODY_FIELDS, (event_id, order_id, payload_sha256), strict=True)))


def _string(text: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": text}


def _text(row: Mapping[str, AttributeValue], name: str) -> str:
    value = row.get(name) or {}
    return str(value.get("S", ""))


def _number_fits(text: str) -> bool:
    number = Decimal(text)
    return number.is_zero() or _MIN_NUMBER_EXPONENT <= number.adjusted() < _MAX_NUMBER_EXPONENT


def _scalar_json(value: AttributeValue) -> str | None:
    """One element of a ``String.Array`` as JSON, None when SNS cannot carry it."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return None if NOT_SQS_TEXT.search(inner) else json.dumps(inner, ensure_ascii=False)
    if kind == "N":
        return inner if _number_fits(inner) else None
    if kind == "BOOL":
        return "true" if inner else "false"
    if kind == "NULL":
        return "null"
    return None


def message_attribute(value: AttributeValue | None) -> dict[str, str] | None:
    """A stored value as an SNS message attribute, None when SNS cannot carry it (see the module docstring)."""
    if not value or len(value) != 1:
        return None
    ((kind, inner),) = value.items()
    if kind == "S":
        return _string(inner) if inner and not NOT_SQS_TEXT.search(inner) else None
    if kind == "N":
        return {"DataType": "Number", "StringValue": inner} if _number_fits(inner) else None
    if kind == "L":
        elements = [_scalar_json(element) for element in inner]
        if any(element is None for element in elements):
            return None
        return {"DataType": "String.Array", "StringValue": "[" + ",".join(elements) + "]"}  # type: ignore[arg-type]
    return None


def field_value(row: Mapping[str, AttributeValue], path: str) -> AttributeValue | None:
    """The stored value at a dotted ``path`` (``customer.tier``), None when absent."""
    value: AttributeValue | None = {"M": row}
    for name in path.split("."):
        if value is None or "M" not in value:
            return None
        value = value["M"].get(name)
    return value


def _order_body(row: Mapping[str, AttributeValue]) -> str:
    return sqs_text(canonical_json({name: from_attribute_value(dict(value)) for name, value in row.items()}))


def _attribute_bytes(name: str, attribute: Mapping[str, str]) -> int:
    return message_bytes("", {name: attribute})


def build_notification(row: Mapping[str, AttributeValue], fmt: NotificationFormat) -> Notification:
    """The notification of the stored order ``row`` (DynamoDB attribute values, as ``order_records`` holds it).

    The row carries ``event_id``, ``order_id`` and ``payload_sha256``; with a format that needs no
    field (:attr:`NotificationFormat.needs_row` false) those three are all it reads.
    """
    event_id, order_id, sha = _text(row, EVENT_ID_FIELD), _text(row, ORDER_ID_FIELD), _text(row, PAYLOAD_SHA256_FIELD)
    attributes: dict[str, Mapping[str, str]] = {EVENT_ID_FIELD: _string(event_id), ORDER_ID_FIELD: _string(order_id)}
    found = ((path, message_attribute(field_value(row, path))) for path in fmt.attributes)
    configured = {path: attribute for path, attribute in found if attribute is not None}
    thin = _thin_body(event_id, order_id, sha)
    # Largest first, so the fewest are left out should the thin body and the attributes not fit.
    for path in sorted(configured, key=lambda p: _attribute_bytes(p, configured[p]), reverse=True):
        if message_bytes(thin, {**attributes, **configured}) <= MAX_MESSAGE_BYTES:
            break
        del configured[path]
    attributes.update((path, configured[path]) for path in fmt.attributes if path in configured)
    body = thin
    if fmt.body == BODY_ORDER:
        whole = _order_body(row)
        if message_bytes(whole, attributes) <= MAX_MESSAGE_BYTES:
            body = whole
    return Notification(event_id=event_id, order_id=order_id, payload_sha256=sha, message=body, attributes=attributes)


def ids_row(event_id: str, order_id: str, payload_sha256: str) -> dict[str, AttributeValue]:
    """The part of an order row a format without fields reads (the reconciler's read when it needs no more)."""
    return {
        EVENT_ID_FIELD: {"S": event_id},
        ORDER_ID_FIELD: {"S": order_id},
        PAYLOAD_SHA256_FIELD: {"S": payload_sha256},
    }


def with_event_id(row: Mapping[str, AttributeValue], event_id: str) -> dict[str, AttributeValue]:
    """``row`` as stored by ``event_id`` (the consumer's copy of a row another key wrote)."""
    return {**row, EVENT_ID_FIELD: {"S": event_id}}
