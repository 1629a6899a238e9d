"""The pipeline's ceilings: orders per second each component sustains, for a set of construct props.

``python -m bench.capacity`` (``make capacity``) measures what one order costs each DynamoDB key
space, renders the model for the default props and for the props a team at 10x and 100x would
choose (:func:`_profiles`), and rewrites the generated part of ``docs/capacity.md``; ``tests/bench/test_capacity.py``
regenerates it and compares, so the page cannot drift from the props, the quotas or the code.

The inputs, each from its one home:

* the props: the defaults of ``IdempotentOrderPipeline.__init__`` (the signature), overridden per
  profile (:func:`_profiles`);
* what an order writes: measured, not assumed. The real consumer handles a batch of new orders on
  moto, on tables created as the default template defines them (:mod:`bench.deployment`), under the
  bench's meter (:mod:`bench.standin`), which counts the write units per table and per index. Each
  index write lands on the partition of its shard, so the pending index's ceiling is its shard
  count (:data:`PENDING_SHARDS`, the asset's contract) times a partition's 1,000 WRU per second;
* the AWS quotas: :data:`QUOTAS`, each with the page it comes from (default quotas, us-east-1);
* one stated assumption, :data:`BATCH_SECONDS`: how long an invocation holds its concurrency.

This module imports the Lambda asset under its package name (``idempotent_order_pipeline.
_lambda_asset.order_consumer``); the bench's Lambda-emulating processes never import it.
"""

from __future__ import annotations

import inspect
import math
import os
import random
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import deployment, environment

REPO_ROOT = Path(__file__).resolve().parent.parent
PAGE = REPO_ROOT / "docs" / "capacity.md"
GENERATED_START = "<!-- capacity model: written by make capacity (bench/capacity.py) -->"
GENERATED_END = "<!-- end of capacity model -->"

#: Seconds one invocation holds its concurrency per 10 records (three sequential round trips to AWS,
#: the transactions, PublishBatch and the marks, at 10-30 ms each, plus about 12 ms of CPU at one
#: vCPU; the bench measures 26 ms at 5 ms per call). Stated, not measured: AWS's latency varies.
BATCH_SECONDS = 0.1
#: Orders of the measured batch.
MEASURED_ORDERS = 10


@dataclass(frozen=True)
class Quota:
    value: float
    source: str


#: Default quotas (us-east-1), each with its source. Adjustable ones can be raised on request.
QUOTAS: dict[str, Quota] = {
    "lambda_concurrency": Quota(1000, "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"),
    "esm_standard_concurrency": Quota(1250, "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html"),
    "esm_scale_up_per_minute": Quota(300, "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html"),
    "poller_concurrency": Quota(
        10,
        "https://aws.amazon.com/blogs/aws/aws-lambda-enhances-sqs-processing-with-new-provisioned-mode-3x-faster-scaling-16x-higher-capacity",
    ),
    "dynamodb_partition_wru": Quota(1000, "https://repost.aws/knowledge-center/on-demand-table-throttling-dynamodb"),
    "dynamodb_table_wru": Quota(
        40000, "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
    ),
    "sns_publish_per_second": Quota(30000, "https://docs.aws.amazon.com/general/latest/gr/sns.html"),
    "sns_fifo_topic_per_second": Quota(
        3000, "https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_sns.FifoThroughputScope.html"
    ),
    "sqs_fifo_tps": Quota(
        300, "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html"
    ),
    "sqs_fifo_high_throughput_tps": Quota(
        70000, "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html"
    ),
}


@dataclass(frozen=True)
class Profile:
    """A named set of props (over the construct's defaults) and the load it is meant for."""

    name: str
    target_orders_per_second: int
    props: Mapping[str, Any]
    why: str


#: The props a team would choose at each load: :func:`_profiles` (built lazily: they hold CDK objects).
def _profiles() -> tuple[Profile, ...]:
    from aws_cdk import Duration, aws_lambda

    return (
        Profile("default", 1_000, {}, "every prop at its default"),
        Profile(
            "10x",
            10_000,
            {
                "provisioned_pollers": aws_lambda.ProvisionedPollerConfig(minimum_pollers=2, maximum_pollers=20),
                "reserved_concurrency": 200,
            },
            "provisioned pollers for fast scaling, concurrency reserved so other functions cannot starve it",
        ),
        Profile(
            "100x",
            100_000,
            {
                "provisioned_pollers": aws_lambda.ProvisionedPollerConfig(minimum_pollers=10, maximum_pollers=200),
                "reserved_concurrency": 900,
                "batch_size": 100,
                "max_batching_window": Duration.seconds(1),
            },
            "more pollers, batches of 100 gathered for up to 1 s (a tenth of the invocations), most of the "
            "account's default concurrency reserved",
        ),
    )


