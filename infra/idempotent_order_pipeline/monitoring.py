"""Alarms and the dashboard: what an operator needs to see and be woken up for.

Two kinds of alarm:

- *event* alarms fire on the first datapoint: one conflicting order, one invalid message, one
  parked message, one failed delivery or one DynamoDB system error needs a human, whatever the
  environment;
- *sustained* alarms (message age, Lambda errors and throttles, DynamoDB throttles, messages polled
  and never deleted) fire after ``alarm_evaluation_periods`` consecutive breaching periods (1
  minute; 5 for polled and never deleted), since SQS retries absorb a blip.

Missing data is not breaching: no traffic is not an incident. The one exception is the
reconciler's ``pending_too_old``: its metric is emitted by every run that could read the index, so
its absence means the reconciler stopped reporting (killed, failing to read, or not scheduled).
What to do when each fires is in ``docs/operations.md`` ("Runbook: when an alarm fires"), one row
per key of :data:`ALARM_KEYS`.

Every alarm is made by :class:`AlarmFactory`, after cdk-monitoring-constructs' ``AlarmFactory``:
a stable name (``<alarm_name_prefix>-<key>``), a description saying what the alarm means and
linking the runbook, the same ``IAlarmAction`` list on ALARM and (unless ``ok_actions=False``) OK,
and per-alarm opt-out or thresholds from ``alarm_overrides``. Sub-constructs add their alarms
through the pipeline's ``alarm_factory`` (register the key in :data:`ALARM_KEYS` and ``docs/operations.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aws_cdk import Duration, aws_cloudwatch, aws_dynamodb, aws_lambda, aws_sns, aws_sqs
from constructs import Construct

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import metric_names
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import (
    EVENT_SOURCE_METRICS as EVENT_SOURCE_METRICS,  # re-exported: the construct and the tests name them here
)

PERIOD = Duration.minutes(1)
# The operations the handler performs on each table (CloudWatch's Operation dimension).
PROCESSED_EVENTS_OPERATIONS = (aws_dynamodb.Operation.TRANSACT_WRITE_ITEMS, aws_dynamodb.Operation.UPDATE_ITEM)
ORDER_RECORDS_OPERATIONS = (aws_dynamodb.Operation.TRANSACT_WRITE_ITEMS,)

#: Every alarm the construct can create, by key (the keys of ``alarms`` and of ``alarm_overrides``).
ALARM_KEYS = (
    "dead_letter_queue_not_empty",
    "oldest_message_too_old",
    "function_errors",
    "function_throttles",
    "conflicts",
    "invalid_messages",
    "notifications_failed",
    "processed_events_throttles",
    "processed_events_system_errors",
    "order_records_throttles",
    "order_records_system_errors",
    "pending_too_old",  # the reconciler's (reconciliation.py), with reconcile_every set
    "messages_polled_not_deleted",  # the event source mapping's, with event_source_metrics
    "reconciler_errors",  # the reconciler's, with reconcile_every set
    "schema_violations",  # with order_schema set
)
#: The alarms only a pipeline with an ``order_schema`` has.
SCHEMA_ALARM_KEYS = ("schema_violations",)
#: ``messages_polled_not_deleted`` looks at windows this long, so a batch still in flight (up to
#: 15 minutes of function timeout) is not counted as never deleted.
POLLED_NOT_DELETED_PERIOD = Duration.minutes(5)
#: CloudWatch's longest evaluation range (period x evaluation periods) of a metric alarm: 7 days, and
#: 1 day for a period under an hour (PutMetricAlarm, ``Period``). A longer one fails the deploy.
MAX_EVALUATION_RANGE = Duration.days(7)
MAX_SHORT_PERIOD_EVALUATION_RANGE = Duration.days(1)
SHORT_PERIOD_BELOW = Duration.hours(1)


def evaluation_range_fits(period_seconds: float, evaluation_periods: int) -> bool:
    """Whether CloudWatch accepts an alarm of ``evaluation_periods`` periods of ``period_seconds``."""
    short = period_seconds < SHORT_PERIOD_BELOW.to_seconds()
    limit = MAX_SHORT_PERIOD_EVALUATION_RANGE if short else MAX_EVALUATION_RANGE
    return period_seconds * evaluation_periods <= limit.to_seconds()


def allowed_period_ranges(evaluation_periods: int, *, per_period: int = 1) -> list[tuple[int, int]]:
    """The whole-minute values ``x`` (seconds, as ``(lowest, highest)`` ranges) for which an alarm of
    ``evaluation_periods`` periods of ``per_period`` x ``x`` fits CloudWatch's evaluation range.

    Two ranges at most, as the limit is longer for periods of an hour or more: with 30 periods,
    1 to 48 minutes (at most 1 day) and 60 to 336 minutes (at most 7 days), but not 50 minutes.
    """
    minute = 60
    short_below = int(SHORT_PERIOD_BELOW.to_seconds())
    ranges = [
        (minute, min(int(MAX_SHORT_PERIOD_EVALUATION_RANGE.to_seconds()) // evaluation_periods, short_below - 1)),
        (short_below, int(MAX_EVALUATION_RANGE.to_seconds()) // evaluation_periods),
    ]
    scaled = [(-(-low // per_period // minute) * minute, high // per_period // minute * minute) for low, high in ranges]
    found: list[tuple[int, int]] = []
    for low, high in scaled:
        if low > high:
            continue
        if found and low <= found[-1][1] + minute:  # adjacent minutes: one range
            found[-1] = (found[-1][0], high)
        else:
            found.append((low, high))
    return found


#: Where each description points on-call when no ``runbook_url`` is given.
DEFAULT_RUNBOOK = "docs/operations.md of idempotent-order-pipeline, section 'Runbook: when an alarm fires'"


@dataclass(frozen=True)
class AlarmThreshold:
    """Replace one alarm's threshold and/or how many periods must breach (``alarm_overrides``).

    :param threshold: the value the metric is compared with (more than 0). Default: None (the
        alarm's own, 1 for every count alarm; the age alarm's is ``oldest_message_age_threshold``).
    :param evaluation_periods: minutes looked at. Default: None (1 for event alarms,
        ``alarm_evaluation_periods`` for sustained ones).
    :param datapoints_to_alarm: breaching minutes among them that fire the alarm, 1..
        ``evaluation_periods``. Default: None (all of them).
    """

    threshold: float | None = None
    evaluation_periods: int | None = None
    datapoints_to_alarm: int | None = None


#: What ``alarm_overrides`` maps a key to: False (do not create it), True (the default) or thresholds.
AlarmOverride = bool | AlarmThreshold


@dataclass(frozen=True)
class AlarmDefinition:
    """One alarm as the pipeline defines it, whether or not it creates it (``alarm_definitions``).

    Everything another alarm tool (cdk-monitoring-constructs' ``MonitoringFacade``, say) needs to
    raise the same alarm: the metric, the threshold and how it is compared, the periods, and what
    it means (with the runbook link).
    """

    key: str
    metric: aws_cloudwatch.IMetric
    threshold: float
    comparison_operator: aws_cloudwatch.ComparisonOperator
    evaluation_periods: int
    datapoints_to_alarm: int
    treat_missing_data: aws_cloudwatch.TreatMissingData
    description: str


@dataclass(frozen=True)
class AlarmSettings:
    """How every alarm is named, described and wired (the construct's alarm props, resolved)."""

    name_prefix: str
    actions: Sequence[aws_cloudwatch.IAlarmAction] = ()
    ok_actions: bool = True
    runbook_url: str | None = None
    evaluation_periods: int = 3
    overrides: Mapping[str, AlarmOverride] = field(default_factory=dict)
    #: False: define every alarm (``definitions``) but create none (the caller's own tool raises them).
    create: bool = True
    #: Where a description points on-call when ``runbook_url`` is None.
    default_runbook: str = DEFAULT_RUNBOOK


class AlarmFactory:
    """Creates the pipeline's alarms, all alike: name prefix, runbook link, actions, overrides.

    ``alarms`` holds every alarm created so far, by key, and ``definitions`` every alarm defined
    (created or not, see ``AlarmSettings.create``); the pipeline exposes read-only views of both.
    """

    def __init__(self, scope: Construct, settings: AlarmSettings, *, keys: Sequence[str] = ALARM_KEYS) -> None:
        self._scope = scope
        self.settings = settings
        #: The keys this factory may create (the pipeline's :data:`ALARM_KEYS`, or another construct's own).
        self.keys = tuple(keys)
        self.alarms: dict[str, aws_cloudwatch.Alarm] = {}
        self.definitions: dict[str, AlarmDefinition] = {}

    def enabled(self, key: str) -> bool:
        """False when ``alarm_overrides`` turned the alarm off."""
        return self.settings.overrides.get(key, True) is not False

    def add_alarm(
        self,
        key: str,
        construct_id: str,
        metric: aws_cloudwatch.IMetric,
        *,
        description: str,
        threshold: float = 1,
        sustained: bool = False,
        comparison: aws_cloudwatch.ComparisonOperator = (
            aws_cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
        treat_missing_data: aws_cloudwatch.TreatMissingData = aws_cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> aws_cloudwatch.Alarm | None:
        """Create alarm ``key`` (one of :data:`ALARM_KEYS`), or nothing when it is turned off.

        ``description`` says what the alarm means; the runbook link is appended. Event alarms
        (``sustained=False``) look at one period, sustained ones at ``alarm_evaluation_periods``;
        an :class:`AlarmThreshold` override replaces either. Missing data is not breaching unless
        ``treat_missing_data`` says otherwise (a metric whose absence is itself the incident).
        """
        if key not in self.keys:
            raise ValueError(f"alarm key {key!r}: not among this factory's keys {self.keys}; register it first")
        if key in self.definitions:
            raise ValueError(f"alarm key {key!r}: already created")
        override = self.settings.overrides.get(key, True)
        if override is False:
            return None
        limits = override if isinstance(override, AlarmThreshold) else AlarmThreshold()
        periods = limits.evaluation_periods or (self.settings.evaluation_periods if sustained else 1)
        settings = self.settings
        definition = AlarmDefinition(
            key=key,
            metric=metric,
            threshold=threshold if limits.threshold is None else limits.threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=limits.datapoints_to_alarm or periods,
            treat_missing_data=treat_missing_data,
            description=self.description(key, description),
        )
        self.definitions[key] = definition
        if not settings.create:
            return None
        alarm = aws_cloudwatch.Alarm(
            self._scope,
            construct_id,
            alarm_name=f"{settings.name_prefix}-{key}",
            metric=metric,
            threshold=definition.threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=limits.datapoints_to_alarm,
            treat_missing_data=definition.treat_missing_data,
            alarm_description=definition.description,
        )
        for action in settings.actions:
            alarm.add_alarm_action(action)
            if settings.ok_actions:
                alarm.add_ok_action(action)
        self.alarms[key] = alarm
        return alarm

    def description(self, key: str, meaning: str) -> str:
        """What the alarm means, then where its runbook is."""
        runbook = self.settings.runbook_url or self.settings.default_runbook
        return f"{meaning} Runbook ({key}): {runbook}"


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
    #: The event source mapping's EventCount metrics by name (:data:`EVENT_SOURCE_METRICS`); empty
    #: with ``event_source_metrics=False``.
    event_source_metrics: Mapping[str, aws_cloudwatch.Metric] = field(default_factory=dict)


def event_source_metric(event_source_mapping_id: str, name: str) -> aws_cloudwatch.Metric:
    """One of the event source mapping's EventCount metrics (:data:`EVENT_SOURCE_METRICS`), 1-minute Sum."""
    return aws_cloudwatch.Metric(
        namespace="AWS/Lambda",
        metric_name=name,
        dimensions_map={"EventSourceMappingUUID": event_source_mapping_id},
        period=PERIOD,
        statistic="Sum",
    )


def create_alarms(factory: AlarmFactory, resources: MonitoredResources) -> None:
    """One alarm per failure mode of the pipeline beyond the standard three (core.sqs_function), through ``factory``."""
    alarm = factory.add_alarm
    outcome = resources.outcome_metrics
    alarm(
        "function_throttles",
        "FunctionThrottlesAlarm",
        resources.function.metric_throttles(period=PERIOD, statistic="Sum"),
        description="The consumer function is throttled: account concurrency is exhausted.",
        sustained=True,
    )
    alarm(
        "conflicts",
        "ConflictsAlarm",
        outcome[metric_names.CONFLICTS],
        description="An idempotency key or order id was reused with another payload; the message is in the DLQ.",
    )
    alarm(
        "invalid_messages",
        "InvalidMessagesAlarm",
        outcome[metric_names.INVALID_MESSAGES],
        description="A producer sent a message the consumer cannot accept; it is in the DLQ.",
    )
    if metric_names.SCHEMA_VIOLATIONS in outcome:
        alarm(
            "schema_violations",
            "SchemaViolationsAlarm",
            outcome[metric_names.SCHEMA_VIOLATIONS],
            description="An order broke the pipeline's order_schema; it is in the DLQ with SCHEMA_VIOLATION (the "
            "producer skipped its check, or the schema changed under it).",
        )
    alarm(
        "notifications_failed",
        "NotificationsFailedAlarm",
        resources.topic.metric_number_of_notifications_failed(period=PERIOD, statistic="Sum"),
        description="SNS could not deliver order notifications to a subscriber.",
    )
    for key, construct_id, table, operations in (
        ("processed_events", "ProcessedEvents", resources.processed_events_table, PROCESSED_EVENTS_OPERATIONS),
        ("order_records", "OrderRecords", resources.order_records_table, ORDER_RECORDS_OPERATIONS),
    ):
        alarm(
            f"{key}_throttles",
            f"{construct_id}ThrottlesAlarm",
            table.metric_throttled_requests_for_operations(operations=list(operations), period=PERIOD),
            description=f"DynamoDB throttles requests to the {key} table.",
            sustained=True,
        )
        alarm(
            f"{key}_system_errors",
            f"{construct_id}SystemErrorsAlarm",
            table.metric_system_errors_for_operations(operations=list(operations), period=PERIOD),
            description=f"DynamoDB returns internal errors for the {key} table.",
        )
    if resources.event_source_metrics:
        polled = resources.event_source_metrics["PolledEventCount"].with_(period=POLLED_NOT_DELETED_PERIOD)
        deleted = resources.event_source_metrics["DeletedEventCount"].with_(period=POLLED_NOT_DELETED_PERIOD)
        alarm(
            "messages_polled_not_deleted",
            "MessagesPolledNotDeletedAlarm",
            aws_cloudwatch.MathExpression(
                # 1 in a window where messages were polled and none was deleted (FILL: no datapoint is 0).
                expression="IF(FILL(polled, 0) > 0 AND FILL(deleted, 0) == 0, 1, 0)",
                using_metrics={"polled": polled, "deleted": deleted},
                label="Polled, none deleted",
                period=POLLED_NOT_DELETED_PERIOD,
            ),
            description="The event source mapping polls messages but deletes none: every batch fails, times out or "
            "reports every record failed, so orders go round until the dead-letter queue.",
            sustained=True,
        )


def create_dashboard(
    scope: Construct, resources: MonitoredResources, alarms: Mapping[str, aws_cloudwatch.Alarm]
) -> aws_cloudwatch.Dashboard:
    """Queue, function, outcomes and tables on one page, alarms on top."""
    queue, dlq, function = resources.queue, resources.dead_letter_queue, resources.function
    tables = (resources.processed_events_table, resources.order_records_table)
    dashboard = aws_cloudwatch.Dashboard(scope, "Dashboard")
    if alarms:
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
    if resources.event_source_metrics:
        dashboard.add_widgets(
            aws_cloudwatch.GraphWidget(
                title="Event source mapping: polled, filtered, invoked, failed, deleted",
                left=list(resources.event_source_metrics.values()),
                width=24,
            )
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
