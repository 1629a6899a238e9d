"""SNS notifications: one per accepted event, at least once, deduplicable by subscribers.

Notifications go out with ``PublishBatch``, in the chunks of :mod:`order_consumer.contract.batching`
(at most 10 entries and 256 KiB of messages and attributes per call). Every entry gets its own
result: an entry SNS did not accept, or every entry of a call that failed, is an error result, never
an exception, so one refused entry never fails the others. On a FIFO topic the group is the order
and the deduplication id the event (:mod:`order_consumer.contract.sns_ids`); entries keep their
order within a group, and once an entry of a group is refused the group's later entries are not
sent (reported as errors), so a subscriber never sees an order's notifications out of order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from .contract.batching import batch_calls, message_bytes
from .contract.notification import Notification

__all__ = ["Notification", "Notifier", "PublishResult"]

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sns.type_defs import PublishBatchRequestEntryTypeDef


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
        """The entry as :mod:`order_consumer.contract.notification` built it (every publishing path alike)."""
        entry: PublishBatchRequestEntryTypeDef = {
            "Id": entry_id,
            "Message": notification.message,
            "MessageAttributes": {name: dict(value) for name, value in notification.attributes.items()},  # type: ignore[misc]
        }
        if self._fifo:
            entry["MessageGroupId"] = notification.group_id
            entry["MessageDeduplicationId"] = notification.deduplication_id
        return entry

    def publish_batch(self, notifications: Sequence[Notification]) -> list[PublishResult]:
        """Publish every notification; return one result per input, in the same order.

        Calls are made one after another (in order, so a FIFO group keeps its order across calls);
        the caller runs several ``publish_batch`` calls in parallel when it wants parallelism.
        """
        results: list[PublishResult | None] = [None] * len(notifications)
        refused_groups: set[str] = set()
        entries = [(index, self._entry("", notification)) for index, notification in enumerate(notifications)]
        for chunk in batch_calls(
            entries, get_len=lambda pair: message_bytes(pair[1]["Message"], pair[1].get("MessageAttributes"))
        ):
            for position, (_, entry) in enumerate(chunk):
                entry["Id"] = str(position)  # unique within the call
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
