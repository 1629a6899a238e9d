"""Wiring: AWS clients and the pipeline built from the settings (the composition root)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from order_consumer.config import Settings
from order_consumer.dead_letter import DeadLetterQueue
from order_consumer.notifier import Notifier
from order_consumer.pipeline import DEFAULT_MAX_WORKERS, OrderPipeline
from order_consumer.store import OrderStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient

# Standard retry mode retries throttling and 5xx errors with backoff inside one call; a record
# whose call still fails is reported to SQS and redelivered. Connections for every worker thread.
CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=DEFAULT_MAX_WORKERS + 2,
)


@dataclass(frozen=True)
class Clients:
    """The three AWS clients the consumer calls."""

    dynamodb: DynamoDBClient
    sns: SNSClient
    sqs: SQSClient

    @classmethod
    def from_default_session(cls) -> Clients:
        """Clients from boto3's default session (so ``moto.mock_aws()`` started earlier reaches them)."""
        return cls(
            dynamodb=boto3.client("dynamodb", config=CLIENT_CONFIG),
            sns=boto3.client("sns", config=CLIENT_CONFIG),
            sqs=boto3.client("sqs", config=CLIENT_CONFIG),
        )


def build_pipeline(settings: Settings, clients: Clients) -> OrderPipeline:
    """The pipeline for these settings and clients."""
    return OrderPipeline(
        store=OrderStore(
            client=clients.dynamodb,
            processed_events_table=settings.processed_events_table,
            order_records_table=settings.order_records_table,
            record_ttl_seconds=settings.record_ttl_seconds,
        ),
        notifier=Notifier(client=clients.sns, topic_arn=settings.topic_arn),
        dead_letters=DeadLetterQueue(client=clients.sqs, queue_url=settings.dead_letter_queue_url),
        identity_fields=settings.identity_fields,
    )
