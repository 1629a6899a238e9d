"""The construct's default deployment, as the bench bills it: read from a synthesized template.

``python -m bench.deployment`` synthesizes ``IdempotentOrderPipeline(stack, "Pipeline")`` with every
default (a separate process: the library imports the Lambda asset under its package name, the
bench's consumer processes load it top-level) and prints :func:`facts` as JSON. The bench builds
ours' tables in moto from these definitions (the pending index included, so its writes are
metered as deployed), bills the reconciler at its memory and schedule, and lists the fixed monthly
cost of the alarms, the dashboard and the custom metrics the template creates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import (
    EVENT_SOURCE_METRICS,
    OUTCOME_METRICS,
    RECONCILER_METRICS,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import CONSUMER_HANDLER, RECONCILER_HANDLER
from idempotent_order_pipeline.core.schedule import rate_seconds

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Consumer and reconciler entry points (the asset's contract).


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def _alarm_metrics(alarm: dict[str, Any]) -> int:
    """Metrics an alarm is billed for (a metric math alarm: each metric it reads)."""
    properties = alarm["Properties"]
    return 1 if "MetricName" in properties else sum("MetricStat" in query for query in properties["Metrics"])


def _rate_seconds(expression: str) -> int:
    seconds = rate_seconds(expression)
    if seconds is None:
        raise ValueError(f"schedule {expression!r}: expected rate(N minutes|hours|days)")
    return seconds


def custom_metric_count(template: dict[str, Any]) -> int:
    """The custom metrics a deployed pipeline publishes, each billed monthly (free tier ignored).

    The consumer's outcome metrics (plus ``SchemaViolations`` with an order schema, which the
    function's discovery mark shows), the reconciler's when it is deployed, and the EventCount metrics
    of every event source mapping that reports them (``MetricsConfig``).
    """
    functions = _of_type(template, "AWS::Lambda::Function").values()
    handlers = {f["Properties"].get("Handler"): f for f in functions}
    count = 0
    consumer = handlers.get(CONSUMER_HANDLER)
    if consumer is not None:
        count += len(OUTCOME_METRICS)
        if "order_schema" in consumer.get("Metadata", {}).get("idempotent_order_pipeline", {}):
            count += 1  # SchemaViolations
    if RECONCILER_HANDLER in handlers:
        count += len(RECONCILER_METRICS)
    for mapping in _of_type(template, "AWS::Lambda::EventSourceMapping").values():
        if "EventCount" in mapping["Properties"].get("MetricsConfig", {}).get("Metrics", []):
            count += len(EVENT_SOURCE_METRICS)
    return count


def facts(template: dict[str, Any]) -> dict[str, Any]:
    """What the bench needs of one pipeline's template (exactly one pipeline, as the default app has)."""
    tables = {}
    for resource in _of_type(template, "AWS::DynamoDB::Table").values():
        role = resource.get("Metadata", {}).get("idempotent_order_pipeline", {}).get("role")
        properties = resource["Properties"]
        tables[role] = {
            "KeySchema": properties["KeySchema"],
            "AttributeDefinitions": properties["AttributeDefinitions"],
            "GlobalSecondaryIndexes": properties.get("GlobalSecondaryIndexes", []),
        }
    functions = {
        r["Properties"]["Handler"]: r["Properties"] for r in _of_type(template, "AWS::Lambda::Function").values()
    }
    consumer, reconciler = functions[CONSUMER_HANDLER], functions.get(RECONCILER_HANDLER)
    [mapping] = _of_type(template, "AWS::Lambda::EventSourceMapping").values()
    rules = [r["Properties"]["ScheduleExpression"] for r in _of_type(template, "AWS::Events::Rule").values()]
    alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
    return {
        "tables": tables,
        "consumer": {
            "memory_mb": consumer["MemorySize"],
            "timeout_s": consumer["Timeout"],
            "batch_size": mapping["Properties"].get("BatchSize", 10),
        },
        "reconciler": (
            None if reconciler is None else {"memory_mb": reconciler["MemorySize"], "every_s": _rate_seconds(rules[0])}
        ),
        "alarms": len(alarms),
        "alarm_metrics": sum(_alarm_metrics(alarm) for alarm in alarms),
        "dashboards": len(_of_type(template, "AWS::CloudWatch::Dashboard")),
        "custom_metrics": custom_metric_count(template),
    }


def synthesize() -> dict[str, Any]:
    """The default pipeline's facts (imports the CDK: run in its own process, see :func:`load`)."""
    import aws_cdk as cdk

    from idempotent_order_pipeline import IdempotentOrderPipeline

    app = cdk.App()
    stack = cdk.Stack(app, "Bench")
    IdempotentOrderPipeline(stack, "Pipeline")
    template = app.synth().get_stack_by_name("Bench").template
    return facts(template)


def load() -> dict[str, Any]:
    """:func:`synthesize` in a fresh interpreter (the CDK and the library stay out of the bench's process)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO_ROOT / p) for p in ("infra", ""))}
    completed = subprocess.run(
        [sys.executable, "-m", "bench.deployment"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"synthesizing the default pipeline failed:\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


if __name__ == "__main__":
    print(json.dumps(synthesize()))


def create_table(dynamodb: Any, name: str, definition: dict[str, Any]) -> None:
    """Create table ``name`` on-demand with ``definition``'s keys and, if it has any, its indexes."""
    indexes = definition.get("GlobalSecondaryIndexes")
    dynamodb.create_table(
        TableName=name,
        KeySchema=definition["KeySchema"],
        AttributeDefinitions=definition["AttributeDefinitions"],
        BillingMode="PAY_PER_REQUEST",
        **({"GlobalSecondaryIndexes": indexes} if indexes else {}),
    )
