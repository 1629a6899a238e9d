"""SNS notifications: one per accepted event, at least once, deduplicable by subscribers.

Notifications go out with ``PublishBatch``: at most :data:`MAX_BATCH_ENTRIES` entries and
:data:`MAX_BATCH_BYTES` of payload per call. Every entry gets its own result: an entry SNS did not
accept, or every entry of a call that failed, is an error result, never an exception, so one
refused entry never fails the others. On a FIFO topic the group is the order and the deduplication
id the event (:mod:`order_events.sns_ids`); entries keep their order within a group, and once an
entry of a group is refused the group's later entries are not sent (reported as errors), so a
subscriber never sees an order's notifications out of order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from order_events.message import OrderMessage
from order_events.sns_ids import sns_deduplication_id, sns_group_id

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sns.type_defs import PublishBatchRequestEntryTypeDef

#: SNS's limit of entries per PublishBatch call.
MAX_BATCH_ENTRIES = 10
#: SNS's limit of the payload of one PublishBatch call (messages and attributes, all entries).
MAX_BATCH_BYTES = 256 * 1024


@dataclass(frozen=True)
class Notification:
    """What one notification says: the event, its order and the content's fingerprint."""

    event_id: str
    order_id: str
    payload_sha256: str

    @classmethod
    def of(cls, message: OrderMessage) -> Notification:
        """The notification of an accepted order message."""
        return cls(event_id=message.event_id, order_id=message.order_id, payload_sha256=message.payload_sha256)


@dataclass(frozen=True)
class PublishResult:
    """The fate of one notification: SNS's message id, or why it was not accepted."""

    notification: Notification
    message_id: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether SNS accepted the notification (only then may its record be marked sent)."""
        return self.message_id is not None and self.error is None


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class Notifier:
    """Publishes the "order recorded" notifications. Thread-safe."""

    def __init__(self, *, client: SNSClient, topic_arn: str) -> None:
        self._client = client
        self._topic_arn = topic_arn
        self._fifo = topic_arn.endswith(".fifo")

    @property
    def fifo(self) -> bool:
        """Whether the topic is a FIFO topic (entries carry group and deduplication ids)."""
        return self._fifo

    def _entry(self, entry_id: str, notification: Notification) -> PublishBatchRequestEntryTypeDef:
        """The body is JSON with the three fields; ``event_id`` and ``order_id`` are also attributes."""
        entry: PublishBatchRequestEntryTypeDef = {
            "Id": entry_id,
            "Message": json.dumps(
                {
                    "event_id": notification.event_id,
                    "order_id": notification.order_id,
                    "payload_sha256": notification.payload_sha256,
                }
            ),
            "MessageAttributes": {
                "event_id": {"DataType": "String", "StringValue": notification.event_id},
                "order_id": {"DataType": "String", "StringValue": notification.order_id},
            },
        }
        if self._fifo:
            entry["MessageGroupId"] = sns_group_id(notification.order_id)
            entry["MessageDeduplicationId"] = sns_deduplication_id(notification.event_id)
        return entry

    @staticmethod
    def _size(entry: PublishBatchRequestEntryTypeDef) -> int:
        """Bytes SNS counts for an entry: the message plus each attribute's name, type and value."""
        size = _utf8_len(entry["Message"])
        for name, value in entry.get("MessageAttributes", {}).items():
            size += _utf8_len(name) + _utf8_len(value["DataType"]) + _utf8_len(str(value.get("StringValue", "")))
        return size

    def publish_batch(self, notifications: Sequence[Notification]) -> list[PublishResult]:
        """Publish every notification; return one result per input, in the same order.

        Calls are made one after another (in order, so a FIFO group keeps its order across calls);
        the caller runs several ``publish_batch`` calls in parallel when it wants parallelism.
        """
        results: list[PublishResult | None] = [None] * len(notifications)
        refused_groups: set[str] = set()
        chunk: list[tuple[int, PublishBatchRequestEntryTypeDef]] = []
        chunk_bytes = 0
        for index, notification in enumerate(notifications):
            entry = self._entry("", notification)
            size = self._size(entry)
            if chunk and (len(chunk) == MAX_BATCH_ENTRIES or chunk_bytes + size > MAX_BATCH_BYTES):
                self._send(chunk, notifications, results, refused_groups)
                chunk, chunk_bytes = [], 0
            entry["Id"] = str(len(chunk))  # unique within the call
            chunk.append((index, entry))
            chunk_bytes += size
        if chunk:
            self._send(chunk, notifications, results, refused_groups)
        return [result for result in results if result is not None]

    def _send(
        self,
        chunk: list[tuple[int, PublishBatchRequestEntryTypeDef]],
        notifications: Sequence[Notification],
        results: list[PublishResult | None],
        refused_groups: set[str],
    ) -> None:
        """One PublishBatch call for ``chunk``; fills ``results`` at the chunk's indexes."""
        if self._fifo:
            # An earlier entry of the group was refused: sending a later one would overtake it.
            held = [(i, e) for i, e in chunk if e["MessageGroupId"] in refused_groups]
            for index, _ in held:
                results[index] = PublishResult(
                    notifications[index], None, "an earlier notification of its message group was not accepted"
                )
            chunk = [(i, e) for i, e in chunk if e["MessageGroupId"] not in refused_groups]
            if not chunk:
                return
        by_id = {entry["Id"]: index for index, entry in chunk}
        try:
            response = self._client.publish_batch(
                TopicArn=self._topic_arn, PublishBatchRequestEntries=[entry for _, entry in chunk]
            )
        except (ClientError, BotoCoreError) as exc:
            for index, _ in chunk:
                results[index] = PublishResult(notifications[index], None, f"SNS PublishBatch failed: {exc}")
        except Exception as exc:  # an unforeseen SDK error: still a result, never an exception
            for index, _ in chunk:
                error = f"SNS PublishBatch failed: {type(exc).__name__}: {exc}"
                results[index] = PublishResult(notifications[index], None, error)
        else:
            for refused in response.get("Failed", []):
                index = by_id.pop(refused.get("Id", ""), -1)
                if index >= 0:
                    error = f"SNS refused the entry: {refused.get('Code')}: {refused.get('Message', '')}"
                    results[index] = PublishResult(notifications[index], None, error)
            for accepted in response.get("Successful", []):
                index = by_id.get(accepted.get("Id", ""), -1)
                if index >= 0 and accepted.get("MessageId"):
                    results[index] = PublishResult(notifications[index], accepted["MessageId"], None)
            for index, _ in chunk:
                if results[index] is None:  # neither accepted nor refused: never assume it was sent
                    results[index] = PublishResult(notifications[index], None, "SNS did not report the entry")
        if self._fifo:
            refused_groups.update(entry["MessageGroupId"] for index, entry in chunk if not _ok(results[index]))


def _ok(result: PublishResult | None) -> bool:
    return result is not None and result.ok
