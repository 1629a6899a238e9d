"""The SNS outage scenario of ``make demo``: orders whose only copy was dropped, notified by the reconciler.

After the chaos run (whose checks are already done), on the same deployed stack:

1. **Outage.** The topic is deleted on the endpoint, so every ``Publish`` fails. New orders are
   sent and polled through the function: each is recorded (``pending``), its notification fails,
   SQS redelivers it until ``maxReceiveCount`` and the queue's redrive moves it to the DLQ.
2. **Drop.** The DLQ is purged without a redrive (an operator's ``dlq drop``, or 14 days passing):
   no copy of these messages is left anywhere.
3. **Recovery.** The topic comes back under the same ARN (a fresh subscriber queue on it).
4. **Reconciler.** A local scheduler stand-in invokes the deployed reconciler function
   (``order_consumer.reconciler.handler``, from the same asset, in its own execution environment)
   every ``interval`` seconds, until every outage order is ``sent`` or the time is up.

The reconciler's threshold is the sandbox's own redelivery window (the poller's visibility timeout
x ``maxReceiveCount``), the same rule the construct enforces on ``reconcile_after`` with the real
visibility timeout: the sandbox compresses time for both alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import metric_names, names
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    INDEX_PROPAGATION_MARGIN_SECONDS,
)
from idempotent_order_pipeline.sandbox import checks, traffic
from idempotent_order_pipeline.sandbox.function import RECONCILER_HANDLER, describe_function, find_function_by_handler
from idempotent_order_pipeline.sandbox.lambda_runtime import FunctionProcess
from idempotent_order_pipeline.sandbox.runtimes import Runtimes

if TYPE_CHECKING:
    from idempotent_order_pipeline.sandbox.demo import Sandbox

#: Defaults of the scenario.
DEFAULT_OUTAGE_ORDERS = 20
DEFAULT_SCHEDULE_INTERVAL_SECONDS = 2.0
#: The reconciler reads entries only once they are ``reconcile_after`` plus the index's propagation
#: margin old (a real minute, which the sandbox does not compress): the recovery waits for it too.
DEFAULT_RECOVERY_TIMEOUT_SECONDS = 120.0 + INDEX_PROPAGATION_MARGIN_SECONDS
OUTAGE_SEED_OFFSET = 1_000_003
SCHEDULED_EVENT = {"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


@dataclass
class OutageRun:
    """What the scenario did and found."""

    orders: int = 0
    recorded: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    pending_after_drop: int = 0
    reconciler_runs: int = 0
    reconciled_metric: int = 0
    sent: int = 0
    notified: int = 0
    wall_seconds: float = 0.0
    #: Which interpreter ran the reconciler (:meth:`.runtimes.RuntimeChoice.line`).
    runs_on: str = ""
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def _metric_sum(log_path: Path, name: str) -> int:
    total = 0
    if not log_path.exists():
        return 0
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"_aws"' in line:
            with contextlib.suppress(ValueError):
                value = json.loads(line).get(name, 0)
                total += int(sum(value) if isinstance(value, list) else value)
    return total


def _drop(sqs: Any, queue_url: str) -> list[str]:
    """Delete every message of the queue (what ``dlq drop`` does; PurgeQueue allows one call a minute)."""
    dropped: list[str] = []
    while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
        "Messages", []
    ):
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
        )
        dropped.extend(message["MessageId"] for message in batch)
    return dropped


def _statuses(sandbox: Sandbox, event_ids: list[str]) -> dict[str, str]:
    dynamodb = sandbox.endpoint.client("dynamodb")
    table = sandbox.deployment.output(names.PROCESSED_EVENTS_TABLE_OUTPUT)
    found: dict[str, str] = {}
    for event_id in event_ids:
        item = dynamodb.get_item(TableName=table, Key={"event_id": {"S": event_id}}, ConsistentRead=True).get("Item")
        found[event_id] = item["status"]["S"] if item else "missing"
    return found


def run_sns_outage(
    sandbox: Sandbox,
    *,
    orders: int = DEFAULT_OUTAGE_ORDERS,
    seed: int = 1,
    interval: float = DEFAULT_SCHEDULE_INTERVAL_SECONDS,
    timeout: float = DEFAULT_RECOVERY_TIMEOUT_SECONDS,
) -> OutageRun:
    """Steps 1-4 above; every expectation that fails is a violation of the result."""
    started = time.monotonic()
    run = OutageRun(orders=orders)
    endpoint, deployment = sandbox.endpoint, sandbox.deployment
    sns, sqs = endpoint.client("sns"), endpoint.client("sqs")
    topic_arn = deployment.output(names.TOPIC_ARN_OUTPUT)
    dlq_url = deployment.output(names.DEAD_LETTER_QUEUE_URL_OUTPUT)
    max_receive_count = sandbox.mapping.max_receive_count or 1

    reconciler_name = find_function_by_handler(endpoint, deployment, RECONCILER_HANDLER)
    if reconciler_name is None:
        run.violations.append("the stack has no reconciler function (reconcile_every=None?)")
        return run
    deployed = describe_function(endpoint, deployment, reconciler_name)
    reconcile_after = sandbox.options.visibility_timeout * max_receive_count
    reconciler = dataclasses.replace(
        deployed, environment={**deployed.environment, names.RECONCILE_AFTER_VARIABLE: str(reconcile_after)}
    )
    task_dir, layer_dirs = reconciler.unpack(sandbox.run_dir / "reconciler")
    runtime = Runtimes(sandbox.run_dir).for_runtime(reconciler.runtime)
    run.runs_on = runtime.choice.line(reconciler.name)
    log_path = sandbox.logs_dir / "reconciler-0.log"
    environment = FunctionProcess(reconciler, endpoint, task_dir, layer_dirs, log_path, runtime)

    # Its own seed: orders of their own, never the chaos run's (same seed, same order ids).
    plan = traffic.plan_traffic(
        orders, seed=seed + OUTAGE_SEED_OFFSET, resend_share=0, conflict_share=0, invalid_share=0
    )
    event_ids = [str(message.event_id) for message in plan.messages]
    if any(status != "missing" for status in _statuses(sandbox, event_ids).values()):
        run.violations.append("the outage's orders were recorded before the outage (reused order ids)")
        return run
    # 1. Outage: the topic is gone; the orders are recorded, their notifications fail, they reach the DLQ.
    _drop(sqs, dlq_url)  # the chaos run's parked messages were checked already
    topic_attributes = sns.get_topic_attributes(TopicArn=topic_arn)["Attributes"]
    sns.delete_topic(TopicArn=topic_arn)
    traffic.send(sqs, deployment.output(names.QUEUE_URL_OUTPUT), plan.messages)
    drained = sandbox.wait_until_drained(timeout=timeout)
    if not drained:
        run.violations.append("the source queue did not drain during the outage")
    statuses = _statuses(sandbox, event_ids)
    run.recorded = sum(status == names.Status.PENDING for status in statuses.values())
    sent_ids = {str(message.message_id) for message in plan.messages}
    run.dead_lettered = sum(message["MessageId"] in sent_ids for message in checks.peek_queue(sqs, dlq_url))

    # 2. Drop: no redrive; no copy of these messages is left.
    run.dropped = sum(message_id in sent_ids for message_id in _drop(sqs, dlq_url))
    run.pending_after_drop = sum(status == names.Status.PENDING for status in _statuses(sandbox, event_ids).values())

    # 3. Recovery: the topic is back under the same ARN, with a fresh subscriber.
    name = topic_arn.rsplit(":", 1)[1]
    fifo = {"FifoTopic": "true", "ContentBasedDeduplication": "false"} if name.endswith(".fifo") else {}
    recreated = sns.create_topic(Name=name, Attributes=fifo)["TopicArn"]
    if recreated != topic_arn:
        run.violations.append(f"the topic came back as {recreated}, not {topic_arn}")
    if topic_attributes.get("Policy"):
        sns.set_topic_attributes(TopicArn=topic_arn, AttributeName="Policy", AttributeValue=topic_attributes["Policy"])
    notifications = sandbox.subscribe_queue(f"sandbox-outage-notifications-{plan.run_id}")

    # 4. The scheduler stand-in runs the reconciler until every outage order is sent (or time is up).
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            invocation = environment.invoke(SCHEDULED_EVENT)
            run.reconciler_runs += 1
            if invocation.error is not None:
                run.violations.append(f"reconciler error: {invocation.error.error_type}: {invocation.error.message}")
                break
            if all(status == names.Status.SENT for status in _statuses(sandbox, event_ids).values()):
                break
            time.sleep(interval)
    finally:
        environment.stop()
    final = _statuses(sandbox, event_ids)
    run.sent = sum(status == names.Status.SENT for status in final.values())
    notified = {str(json.loads(message["Body"]).get("event_id")) for message in checks.peek_queue(sqs, notifications)}
    run.notified = len(notified & set(event_ids))
    run.reconciled_metric = _metric_sum(sandbox.logs_dir / "reconciler-0.log", metric_names.PENDING_RECONCILED)
    run.wall_seconds = time.monotonic() - started

    expectations = {
        "outage orders recorded and left pending": (run.recorded, orders),
        "outage messages moved to the DLQ by the redrive": (run.dead_lettered, orders),
        "records still pending after the DLQ was dropped": (run.pending_after_drop, orders),
        "outage orders marked sent": (run.sent, orders),
        "outage orders notified": (run.notified, orders),
        "PendingReconciled (reconciler metric)": (run.reconciled_metric, orders),
    }
    for name_, (got, expected) in expectations.items():
        if got != expected:
            run.violations.append(f"{name_}: {got}, expected {expected}")
    return run


def as_rows(run: OutageRun) -> list[tuple[str, Any, str, bool | None]]:
    """(name, value, expectation, ok) rows for the demo's report."""
    return [
        ("orders sent during the SNS outage", run.orders, "", None),
        ("  recorded, left pending", run.recorded, str(run.orders), run.recorded == run.orders),
        ("  moved to the DLQ, then dropped (no redrive)", run.dropped, str(run.orders), run.dropped == run.orders),
        (
            "  still pending after the drop",
            run.pending_after_drop,
            str(run.orders),
            run.pending_after_drop == run.orders,
        ),
        ("reconciler runs (local scheduler)", run.reconciler_runs, "", None),
        ("  notified by the reconciler", run.notified, str(run.orders), run.notified == run.orders),
        ("  marked sent", run.sent, str(run.orders), run.sent == run.orders),
        ("  PendingReconciled (metric)", run.reconciled_metric, str(run.orders), run.reconciled_metric == run.orders),
        ("wall time of the scenario", f"{run.wall_seconds:.1f} s", "", None),
    ]
