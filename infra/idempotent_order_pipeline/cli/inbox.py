"""A temporary SQS queue subscribed to the pipeline's topic: where ``smoke`` watches its canaries' notifications.

The queue and its subscription are this run's own and go when it ends (:meth:`Inbox.close`, also on
Ctrl-C and on failure); both are found again by the run id alone, so a run that was killed outright
can still be cleaned up (``smoke --clean-up RUN_ID``).

* **Name**: ``order-pipeline-smoke-<run id>`` (``.fifo`` for a FIFO topic, which delivers to FIFO
  queues only). Messages are kept :data:`RETENTION_SECONDS`, so a queue left behind holds nothing long.
* **Encryption**: SSE-SQS. The topic's own key (the construct's ``encryption_key``, a CMK, or
  none) is the publisher's business: SNS decrypts before it delivers, and a queue under SSE-SQS
  needs no key policy for SNS to write to it (one under SSE-KMS would need the key to allow
  ``sns.amazonaws.com``). The construct's subscriber queues are encrypted the same way.
* **Policy**: the topic (``aws:SourceArn``) may send to it, nobody else is granted anything, and
  requests without TLS are denied, as on the construct's own queues. Set once the queue exists,
  since it names the queue's ARN.
* **Subscription**: raw message delivery, so each notification arrives with its SNS attributes as
  SQS message attributes, and the filter policy :func:`filter_policy`: a prefix match on the
  ``event_id`` attribute that every notification carries (``order_consumer.contract.notification``),
  so only this run's canaries are delivered. A real subscriber leaves every canary out with
  ``{"event_id": [{"anything-but": {"prefix": "smoke-"}}]}`` (:func:`without_canaries`).

SNS applies a new subscription's filter policy within up to 15 minutes (eventual consistency, per
the SNS developer guide), so the queue may meanwhile receive other notifications: they are this
queue's copies, read and deleted, and counted as ``others``; nobody else's delivery is touched.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_BATCH_ENTRIES
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import EVENT_ID_FIELD
from idempotent_order_pipeline.cli.errors import describe

if TYPE_CHECKING:
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

#: The temporary queue's name, before the run id.
QUEUE_NAME_PREFIX = "order-pipeline-smoke-"
#: How long the temporary queue keeps a message (SQS's minimum is 60 s).
RETENTION_SECONDS = 3600
#: What every canary's event id starts with: real subscribers filter on it.
CANARY_PREFIX = "smoke-"
FIFO_SUFFIX = ".fifo"
# How SQS says a queue does not exist (its JSON protocol, then its query protocol).
_NO_SUCH_QUEUE = frozenset({"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"})


def event_id_prefix(run_id: str) -> str:
    """What every id of run ``run_id`` starts with (its canaries' event ids and order ids)."""
    return f"{CANARY_PREFIX}{run_id}-"


def queue_name(run_id: str, *, fifo: bool) -> str:
    """The temporary queue of run ``run_id``."""
    return QUEUE_NAME_PREFIX + run_id + (FIFO_SUFFIX if fifo else "")


def filter_policy(prefix: str) -> dict[str, Any]:
    """The subscription's filter policy: only notifications whose ``event_id`` starts with ``prefix``."""
    return {EVENT_ID_FIELD: [{"prefix": prefix}]}


def without_canaries() -> dict[str, Any]:
    """A filter policy (on the message attributes) that leaves every ``smoke`` canary out."""
    return {EVENT_ID_FIELD: [{"anything-but": {"prefix": CANARY_PREFIX}}]}


def queue_policy(queue_arn: str, topic_arn: str) -> dict[str, Any]:
    """The temporary queue's policy: the topic may send to it; no request without TLS."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TheTopicDelivers",
                "Effect": "Allow",
                "Principal": {"Service": "sns.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}},
            },
            {
                "Sid": "TlsOnly",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


@dataclass
class Inbox:
    """The temporary queue and its subscription, made by :meth:`open`, removed by :meth:`close`.

    Each part is recorded as soon as AWS made it, so :meth:`close` removes what exists wherever
    :meth:`open` stopped; what it cannot name (a call that made its resource and then failed to
    answer) it finds by the queue's name and the subscription's endpoint.
    """

    sqs: SQSClient
    sns: SNSClient
    topic_arn: str
    run_id: str
    queue_url: str | None = None
    queue_arn: str | None = None
    subscription_arn: str | None = None
    #: Notifications read, by event id (this run's canaries).
    notified: Counter[str] = field(default_factory=Counter)
    #: Notifications read that are not of this run (the filter policy not yet applied by SNS).
    others: int = 0

    @property
    def fifo(self) -> bool:
        return self.topic_arn.endswith(FIFO_SUFFIX)

    @property
    def name(self) -> str:
        return queue_name(self.run_id, fifo=self.fifo)

    def open(self) -> None:
        """Create the queue (with its policy) and subscribe it to the topic with the run's filter policy."""
        attributes: dict[QueueAttributeNameType, str] = {
            "SqsManagedSseEnabled": "true",
            "MessageRetentionPeriod": str(RETENTION_SECONDS),
        }
        if self.fifo:
            attributes["FifoQueue"] = "true"
        self.queue_url = self.sqs.create_queue(QueueName=self.name, Attributes=attributes)["QueueUrl"]
        self.queue_arn = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        # The policy names the queue's own ARN, known once it exists (the topic may be another account's).
        self.sqs.set_queue_attributes(
            QueueUrl=self.queue_url, Attributes={"Policy": json.dumps(queue_policy(self.queue_arn, self.topic_arn))}
        )
        self.subscription_arn = self.sns.subscribe(
            TopicArn=self.topic_arn,
            Protocol="sqs",
            Endpoint=self.queue_arn,
            Attributes={
                "RawMessageDelivery": "true",
                "FilterPolicy": json.dumps(filter_policy(event_id_prefix(self.run_id))),
            },
            ReturnSubscriptionArn=True,
        )["SubscriptionArn"]

    def read(self) -> int:
        """Read (and delete) what the queue holds now, without waiting; return how many were read."""
        assert self.queue_url is not None, "open() first"
        read = 0
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=MAX_BATCH_ENTRIES,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not batch:
                return read
            for message in batch:
                event_id = _event_id(message)
                if event_id is not None and event_id.startswith(event_id_prefix(self.run_id)):
                    self.notified[event_id] += 1
                else:
                    self.others += 1
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
            )
            read += len(batch)

    def close(self) -> list[str]:
        """Unsubscribe, then delete the queue; what could not be removed, one sentence each (empty: all gone)."""
        problems: list[str] = []
        try:
            for arn in self._subscriptions():
                self.sns.unsubscribe(SubscriptionArn=arn)
            self.subscription_arn = None
        except (ClientError, BotoCoreError) as exc:
            problems.append(f"the subscription of {self.name} to the topic was not removed ({describe(exc)})")
        try:
            url = self.queue_url or self._find_queue()
            if url is not None:
                self.sqs.delete_queue(QueueUrl=url)
            self.queue_url = None
        except (ClientError, BotoCoreError) as exc:
            problems.append(f"the temporary queue {self.name} was not deleted ({describe(exc)})")
        return problems

    def _subscriptions(self) -> list[str]:
        """This queue's subscriptions to the topic: the one recorded, and any other to a queue of its name."""
        found = [self.subscription_arn] if self.subscription_arn and self.subscription_arn.startswith("arn:") else []
        for page in self.sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=self.topic_arn):
            found.extend(
                subscription["SubscriptionArn"]
                for subscription in page.get("Subscriptions", [])
                if subscription.get("Protocol") == "sqs"
                and subscription.get("Endpoint", "").rsplit(":", 1)[-1] == self.name
                and subscription.get("SubscriptionArn", "").startswith("arn:")
            )
        return list(dict.fromkeys(found))

    def _find_queue(self) -> str | None:
        try:
            return self.sqs.get_queue_url(QueueName=self.name)["QueueUrl"]
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in _NO_SUCH_QUEUE:
                return None
            raise


def _event_id(message: Any) -> str | None:
    """The notification's event id: its ``event_id`` attribute (raw delivery), else its body's."""
    attribute = message.get("MessageAttributes", {}).get(EVENT_ID_FIELD, {})
    if isinstance(attribute.get("StringValue"), str):
        return str(attribute["StringValue"])
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        value = json.loads(message.get("Body", "")).get(EVENT_ID_FIELD)
        return value if isinstance(value, str) else None
    return None
