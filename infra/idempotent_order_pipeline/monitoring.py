"""Alarms and the dashboard: what an operator needs to see and be woken up for.

Two kinds of alarm:

- *event* alarms fire on the first datapoint: one conflicting order, one invalid message, one
  parked message, one failed delivery or one DynamoDB system error needs a human, whatever the
  environment;
- *sustained* alarms (message age, Lambda errors and throttles, DynamoDB throttles) fire after
  ``alarm_evaluation_periods`` consecutive breaching minutes, since SQS retries absorb a blip.

Missing data is not breaching: no traffic is not an incident. What to do when each fires is in the
README ("Alarms").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration, aws_cloudwatch, aws_cloudwatch_actions, aws_dynamodb, aws_lambda, aws_sns, aws_sqs
from constructs import Construct

PERIOD = Duration.minutes(1)
# The operations the handler performs on each table (CloudWatch's Operation dimension).
PROCESSED_EVENTS_OPERATIONS = (aws_dynamodb.Operation.TRANSACT_WRITE_ITEMS, aws_dynamodb.Operation.UPDATE_ITEM)
ORDER_RECORDS_OPERATIONS = (aws_dynamodb.Operation.TRANSACT_WRITE_ITEMS,)


@dataclass(frozen=True)
class MonitoredResources:
    """What the alarms and the dashboard watch."""

    queue: aws_sqs.IQueue
    dead_letter_queue: aws_sqs.IQueue
    function: aws_lambda.IFunction
    topic: aws_sns.ITopic
    processed_events_table: aws_dynamodb.ITable
    order_records_table: aws_dynamodb.ITable
    #: Outcome metrics of the handler by metric name (OrdersRecorded, Conflicts, ...).
    outcome_metrics: Mapping[str, aws_cloudwatch.Metric]


def create_alarms(
    scope: Construct,
    resources: MonitoredResources,
    *,
    oldest_message_age_threshold: Duration,
    evaluation_periods: int,
    alarm_action: aws_sns.ITopic | None,
) -> dict[str, aws_cloudwatch.Alarm]:
    """One alarm per failure mode, keyed by role; each sends to ``alarm_action`` when given."""
    alarms: dict[str, aws_cloudwatch.Alarm] = {}

    def alarm(
        key: str,
        construct_id: str,
        metric: aws_cloudwatch.IMetric,
        description: str,
        *,
        threshold: float = 1,
        sustained: bool = False,
        comparison: aws_cloudwatch.ComparisonOperator = (
            aws_cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
    ) -> None:
        created = aws_cloudwatch.Alarm(
            scope,
            construct_id,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods if sustained else 1,
            treat_missing_data=aws_cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{description} Runbook: README.md, section 'Alarms'.",
        )
        if alarm_action is not None:
            created.add_alarm_action(aws_cloudwatch_actions.SnsAction(alarm_action))
        alarms[key] = created

    outcome = resources.outcome_metrics
    alarm(
        "dead_letter_queue_not_empty",
        "DeadLetterQueueNotEmptyAlarm",
        resources.dead_letter_queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
        "Messages are parked in the dead-letter queue: invalid, conflicting or repeatedly failing orders.",
    )
    alarm(
        "oldest_message_too_old",
        "OldestMessageTooOldAlarm",
        resources.queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
        "The oldest order waiting in the queue is older than the threshold: the consumer is behind or failing.",
        threshold=oldest_message_age_threshold.to_seconds(),
        sustained=True,
        comparison=aws_cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    )
    alarm(
        "function_errors",
        "FunctionErrorsAlarm",
        resources.function.metric_errors(period=PERIOD, statistic="Sum"),
        "The consumer function fails whole invocations (crash, timeout, configuration).",
        sustained=True,
    )
    alarm(
        "function_throttles",
        "FunctionThrottlesAlarm",
        resources.function.metric_throttles(period=PERIOD, statistic="Sum"),
        "The consumer function is throttled: account concurrency is exhausted.",
        sustained=True,
    )
    alarm(
        "conflicts",
        "ConflictsAlarm",
        outcome["Conflicts"],
        "An idempotency key or order id was reused with another payload; the message is in the DLQ.",
    )
    alarm(
        "invalid_messages",
        "InvalidMessagesAlarm",
        outcome["InvalidMessages"],
        "A producer sent a message the consumer cannot accept; it is in the DLQ.",
    )
    alarm(
        "notifications_failed",
        "NotificationsFailedAlarm",
        resources.topic.metric_number_of_notifications_failed(period=PERIOD, statistic="Sum"),
        "SNS could not deliver order notifications to a subscriber.",
    )
    for key, construct_id, table, operations in (
        ("processed_events", "ProcessedEvents", resources.processed_events_table, PROCESSED_EVENTS_OPERATIONS),
        ("order_records", "OrderRecords", resources.order_records_table, ORDER_RECORDS_OPERATIONS),
    ):
        alarm(
            f"{key}_throttles",
            f"{construct_id}ThrottlesAlarm",
            table.metric_throttled_requests_for_operations(operations=list(operations), period=PERIOD),
            f"DynamoDB throttles requests to the {key} table.",
            sustained=True,
        )
        alarm(
            f"{key}_system_errors",
            f"{construct_id}SystemErrorsAlarm",
            table.metric_system_errors_for_operations(operations=list(operations), period=PERIOD),
            f"DynamoDB returns internal errors for the {key} table.",
        )
    return alarms


def create_dashboard(
    scope: Construct, resources: MonitoredResources, alarms: Mapping[str, aws_cloudwatch.Alarm]
) -> aws_cloudwatch.Dashboard:
    """Queue, function, outcomes and tables on one page, alarms on top."""
    queue, dlq, function = resources.queue, resources.dead_letter_queue, resources.function
    tables = (resources.processed_events_table, resources.order_records_table)
    dashboard = aws_cloudwatch.Dashboard(scope, "Dashboard")
    dashboard.add_widgets(
        aws_cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(alarms.values()), width=24),
    )
    dashboard.add_widgets(
        aws_cloudwatch.GraphWidget(
            title="Queue depth",
            left=[
                queue.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                queue.metric_approximate_number_of_messages_not_visible(period=PERIOD, statistic="Maximum"),
            ],
            width=8,
        ),
        aws_cloudwatch.GraphWidget(
            title="Oldest message age (seconds)",
            left=[queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum")],
            width=8,
        ),
        aws_cloudwatch.GraphWidget(
            title="Dead-letter queue depth",
            left=[dlq.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum")],
            width=8,
        ),
    )
    dashboard.add_widgets(
        aws_cloudwatch.GraphWidget(
            title="Invocations, errors, throttles",
            left=[
                function.metric_invocations(period=PERIOD, statistic="Sum"),
                function.metric_errors(period=PERIOD, statistic="Sum"),
                function.metric_throttles(period=PERIOD, statistic="Sum"),
            ],
            width=8,
        ),
        aws_cloudwatch.GraphWidget(
            title="Duration (ms)",
            left=[function.metric_duration(period=PERIOD, statistic=stat) for stat in ("p50", "p99", "Maximum")],
            width=8,
        ),
        aws_cloudwatch.GraphWidget(
            title="Concurrent executions",
            left=[function.metric("ConcurrentExecutions", period=PERIOD, statistic="Maximum")],
            width=8,
        ),
    )
    dashboard.add_widgets(
        aws_cloudwatch.GraphWidget(
            title="Handler outcomes", left=list(resources.outcome_metrics.values()), width=12, stacked=False
        ),
        aws_cloudwatch.GraphWidget(
            title="Notifications",
            left=[
                resources.topic.metric_number_of_messages_published(period=PERIOD, statistic="Sum"),
                resources.topic.metric_number_of_notifications_delivered(period=PERIOD, statistic="Sum"),
                resources.topic.metric_number_of_notifications_failed(period=PERIOD, statistic="Sum"),
            ],
            width=12,
        ),
    )
    dashboard.add_widgets(
        aws_cloudwatch.GraphWidget(
            title="DynamoDB consumed write capacity",
            left=[table.metric_consumed_write_capacity_units(period=PERIOD, statistic="Sum") for table in tables],
            width=12,
        ),
        aws_cloudwatch.GraphWidget(
            title="DynamoDB throttled requests",
            left=[
                # ITable (an existing table may be imported) has only the plural helper: the same metric.
                table.metric(
                    "ThrottledRequests",
                    dimensions_map={"TableName": table.table_name, "Operation": operation.value},
                    statistic="sum",
                    period=PERIOD,
                    label=f"{name} {operation.value}",
                )
                for name, table, operations in (
                    ("processed_events", resources.processed_events_table, PROCESSED_EVENTS_OPERATIONS),
                    ("order_records", resources.order_records_table, ORDER_RECORDS_OPERATIONS),
                )
                for operation in operations
            ],
            width=12,
        ),
    )
    return dashboard
