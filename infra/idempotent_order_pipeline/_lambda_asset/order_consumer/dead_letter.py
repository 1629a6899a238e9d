"""Parking permanent failures in the dead-letter queue, with the reason, before acknowledging them."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from order_events.errors import DeadLetterSendError, PermanentError
from order_events.parked import (
    ADDED_ATTRIBUTES,
    MAX_MESSAGE_ATTRIBUTES,
    PARKED_ATTRIBUTE,
    Envelope,
    envelope_of,
    unparked,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

MAX_ERROR_MESSAGE_CHARS = 1024


def _send_format(attribute: Mapping[str, Any]) -> MessageAttributeValueTypeDef:
    """A Lambda-event message attribute (camelCase, base64 binaries) in SendMessage's shape."""
    data_type = str(attribute.get("dataType", "String"))
    if data_type.startswith("Binary"):
        return {"DataType": data_type, "BinaryValue": base64.b64decode(attribute.get("binaryValue") or "")}
    return {"DataType": data_type, "StringValue": str(attribute.get("stringValue", ""))}


def _packed_format(attribute: Mapping[str, Any]) -> dict[str, str]:
    """A Lambda-event message attribute reduced to its type and its one value, as the envelope packs it."""
    data_type = str(attribute.get("dataType", "String"))
    if data_type.startswith("Binary"):
        return {"dataType": data_type, "binaryValue": str(attribute.get("binaryValue") or "")}
    return {"dataType": data_type, "stringValue": str(attribute.get("stringValue", ""))}


def dead_letter_attributes(
    attributes: Mapping[str, Any], error: PermanentError, message_id: str
) -> dict[str, MessageAttributeValueTypeDef]:
    """The original attributes plus the reason and the consumer's envelope (``order_events.parked``).

    The originals are what the producer sent: a message moved back by a move task still carries the
    consumer's earlier mark, which is recognised by its envelope (never by a name alone) and
    replaced. They are copied beside the reason when they fit and none has a name the consumer adds;
    otherwise all of them are packed into the envelope, so a producer's own ``error_code`` or
    ``original_attributes`` survives the trip.
    """
    earlier = envelope_of(attributes, string_key="stringValue")
    originals = unparked(attributes, earlier)
    if earlier is not None:
        originals.update(earlier.packed)
    fits = len(originals) + len(ADDED_ATTRIBUTES) <= MAX_MESSAGE_ATTRIBUTES
    packed = not fits or any(name in ADDED_ATTRIBUTES for name in originals)
    result: dict[str, MessageAttributeValueTypeDef] = {}
    if not packed:
        result.update({name: _send_format(value) for name, value in originals.items()})
    envelope = Envelope(packed={name: _packed_format(value) for name, value in originals.items()})
    result[PARKED_ATTRIBUTE] = {"DataType": "String", "StringValue": envelope.to_json(with_packed=packed)}
    result["error_code"] = {"DataType": "String", "StringValue": error.error_code}
    result["error_message"] = {
        "DataType": "String",
        "StringValue": (str(error) or error.error_code)[:MAX_ERROR_MESSAGE_CHARS],
    }
    result["source_message_id"] = {"DataType": "String", "StringValue": message_id}
    return result


class DeadLetterQueue:
    """Sends a message that can never succeed to the DLQ. Thread-safe."""

    def __init__(self, *, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url
        self._fifo = queue_url.endswith(".fifo")

    def park(
        self,
        *,
        body: str,
        attributes: Mapping[str, Any],
        message_id: str,
        error: PermanentError,
        message_group_id: str | None = None,
    ) -> None:
        """Send the original body and attributes with the reason.

        Raises:
            DeadLetterSendError: the send failed, so the record must not be acknowledged.
        """
        kwargs: dict[str, str] = {}
        if self._fifo:
            kwargs = {"MessageGroupId": message_group_id or message_id, "MessageDeduplicationId": message_id}
        try:
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=body,
                MessageAttributes=dead_letter_attributes(attributes, error, message_id),
                **kwargs,  # type: ignore[arg-type]
            )
        except (ClientError, BotoCoreError) as exc:
            raise DeadLetterSendError(f"could not park message {message_id} in the DLQ: {exc}") from exc
