"""Parking permanent failures in the dead-letter queue, with the reason, before acknowledging them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from .contract.batching import (
    MAX_MESSAGE_ATTRIBUTES,
    batch_calls,
    message_bytes,
    send_attribute,
    sqs_text,
)
from .contract.errors import PermanentError
from .contract.parked import (
    ADDED_ATTRIBUTES,
    MAX_ERROR_MESSAGE_CHARS,
    PARKED_ATTRIBUTE,
    Envelope,
    producer_attributes,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef, SendMessageBatchRequestEntryTypeDef


def _packed_format(attribute: Mapping[str, Any]) -> dict[str, str]:
    """A Lambda-event message attribute reduced to its type and its one value, as the envelope packs it."""
    data_type = str(attribute.get("dataType", "String"))
    if data_type.startswith("Binary"):
        return {"dataType": data_type, "binaryValue": str(attribute.get("binaryValue") or "")}
    return {"dataType": data_type, "stringValue": sqs_text(str(attribute.get("stringValue", "")))}


def dead_letter_attributes(
    attributes: Mapping[str, Any], error: PermanentError, message_id: str
) -> dict[str, MessageAttributeValueTypeDef]:
    """The original attributes plus the reason and the consumer's envelope (``order_consumer.contract.parked``).

    The originals are what the producer sent: a message moved back by a move task still carries the
    consumer's earlier mark, which is recognised by its envelope (never by a name alone) and
    replaced. They are copied beside the reason when they fit and none has a name the consumer adds;
    otherwise all of them are packed into the envelope, so a producer's own ``error_code`` or
    ``original_attributes`` survives the trip.
    """
    originals = producer_attributes(attributes)
    fits = len(originals) + len(ADDED_ATTRIBUTES) <= MAX_MESSAGE_ATTRIBUTES
    packed = not fits or any(name in ADDED_ATTRIBUTES for name in originals)
    result: dict[str, MessageAttributeValueTypeDef] = {}
    if not packed:
        try:
            result.update(
                {name: cast("MessageAttributeValueTypeDef", send_attribute(value)) for name, value in originals.items()}
            )
        except ValueError:
            # A binaryValue that is not base64 (only a hand-built event has one): it cannot be sent
            # as a binary attribute, but the envelope carries its text as it came.
            result, packed = {}, True
    envelope = Envelope(packed={name: _packed_format(value) for name, value in originals.items()})
    result[PARKED_ATTRIBUTE] = {"DataType": "String", "StringValue": envelope.to_json(with_packed=packed)}
    result["error_code"] = {"DataType": "String", "StringValue": error.error_code}
    result["error_message"] = {
        "DataType": "String",
        "StringValue": sqs_text((str(error) or error.error_code)[:MAX_ERROR_MESSAGE_CHARS]),
    }
    result["source_message_id"] = {"DataType": "String", "StringValue": message_id}
    return result


@dataclass(frozen=True)
class ParkRequest:
    """One message to park: the record's body, attributes, message id and group, and the reason."""

    body: str
    attributes: Mapping[str, Any]
    message_id: str
    error: PermanentError
    message_group_id: str | None = None


class DeadLetterQueue:
    """Sends messages that can never succeed to the DLQ. Thread-safe.

    The SQS client is created at the first park (``client_factory``) unless one is given: most
    invocations park nothing and never pay for it.
    """

    def __init__(
        self,
        *,
        queue_url: str,
        client: SQSClient | None = None,
        client_factory: Callable[[], SQSClient] | None = None,
    ) -> None:
        if client is None and client_factory is None:
            raise ValueError("DeadLetterQueue needs a client or a client_factory")
        self._client = client
        self._factory = client_factory
        self._lock = threading.Lock()
        self._queue_url = queue_url
        self._fifo = queue_url.endswith(".fifo")

    @property
    def client(self) -> SQSClient:
        """The SQS client, created on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None and self._factory is not None:
                    self._client = self._factory()
        assert self._client is not None
        return self._client

    def _fifo_ids(self, request: ParkRequest) -> dict[str, str]:
        if not self._fifo:
            return {}
        return {
            "MessageGroupId": request.message_group_id or request.message_id,
            "MessageDeduplicationId": request.message_id,
        }

    def park_batch(self, requests: Sequence[ParkRequest]) -> list[str | None]:
        """Park every request: ``SendMessage`` for one, ``SendMessageBatch`` for several.

        Calls go one after another (a FIFO group keeps its order). Returns one entry per request,
        in order: None when SQS accepted it, else why not (that record must not be acknowledged).
        """
        results: list[str | None] = ["not sent"] * len(requests)
        entries: list[tuple[int, SendMessageBatchRequestEntryTypeDef]] = [
            (
                index,
                {
                    "Id": "",
                    # SQS never delivers a character it refuses, but a hand-built event (a test
                    # invoke) can: parking must not fail on it.
                    "MessageBody": sqs_text(request.body),
                    "MessageAttributes": dead_letter_attributes(request.attributes, request.error, request.message_id),
                    **self._fifo_ids(request),  # type: ignore[typeddict-item]
                },
            )
            for index, request in enumerate(requests)
        ]
        for chunk in batch_calls(
            entries, get_len=lambda pair: message_bytes(pair[1]["MessageBody"], pair[1].get("MessageAttributes"))
        ):
            for position, (_, entry) in enumerate(chunk):
                entry["Id"] = str(position)  # unique within the call
            self._send(chunk, results)
        return results

    def _send(self, chunk: list[tuple[int, SendMessageBatchRequestEntryTypeDef]], results: list[str | None]) -> None:
        try:
            if len(chunk) == 1:
                [(index, entry)] = chunk
                fields = {key: value for key, value in entry.items() if key != "Id"}
                self.client.send_message(QueueUrl=self._queue_url, **fields)  # type: ignore[arg-type]
                results[index] = None
                return
            response = self.client.send_message_batch(QueueUrl=self._queue_url, Entries=[e for _, e in chunk])
        except (ClientError, BotoCoreError, ValueError) as exc:  # ValueError: botocore refused to serialize
            for index, entry in chunk:
                source = entry["MessageAttributes"]["source_message_id"].get("StringValue")
                results[index] = f"could not park message {source} in the DLQ: {exc}"
            return
        by_id = {entry["Id"]: index for index, entry in chunk}
        refused = {failure.get("Id"): failure for failure in response.get("Failed", [])}
        for accepted in response.get("Successful", []):
            index = by_id.get(accepted.get("Id", ""), -1)
            if index >= 0 and accepted.get("Id") not in refused:
                results[index] = None
        for entry_id, failure in refused.items():
            index = by_id.get(str(entry_id), -1)
            if index >= 0:
                results[index] = f"SQS refused to park the message: {failure.get('Code')}: {failure.get('Message', '')}"
