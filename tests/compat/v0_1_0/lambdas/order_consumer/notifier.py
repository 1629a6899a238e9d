"""SNS notifications: one per accepted event, at least once, deduplicable by subscribers."""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING

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
