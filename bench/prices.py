"""On-demand prices, the stated assumptions, and the cost of a million orders, line by line.

Prices are US East (N. Virginia), list prices, free tiers ignored, checked on :data:`PRICES_CHECKED`
against the public pricing pages (sources below). Every consumer is billed by the same rules
(:func:`cost_per_million`): what it did on moto (table and index writes, reads, SNS and SQS
requests, log bytes), its capped batch time, its cold start, plus what every consumer of an SQS
queue pays alike (the producer's sends, the event source mapping's receives and deletes). A
consumer that runs a reconciler pays its scheduled runs too, spread over :data:`ASSUMPTIONS`'
monthly volume, plus what each order adds to them (its index entry and its status, read once).
The fixed monthly cost of alarms, dashboard and custom metrics is not per order:
:func:`fixed_monthly` lists it apart.

SNS and SQS requests are billed per started 64 KB of payload and a batch call of up to 10 messages
as one request per 64 KB of its whole payload (:func:`bench.units.payload_requests`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from bench.units import MAX_BATCH_ENTRIES

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
    #: SQS standard queue, per million requests (any API call; each 64 KB chunk of payload is one).
    sqs_per_million_requests: float = 0.40
    #: Lambda arm64 duration, per GB-second (first 7.5 billion GB-s of a month); the INIT phase too.
    lambda_arm64_per_gb_second: float = 0.0000133334
    #: Lambda, per million requests (invocations).
    lambda_per_million_requests: float = 0.20
    #: CloudWatch Logs, per GB ingested (standard class).
    cloudwatch_logs_per_gb_ingested: float = 0.50
    #: CloudWatch, per standard-resolution alarm metric per month (a metric math alarm: per metric it reads).
    cloudwatch_alarm_metric_per_month: float = 0.10
    #: CloudWatch, per dashboard per month beyond an account's 3 free.
    cloudwatch_dashboard_per_month: float = 3.00
    #: CloudWatch, per custom metric per month beyond 10 free (EMF metrics are custom metrics).
    cloudwatch_custom_metric_per_month: float = 0.30


@dataclass(frozen=True)
class Assumptions:
    """What the bench cannot measure, stated once and applied to every consumer alike."""

    #: Share of invocations that start a new execution environment (billed INIT since 2025-08-01).
    cold_start_rate: float = 0.01
    #: The monthly volume the reconciler's scheduled runs are spread over.
    orders_per_month: int = 10_000_000
    #: Orders per producer SendMessageBatch (OrderPublisher.send_batch fills SQS's 10 entries).
    producer_batch: int = MAX_BATCH_ENTRIES
    #: SQS calls of the event source mapping per batch it hands over: one ReceiveMessage, one
    #: DeleteMessageBatch of the records that succeeded (idle long polls are not per order: left out).
    receives_per_batch: int = 1
    deletes_per_batch: int = 1
    days_per_month: int = 30


PRICE_SOURCES = {
    "dynamodb": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    "sns": "https://aws.amazon.com/sns/pricing/",
    "sqs": "https://aws.amazon.com/sqs/pricing/",
    "lambda": "https://aws.amazon.com/lambda/pricing/",
    "cloudwatch": "https://aws.amazon.com/cloudwatch/pricing/",
}

PRICES = Prices()
ASSUMPTIONS = Assumptions()
#: Orders in "USD per million orders".
MILLION = 1_000_000


def lambda_gb_seconds(ms: float, memory_mb: int) -> float:
    """GB-seconds Lambda bills for ``ms`` of one invocation (or INIT) at ``memory_mb`` (per started ms)."""
    return math.ceil(ms) / 1000.0 * memory_mb / 1024.0


@dataclass(frozen=True)
class ReconcilerRun:
    """The reconciler as measured: what each scheduled run is billed for (on an index with nothing new:
    its queries, its checkpoint read and write), and what each order adds to the runs that read its
    index entry (the entry's share of a query page, the read of its record's status).

    A run's checkpoint write is billed on every run: with orders flowing, every run moves the
    checkpoints forward. A TTL deletion of a record (and of its index entry) is billed nothing:
    DynamoDB deletes expired items "without consuming write throughput" (the developer guide's TTL
    page; docs/reliability.md).
    """

    memory_mb: int
    every_s: int
    billed_ms: float
    init_ms: float
    rru: float
    log_bytes: float
    #: Write units per run (the checkpoint item).
    wru: float = 0.0
    #: Read and write units per order, over the runs that read it (its entry once, its status once).
    rru_per_order: float = 0.0
    wru_per_order: float = 0.0

    def usd_per_month(self, prices: Prices = PRICES, assumptions: Assumptions = ASSUMPTIONS) -> float:
        """The scheduled runs' own cost in a month (without the orders' share: :meth:`usd_per_order`)."""
        runs = assumptions.days_per_month * 86_400 / self.every_s
        per_run = (
            prices.lambda_per_million_requests / MILLION
            + lambda_gb_seconds(self.billed_ms, self.memory_mb) * prices.lambda_arm64_per_gb_second
            + assumptions.cold_start_rate
            * lambda_gb_seconds(self.init_ms, self.memory_mb)
            * prices.lambda_arm64_per_gb_second
            + self.rru * prices.dynamodb_per_million_rru / MILLION
            + self.wru * prices.dynamodb_per_million_wru / MILLION
            + self.log_bytes / 1e9 * prices.cloudwatch_logs_per_gb_ingested
        )
        return runs * per_run

    def usd_per_order(self, prices: Prices = PRICES) -> float:
        """What reading one order's entry and status costs the runs."""
        return (
            self.rru_per_order * prices.dynamodb_per_million_rru + self.wru_per_order * prices.dynamodb_per_million_wru
        ) / MILLION


