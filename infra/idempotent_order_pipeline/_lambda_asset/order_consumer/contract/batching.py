"""SQS and SNS batch limits, message sizes, and the one chunking rule every batch call uses.

The consumer's notifier (SNS ``PublishBatch``) and parking (SQS ``SendMessageBatch``), the producer
and the CLI's redrive all split their entries the same way (:func:`batch_calls`): consecutive chunks
of at most :data:`MAX_BATCH_ENTRIES` entries and :data:`MAX_BATCH_BYTES` bytes, counted by
:func:`message_bytes`. An entry larger than the byte limit on its own goes alone and the service
decides, so the caller reports the service's answer for it instead of dropping it silently.

Also here: the characters SQS and SNS refuse in text (:data:`NOT_SQS_TEXT`, :func:`sqs_text`) and
the conversion of a message attribute from the Lambda event's shape to SendMessage's
(:func:`send_attribute`).

Standard library only: the Lambda asset ships it, and the library and the CLI import it from the
distribution.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

#: Records per invocation when the construct's ``batch_size`` is not given (an SQS event source's own default).
EVENT_SOURCE_BATCH_SIZE = 10
#: Entries per ``SendMessageBatch``, ``PublishBatch``, ``DeleteMessageBatch`` and
#: ``ChangeMessageVisibilityBatch`` call, and messages per ``ReceiveMessage``.
MAX_BATCH_ENTRIES = 10
#: Bytes of bodies and attributes per batch call: SQS's and SNS's classic 256 KiB, which every queue
#: and topic accepts whatever its own maximum message size.
MAX_BATCH_BYTES = 256 * 1024
#: Message attributes per SQS message (and per SNS message delivered to SQS).
MAX_MESSAGE_ATTRIBUTES = 10
#: The largest message (body and attributes, as SQS counts them) the consumer is built and tested for:
#: the queue's ``MaximumMessageSize`` (the construct's ``max_message_size``) is at most this.
MAX_MESSAGE_BYTES = 256 * 1024
#: The dead-letter queue's ``MaximumMessageSize`` (SQS's largest). A parked message is the original
#: plus its reason and envelope: at most the original's body, three times its attributes (the
#: envelope's JSON escapes a non-ASCII character as up to 12 bytes for 4) and 8 KiB, so any message
#: of :data:`MAX_MESSAGE_BYTES` fits with room to spare, and is parked whole, never truncated.
DEAD_LETTER_MAX_MESSAGE_BYTES = 1024 * 1024

#: Characters SQS and SNS refuse in a body or a string attribute value. Their documented allowed set
#: is #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF: control characters and lone
#: surrogates above all. Written as the complement of that set within Unicode (the same characters,
#: checked over every code point by a test) because the negated class compiles into a table of the
#: whole range: 4-15 ms of every cold start for the same answer.
NOT_SQS_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def sqs_text(text: str) -> str:
    """``text`` with every character SQS refuses written as a ``\\uXXXX`` escape (else unchanged).

    Inside a JSON string the escape means the same character, so a JSON body keeps its meaning.
    """
    return NOT_SQS_TEXT.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def text_bytes(text: str) -> int:
    """Bytes of ``text`` in UTF-8; a lone surrogate counts as the three bytes it would take."""
    return len(text.encode("utf-8", "surrogatepass"))


def message_bytes(body: str, attributes: Mapping[str, Mapping[str, Any]] | None = None) -> int:
    """Bytes SQS and SNS count for a message: the body plus each attribute's name, type and value.

    ``attributes`` are in SendMessage's (and PublishBatch's) shape: ``DataType`` and ``StringValue``
    or ``BinaryValue`` (bytes).
    """
    size = text_bytes(body)
    for name, value in (attributes or {}).items():
        size += text_bytes(name) + text_bytes(str(value.get("DataType", "")))
        binary = value.get("BinaryValue")
        if isinstance(binary, bytes | bytearray):
            size += len(binary)
        else:
            size += text_bytes(str(value.get("StringValue", "")))
    return size


def send_attribute(attribute: Mapping[str, Any]) -> dict[str, Any]:
    """A message attribute in the Lambda event's shape (camelCase, base64 binary) in SendMessage's shape.

    A string value gets :func:`sqs_text`, so SQS accepts it whatever a hand-built event held.

    Raises:
        binascii.Error: ``binaryValue`` is not base64 (a hand-built event; SQS never delivers one).
    """
    data_type = str(attribute.get("dataType", "String"))
    if data_type.startswith("Binary"):
        return {"DataType": data_type, "BinaryValue": base64.b64decode(attribute.get("binaryValue") or "")}
    return {"DataType": data_type, "StringValue": sqs_text(str(attribute.get("stringValue", "")))}


def constrained_batches(
    items: Iterable[T],
    max_size: int,
    max_count: int | None = None,
    get_len: Callable[[T], int] = len,  # type: ignore[assignment]
    strict: bool = True,
) -> Iterator[list[T]]:
    """Consecutive batches of ``items``, each of at most ``max_count`` items and ``max_size`` in all.

    The shape of ``more_itertools.constrained_batches`` (which the Lambda asset cannot depend on):
    greedy and in order, so a batch ends only when the next item would break a limit. An item whose
    own size is over ``max_size`` raises ``ValueError`` when ``strict``, else goes in a batch alone.
    An empty input gives no batch.
    """
    if max_size <= 0:
        raise ValueError(f"max_size={max_size!r}: expected a positive number")
    if max_count is not None and max_count <= 0:
        raise ValueError(f"max_count={max_count!r}: expected a positive number or None")
    batch: list[T] = []
    batch_size = 0
    for item in items:
        item_size = get_len(item)
        if strict and item_size > max_size:
            raise ValueError(f"an item of size {item_size} is over max_size={max_size}")
        if batch and (len(batch) == max_count or batch_size + item_size > max_size):
            yield batch
            batch, batch_size = [], 0
        batch.append(item)
        batch_size += item_size
    if batch:
        yield batch


def batch_calls(items: Iterable[T], get_len: Callable[[T], int]) -> Iterator[list[T]]:
    """Chunks of ``items`` for one ``SendMessageBatch`` or ``PublishBatch`` call each.

    At most :data:`MAX_BATCH_ENTRIES` items and :data:`MAX_BATCH_BYTES` (``get_len``: an item's
    :func:`message_bytes`) per chunk; an item over the byte limit goes alone, so the service's
    answer, not a silent drop, is its result.
    """
    return constrained_batches(items, MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, get_len=get_len, strict=False)
