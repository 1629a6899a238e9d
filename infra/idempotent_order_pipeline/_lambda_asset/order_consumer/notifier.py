"""SNS notifications: one per accepted event, at least once, deduplicable by subscribers."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from order_events.errors import NotificationFailedError
from order_events.message import OrderMessage

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient

# SNS FIFO deduplication ids: at most 128 characters of this alphabet.
_DEDUP_ID = re.compile(r"^[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$")


def deduplication_id(event_id: str) -> str:
    """The event id itself when SNS accepts it as a deduplication id, else its SHA-256 hex."""
    return event_id if _DEDUP_ID.match(event_id) else hashlib.sha256(event_id.encode("utf-8")).hexdigest()


# --- interim until the batched consumer lands: Notification, PublishResult, Notifier.publish_batch ---
#: SNS PublishBatch limits: entries and bytes per call.
_MAX_BATCH_ENTRIES = 10
_MAX_BATCH_BYTES = 256 * 1024


@dataclass(frozen=True)
class Notification:  # interim until the batched consumer lands
    """What one notification says: the event, its order and the order's fingerprint."""

    event_id: str
    order_id: str
    payload_sha256: str

    @classmethod
    def of(cls, message: OrderMessage) -> Notification:
        return cls(event_id=message.event_id, order_id=message.order_id, payload_sha256=message.payload_sha256)


@dataclass(frozen=True)
class PublishResult:  # interim until the batched consumer lands
    """SNS's answer for one notification: its message id, or why it was not accepted."""

    notification: Notification
    message_id: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None and self.message_id is not None


# --- end of interim ---------------------------------------------------------------------------------


class Notifier:
    """Publishes the "order recorded" notification. Thread-safe."""

    def __init__(self, *, client: SNSClient, topic_arn: str) -> None:
        self._client = client
        self._topic_arn = topic_arn
        self._fifo = topic_arn.endswith(".fifo")

    def publish(self, message: OrderMessage) -> str:
        """Publish the notification for ``message``; return SNS's message id.

        The body is JSON with ``event_id``, ``order_id`` and ``payload_sha256``; ``event_id`` and
        ``order_id`` are also message attributes so that subscription filters and consumers can
        deduplicate. On a FIFO topic the group is the order and the deduplication id the event.

        Raises:
            NotificationFailedError: SNS did not accept it; the caller must not mark the event sent.
        """
        kwargs = {}
        if self._fifo:
            kwargs = {"MessageGroupId": message.order_id, "MessageDeduplicationId": deduplication_id(message.event_id)}
        try:
            response = self._client.publish(
                TopicArn=self._topic_arn,
                Message=json.dumps(
                    {
                        "event_id": message.event_id,
                        "order_id": message.order_id,
                        "payload_sha256": message.payload_sha256,
                    }
                ),
                MessageAttributes={
                    "event_id": {"DataType": "String", "StringValue": message.event_id},
                    "order_id": {"DataType": "String", "StringValue": message.order_id},
                },
                **kwargs,
            )
        except (ClientError, BotoCoreError) as exc:
            raise NotificationFailedError(f"SNS publish failed: {exc}") from exc
        return response["MessageId"]

    # --- interim until the batched consumer lands ------------------------------------------------
    def publish_batch(self, notifications: Sequence[Notification]) -> list[PublishResult]:
        """One result per notification, same order; failures are error results, never exceptions."""
        results: list[PublishResult] = []
        for start in range(0, len(notifications), _MAX_BATCH_ENTRIES):
            chunk = list(notifications[start : start + _MAX_BATCH_ENTRIES])
            entries = [self._entry(index, notification) for index, notification in enumerate(chunk)]
            if sum(len(entry["Message"]) for entry in entries) > _MAX_BATCH_BYTES:
                results.extend(PublishResult(n, None, "batch too large") for n in chunk)
                continue
            try:
                response = self._client.publish_batch(TopicArn=self._topic_arn, PublishBatchRequestEntries=entries)  # type: ignore[arg-type]
            except (ClientError, BotoCoreError) as exc:
                results.extend(PublishResult(n, None, f"SNS PublishBatch failed: {exc}") for n in chunk)
                continue
            accepted = {entry["Id"]: entry.get("MessageId") for entry in response.get("Successful", [])}
            refused = {
                entry["Id"]: f"{entry.get('Code')}: {entry.get('Message')}" for entry in response.get("Failed", [])
            }
            for index, notification in enumerate(chunk):
                message_id = accepted.get(str(index))
                error = refused.get(str(index)) or (None if message_id else "no answer for this entry")
                results.append(PublishResult(notification, None if error else message_id, error))
        return results

    def _entry(
        self, index: int, notification: Notification
    ) -> dict[str, Any]:  # interim until the batched consumer lands
        entry: dict[str, Any] = {
            "Id": str(index),
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
            entry["MessageGroupId"] = notification.order_id
            entry["MessageDeduplicationId"] = deduplication_id(notification.event_id)
        return entry