@dataclass(frozen=True)
class OrderCost:
    """USD per million orders, one field per line item (``usd_breakdown`` in results.json)."""

    dynamodb_table_writes: float
    dynamodb_index_writes: float
    dynamodb_reads: float
    sns_requests: float
    sqs_producer_sends: float
    sqs_receives_and_deletes: float
    sqs_parking: float
    lambda_requests: float
    lambda_duration: float
    lambda_init: float
    cloudwatch_logs: float
    reconciler: float

    @property
    def total(self) -> float:
        return sum(asdict(self).values())

    def as_dict(self) -> dict[str, float]:
        """The line items, in order (they add up to :attr:`total`)."""
        return asdict(self)


def cost_per_million(
    *,
    wru_per_msg: float,
    rru_per_msg: float,
    sns_requests_per_msg: float,
    batch_ms: float,
    batch_size: int,
    memory_mb: int,
    index_wru_per_msg: float = 0.0,
    sqs_requests_per_msg: float = 0.0,
    init_ms: float = 0.0,
    log_bytes_per_msg: float = 0.0,
    reconciler: ReconcilerRun | None = None,
    prices: Prices = PRICES,
    assumptions: Assumptions = ASSUMPTIONS,
) -> OrderCost:
    """USD for a million orders delivered once, in batches of ``batch_size`` taking ``batch_ms`` each.

    ``wru_per_msg`` are the table's write units, ``index_wru_per_msg`` the indexes'.
    ``sns_requests_per_msg`` and ``sqs_requests_per_msg`` (the consumer's own sends: parking) are
    billed requests (per 64 KB chunk, a batch call counted once per chunk of its whole payload), not
    API calls or messages. Lambda bills each invocation's duration rounded up to the millisecond, at
    ``memory_mb`` on arm64; ``batch_ms`` is the batch time at that memory's CPU share; ``init_ms``
    (import and clients) is billed on the :attr:`Assumptions.cold_start_rate` share of invocations.
    """
    invocations = MILLION / batch_size
    gb_s = prices.lambda_arm64_per_gb_second
    return OrderCost(
        dynamodb_table_writes=wru_per_msg * prices.dynamodb_per_million_wru,
        dynamodb_index_writes=index_wru_per_msg * prices.dynamodb_per_million_wru,
        dynamodb_reads=rru_per_msg * prices.dynamodb_per_million_rru,
        sns_requests=sns_requests_per_msg * prices.sns_per_million_requests,
        sqs_producer_sends=prices.sqs_per_million_requests / assumptions.producer_batch,
        sqs_receives_and_deletes=(assumptions.receives_per_batch + assumptions.deletes_per_batch)
        * invocations
        / MILLION
        * prices.sqs_per_million_requests,
        sqs_parking=sqs_requests_per_msg * prices.sqs_per_million_requests,
        lambda_requests=invocations / MILLION * prices.lambda_per_million_requests,
        lambda_duration=invocations * lambda_gb_seconds(batch_ms, memory_mb) * gb_s,
        lambda_init=invocations * assumptions.cold_start_rate * lambda_gb_seconds(init_ms, memory_mb) * gb_s,
        cloudwatch_logs=log_bytes_per_msg * MILLION / 1e9 * prices.cloudwatch_logs_per_gb_ingested,
        reconciler=(
            0.0
            if reconciler is None
            else reconciler.usd_per_month(prices, assumptions) * MILLION / assumptions.orders_per_month
            + reconciler.usd_per_order(prices) * MILLION
        ),
    )


def fixed_monthly(deployment: dict[str, Any], prices: Prices = PRICES) -> dict[str, float]:
    """The default pipeline's monthly cost that does not grow with orders (free tiers ignored)."""
    lines = {
        "alarm_metrics": deployment["alarm_metrics"] * prices.cloudwatch_alarm_metric_per_month,
        "dashboards": deployment["dashboards"] * prices.cloudwatch_dashboard_per_month,
        "custom_metrics": deployment["custom_metrics"] * prices.cloudwatch_custom_metric_per_month,
    }
    return {**{k: round(v, 2) for k, v in lines.items()}, "total": round(sum(lines.values()), 2)}