def _show(value: Any) -> str:
    """A prop value as the construct takes it."""
    if hasattr(value, "maximum_pollers"):
        return (
            f"ProvisionedPollerConfig(minimum_pollers={value.minimum_pollers}, maximum_pollers={value.maximum_pollers})"
        )
    if hasattr(value, "to_seconds"):
        return f"Duration.seconds({value.to_seconds():g})"
    return repr(value)


@dataclass(frozen=True)
class UnitsPerOrder:
    """What one new order writes, measured: WRU per table and per index."""

    tables: Mapping[str, float]
    indexes: Mapping[str, float]


@dataclass(frozen=True)
class Ceiling:
    component: str
    orders_per_second: float
    limit: str
    change: str


def defaults() -> dict[str, Any]:
    """The construct's prop defaults, from its signature (their one home)."""
    from idempotent_order_pipeline import IdempotentOrderPipeline

    parameters = inspect.signature(IdempotentOrderPipeline.__init__).parameters
    return {name: p.default for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def pending_shards() -> int:
    from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import PENDING_SHARDS

    return PENDING_SHARDS


def measure_units(deployed: Mapping[str, Any]) -> UnitsPerOrder:
    """Run the real consumer on a batch of new orders, on tables as deployed, under the bench's meter."""
    import boto3
    from moto import mock_aws

    from bench.orders import OrderSource, batch_event
    from bench.run import LAMBDA_ENVIRONMENT, FakeContext
    from bench.standin import REGION, Meter

    for name, value in LAMBDA_ENVIRONMENT.items():  # what Lambda sets before the init phase (imports)
        os.environ.setdefault(name, value)
    from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
    from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients

    roles = {"processed_events": "processed_events_table", "order_records": "order_records_table"}
    meter = Meter()
    meter.install()
    try:
        with mock_aws():
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            sns = boto3.client("sns", region_name=REGION)
            sqs = boto3.client("sqs", region_name=REGION)
            for name, role in roles.items():
                deployment.create_table(dynamodb, name, deployed["tables"][role])
            env = environment.ours(
                processed_events="processed_events",
                order_records="order_records",
                topic_arn=sns.create_topic(Name="orders")["TopicArn"],
                dead_letter_queue_url=sqs.create_queue(QueueName="dlq")["QueueUrl"],
            )
            handler_module.configure(Clients(dynamodb=dynamodb, sns=sns, sqs=sqs), env)
            orders = list(OrderSource(7).orders(MEASURED_ORDERS))
            with meter.measuring(0) as tally:
                response = handler_module.handler(batch_event(orders, random.Random(7)), FakeContext())  # noqa: S311 - test data
            if response["batchItemFailures"]:
                raise RuntimeError(f"the measured batch failed: {response}")
    finally:
        handler_module.configure()
        meter.uninstall()
    return UnitsPerOrder(
        tables={table: wru / MEASURED_ORDERS for table, wru in sorted(tally.wru_by_table.items())},
        indexes={index: wru / MEASURED_ORDERS for index, wru in sorted(tally.wru_by_index.items())},
    )


def _per_second(capacity: float, per_order: float) -> float:
    return math.inf if per_order == 0 else capacity / per_order


def ceilings(props: Mapping[str, Any], units: UnitsPerOrder, shards: int) -> list[Ceiling]:
    """Orders per second each component sustains with these props (every prop given, as :func:`defaults`)."""
    q = {name: quota.value for name, quota in QUOTAS.items()}
    batch = props["batch_size"]
    # The batching window gathers records before the invocation: it holds no concurrency.
    invocation_s = BATCH_SECONDS * math.ceil(batch / 10)
    per_invocation = batch / invocation_s
    pollers = props["provisioned_pollers"].maximum_pollers if props["provisioned_pollers"] else None
    if pollers:
        esm_concurrency = pollers * q["poller_concurrency"]
        esm_limit = f"{pollers} provisioned pollers x {q['poller_concurrency']:g} concurrent invocations"
    elif props["max_concurrency"]:
        esm_concurrency = props["max_concurrency"]
        esm_limit = f"max_concurrency={props['max_concurrency']}"
    else:
        esm_concurrency = q["esm_standard_concurrency"]
        esm_limit = (
            f"{q['esm_standard_concurrency']:g} concurrent invocations per mapping "
            f"(reached at +{q['esm_scale_up_per_minute']:g} a minute)"
        )
    lambda_concurrency = props["reserved_concurrency"] or q["lambda_concurrency"]
    rows = [
        Ceiling(
            "SQS event source mapping",
            esm_concurrency * per_invocation,
            f"{esm_limit}, {batch} records per {invocation_s * 1000:.0f} ms invocation",
            "provisioned_pollers (up to 2,000 pollers), batch_size with max_batching_window",
        ),
        Ceiling(
            "Lambda concurrency",
            lambda_concurrency * per_invocation,
            f"{'reserved_concurrency' if props['reserved_concurrency'] else 'account quota'} {lambda_concurrency:g}",
            "reserved_concurrency, an account quota increase",
        ),
    ]
    for table, wru in units.tables.items():
        rows.append(
            Ceiling(
                f"DynamoDB {table}",
                _per_second(q["dynamodb_table_wru"], wru),
                f"{q['dynamodb_table_wru']:,.0f} WRU/s per on-demand table, {wru:g} WRU per order "
                "(keys hash evenly: no hot partition)",
                "a table throughput quota increase",
            )
        )
    for index, wru in units.indexes.items():
        rows.append(
            Ceiling(
                f"DynamoDB index {index.split('/', 1)[1]} ({shards} shards)",
                min(
                    _per_second(shards * q["dynamodb_partition_wru"], wru),
                    _per_second(q["dynamodb_table_wru"], wru),
                ),
                f"{shards} partition key values x {q['dynamodb_partition_wru']:,.0f} WRU/s, {wru:g} WRU per order",
                "more shards (PENDING_SHARDS: the reconciler queries each), or fewer index writes per order",
            )
        )
    if props["fifo"]:
        topic = q["sns_publish_per_second"] if props["fifo_high_throughput"] else q["sns_fifo_topic_per_second"]
        queue = q["sqs_fifo_high_throughput_tps" if props["fifo_high_throughput"] else "sqs_fifo_tps"] * 10
        rows.append(
            Ceiling(
                "SNS FIFO topic",
                topic,
                f"{topic:,.0f} messages/s ({'per message group scope' if props['fifo_high_throughput'] else 'topic'})",
                "fifo_high_throughput",
            )
        )
        rows.append(
            Ceiling("SQS FIFO queue", queue, f"{queue / 10:,.0f} API calls/s x 10 messages", "fifo_high_throughput")
        )
    else:
        rows.append(
            Ceiling(
                "SNS topic",
                q["sns_publish_per_second"],
                f"{q['sns_publish_per_second']:,.0f} published messages/s, one per order",
                "an SNS Publish quota increase",
            )
        )
    return rows


def first_limit(rows: list[Ceiling]) -> Ceiling:
    return min(rows, key=lambda row: row.orders_per_second)


def _rate(value: float) -> str:
    return "no limit" if math.isinf(value) else f"{value:,.0f}"


def render(units: UnitsPerOrder, shards: int) -> str:
    """The generated part of docs/capacity.md."""
    base = defaults()
    lines = [
        GENERATED_START,
        "",
        "Measured per new order (bench/capacity.py, the real consumer on tables as deployed): "
        + ", ".join(f"`{t}` {w:g} WRU" for t, w in units.tables.items())
        + (", " + ", ".join(f"index `{i}` {w:g} WRU" for i, w in units.indexes.items()) if units.indexes else "")
        + f". An invocation holds its concurrency {BATCH_SECONDS * 1000:.0f} ms per 10 records (stated).",
    ]
    for profile in _profiles():
        props = {**base, **profile.props}
        rows = ceilings(props, units, shards)
        first = first_limit(rows)
        changed = ", ".join(f"`{k}={_show(v)}`" for k, v in profile.props.items()) or "none"
        met = "meets" if first.orders_per_second >= profile.target_orders_per_second else "does NOT meet"
        lines += [
            "",
            f"### {profile.name}: {profile.target_orders_per_second:,} orders/s",
            "",
            f"Props changed: {changed} ({profile.why}). First limit: **{first.component}** at "
            f"{_rate(first.orders_per_second)} orders/s: {met} the target. What to change there: {first.change}.",
            "",
            "| component | orders/s | what limits it |",
            "|---|---:|---|",
        ]
        for row in rows:
            mark = "**" if row is first else ""
            lines.append(f"| {mark}{row.component}{mark} | {mark}{_rate(row.orders_per_second)}{mark} | {row.limit} |")
    lines += ["", GENERATED_END]
    return "\n".join(lines) + "\n"


def replace_generated(page: str, generated: str) -> str:
    start, end = page.index(GENERATED_START), page.index(GENERATED_END) + len(GENERATED_END)
    return page[:start] + generated.rstrip("\n") + page[end:]


def main() -> int:

    generated = render(measure_units(deployment.load()), pending_shards())
    PAGE.write_text(replace_generated(PAGE.read_text(encoding="utf-8"), generated), encoding="utf-8")
    print(f"wrote the generated part of {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
