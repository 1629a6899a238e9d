"""Parking permanent failures in the dead-letter queue, with the reason, before acknowledging them."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from order_events.errors import DeadLetterSendError, PermanentError

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

# SQS allows 10 message attributes; three carry the reason.
MAX_MESSAGE_ATTRIBUTES = 10
REASON_ATTRIBUTES = ("error_code", "error_message", "source_message_id")
# Original attributes that do not fit beside the reason travel as one JSON attribute.
ORIGINAL_ATTRIBUTES = "original_attributes"
MAX_ERROR_MESSAGE_CHARS = 1024


def _send_format(attribute: Mapping[str, Any]) -> MessageAttributeValueTypeDef:
    """A Lambda-event message attribute (camelCase, base64 binaries) in SendMessage's shape."""
    data_type = str(attribute.get("dataType", "String"))
    if data_type.startswith("Binary"):
        return {"DataType": data_type, "BinaryValue": base64.b64decode(attribute.get("binaryValue") or "")}
    return {"DataType": data_type, "StringValue": str(attribute.get("stringValue", ""))}


def dead_letter_attributes(
    attributes: Mapping[str, Any], error: PermanentError, message_id: str
) -> dict[str, MessageAttributeValueTypeDef]:
    """The original attributes plus ``error_code``, ``error_message`` and ``source_message_id``."""
    originals = {name: value for name, value in attributes.items() if name not in REASON_ATTRIBUTES}
    result: dict[str, MessageAttributeValueTypeDef] = {}
    if len(originals) + len(REASON_ATTRIBUTES) <= MAX_MESSAGE_ATTRIBUTES:
        result.update({name: _send_format(value) for name, value in originals.items()})
    else:
        result[ORIGINAL_ATTRIBUTES] = {
            "DataType": "String",
            "StringValue": json.dumps({name: dict(value) for name, value in originals.items()}, default=str),
        }
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
