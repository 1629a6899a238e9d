"""On-demand prices and the cost of a million orders.

Prices are US East (N. Virginia), list prices, free tiers ignored, checked on :data:`PRICES_CHECKED`
against the public pricing pages (sources below). SQS's receives and deletes are left out: every
consumer receives and deletes the same messages in the same batches, so they cost all four the same;
the consumer's own SQS requests (parking in the DLQ) are counted. SNS and SQS requests are billed
per started 64 KB of payload and a batch call of up to 10 messages as one request per 64 KB of its
whole payload (:func:`bench.units.payload_requests`). Logs are reported beside the total, not in it
(the peers here write none, so the line would only measure the bench).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

PRICES_CHECKED = "2026-11-30"
PRICE_REGION = "us-east-1"


@dataclass(frozen=True)
class Prices:
    """USD list prices (on-demand)."""

    #: DynamoDB on-demand, Standard table class, per million write request units (since 2024-11-01).
    dynamodb_per_million_wru: float = 0.625
    #: DynamoDB on-demand, Standard table class, per million read request units (since 2024-11-01).
    dynamodb_per_million_rru: float = 0.125
    #: SNS standard topic, per million requests (Publish or PublishBatch; each 64 KB chunk of payload is one).
    sns_per_million_requests: float = 0.50
    #: SQS standard queue, per million requests (SendMessage or SendMessageBatch; per 64 KB chunk).
    sqs_per_million_requests: float = 0.40
    #: Lambda arm64 duration, per GB-second (first 7.5 billion GB-s of a month).
    lambda_arm64_per_gb_second: float = 0.0000133334
    #: Lambda, per million requests (invocations).
    lambda_per_million_requests: float = 0.20
    #: CloudWatch Logs, per GB ingested (standard class); reported beside the total, not in it.
    cloudwatch_logs_per_gb_ingested: float = 0.50


PRICE_SOURCES = {
    "dynamodb": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    "sns": "https://aws.amazon.com/sns/pricing/",
    "sqs": "https://aws.amazon.com/sqs/pricing/",
    "lambda": "https://aws.amazon.com/lambda/pricing/",
    "cloudwatch_logs": "https://aws.amazon.com/cloudwatch/pricing/",
}

PRICES = Prices()
#: Orders in "USD per million orders".
MILLION = 1_000_000


@dataclass(frozen=True)
class OrderCost:
    """USD per million orders, by line."""

    dynamodb_writes: float
    dynamodb_reads: float
    sns: float
    sqs: float
    lambda_duration: float
    lambda_requests: float

    @property
    def total(self) -> float:
        return (
            self.dynamodb_writes
            + self.dynamodb_reads
            + self.sns
            + self.sqs
            + self.lambda_duration
            + self.lambda_requests
        )

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "total": self.total}


def cost_per_million(
    *,
    wru_per_msg: float,
    rru_per_msg: float,
    sns_requests_per_msg: float,
    sqs_requests_per_msg: float = 0.0,
    batch_ms: float,
    batch_size: int,
    memory_mb: int,
    prices: Prices = PRICES,
) -> OrderCost:
    """USD for a million orders delivered once, in batches of ``batch_size`` taking ``batch_ms`` each.

    ``sns_requests_per_msg`` and ``sqs_requests_per_msg`` are billed requests (per 64 KB chunk, a batch
    call counted once per chunk of its whole payload), not API calls or messages. Lambda bills each
    invocation's duration rounded up to the millisecond, at ``memory_mb`` on arm64; ``batch_ms`` is
    the batch time at that memory's CPU share.
    """
    invocations = MILLION / batch_size
    gb_seconds = invocations * math.ceil(batch_ms) / 1000.0 * memory_mb / 1024.0
    return OrderCost(
        dynamodb_writes=wru_per_msg * prices.dynamodb_per_million_wru,
        dynamodb_reads=rru_per_msg * prices.dynamodb_per_million_rru,
        sns=sns_requests_per_msg * prices.sns_per_million_requests,
        sqs=sqs_requests_per_msg * prices.sqs_per_million_requests,
        lambda_duration=gb_seconds * prices.lambda_arm64_per_gb_second,
        lambda_requests=invocations / MILLION * prices.lambda_per_million_requests,
    )
