"""The props every SQS-fed function of this library has, declared once for both constructs.

``PipelineProps`` and ``SubscriberProps`` extend :class:`SqsFunctionProps` with their own props (and
redeclare a shared one only where its default differs); their constructors' keyword arguments extend
:class:`SqsFunctionKwargs` the same way. The rules these props follow are :mod:`.rules`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from aws_cdk import Duration, RemovalPolicy, aws_cloudwatch, aws_logs

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import DEFAULT_RECORD_RETENTION_DAYS
from idempotent_order_pipeline.core.props import prop
from idempotent_order_pipeline.core.rules import DEFAULT_BATCH_SIZE


@dataclass(frozen=True, kw_only=True)
class SqsFunctionProps:
    """The props of the queue, the function, its event source and the standard alarms."""

    batch_size: int = prop(
        DEFAULT_BATCH_SIZE,
        "records per Lambda invocation, 1..10 from a FIFO queue, 1..10000 otherwise (above 10 needs "
        "``max_batching_window``).",
    )
    max_batching_window: Duration | None = prop(
        None,
        "how long Lambda gathers records before invoking. Not supported for FIFO.",
        default_means="invoke as soon as records are available",
        allowed="a Duration, e.g. Duration.seconds(5), or None",
    )
    max_concurrency: int | None = prop(
        None,
        "the most concurrent invocations the event source may start, 2..1000.",
        default_means="Lambda's own scaling, up to the account limit",
    )
    max_receive_count: int = prop(
        5, "deliveries before SQS moves a message to the dead-letter queue, at least 1; below 5 adds a warning."
    )
    function_timeout: Duration = prop(
        Duration.seconds(30), "the function's timeout.", allowed="a Duration, e.g. Duration.seconds(30)"
    )
    memory_size: int = prop(256, "the function's memory in MB.", allowed="an int (MB)")
    visibility_timeout: Duration | None = prop(
        None,
        "the queue's visibility timeout, at least ``function_timeout``; below 6x ``function_timeout`` adds a warning.",
        default_means="6x ``function_timeout`` plus ``max_batching_window``, AWS's advice for SQS event sources",
        allowed="a Duration, e.g. Duration.minutes(3), or None",
    )
    retention_period: Duration = prop(
        Duration.days(4),
        "how long the queue keeps a message, less than the dead-letter queue's fixed 14 days.",
        allowed="a Duration, e.g. Duration.days(4)",
    )
    record_retention: Duration = prop(
        Duration.days(DEFAULT_RECORD_RETENTION_DAYS),
        "how long a record lives after its last write (its ``ttl``); must exceed ``retention_period`` + 14 "
        "days, so a record outlives every copy of its message.",
        allowed="a Duration, e.g. Duration.days(30)",
    )
    removal_policy: RemovalPolicy = prop(
        RemovalPolicy.RETAIN,
        "what happens to the queues, tables, topic and log group the construct creates when they leave the "
        "stack: DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE (SNAPSHOT is an error: none of them can be "
        "snapshotted). Table deletion protection follows the policy the stack ends up with, including "
        "``RemovalPolicies.of(...)`` applied later: on unless deleted.",
        allowed="a RemovalPolicy, e.g. RemovalPolicy.RETAIN",
    )
    log_retention: aws_logs.RetentionDays = prop(
        aws_logs.RetentionDays.ONE_MONTH,
        "how long the function's log group keeps logs.",
        allowed="an aws_logs.RetentionDays, e.g. RetentionDays.ONE_MONTH",
    )
    oldest_message_age_threshold: Duration = prop(
        Duration.minutes(15),
        "the queue age above which the ``oldest_message_too_old`` alarm fires, less than ``retention_period``.",
        allowed="a Duration, e.g. Duration.minutes(15)",
    )
    alarm_evaluation_periods: int = prop(
        3,
        "consecutive breaching minutes before a sustained alarm (age, errors, throttles) fires; event alarms "
        "fire on the first.",
    )
    alarm_actions: Sequence[aws_cloudwatch.IAlarmAction] = prop(
        (),
        "actions (``aws_cloudwatch_actions.SnsAction``, ``LambdaAction``, any ``IAlarmAction``) every alarm runs "
        "when it fires and, with ``ok_actions``, when it clears.",
        default_means="alarms without actions",
    )
    ok_actions: bool = prop(
        True, "run the same actions on OK, so a pager incident resolves itself.", allowed="True or False"
    )
    alarm_name_prefix: str | None = prop(
        None,
        "every alarm is named ``<prefix>-<key>`` (the key in ``alarms``); alarm names are unique per account "
        "and region, so two constructs there need two prefixes (changing it replaces the alarms, which hold no "
        "state).",
        default_means="a name unique per stack and construct path: the pipeline's ``service_name``, a "
        "subscriber's stack name and path",
    )
    runbook_url: str | None = prop(
        None,
        "the runbook every alarm's description links, next to what it means.",
        default_means="the description names this library's runbook (docs/operations.md, docs/subscriber.md); a "
        "warning when the alarms have actions",
    )
    create_alarms: bool = prop(
        True,
        "create the CloudWatch alarms. False: create none, and monitor with your own tool from "
        "``alarm_definitions`` (each alarm's metric, threshold, periods and description; docs/operations.md "
        "shows cdk-monitoring-constructs' ``MonitoringFacade``).",
        allowed="True or False",
    )
    event_source_metrics: bool = prop(
        True,
        "the event source mapping's ``EventCount`` metrics (polled, filtered out, invoked, failed, deleted; "
        "billed as custom metrics), on the dashboard and behind the pipeline's ``messages_polled_not_deleted`` "
        "alarm.",
        allowed="True or False",
    )


class SqsFunctionKwargs(TypedDict, total=False):
    """The constructors' keyword arguments for :class:`SqsFunctionProps` (a test keeps the two equal)."""

    batch_size: int
    max_batching_window: Duration | None
    max_concurrency: int | None
    max_receive_count: int
    function_timeout: Duration
    memory_size: int
    visibility_timeout: Duration | None
    retention_period: Duration
    record_retention: Duration
    removal_policy: RemovalPolicy
    log_retention: aws_logs.RetentionDays
    oldest_message_age_threshold: Duration
    alarm_evaluation_periods: int
    alarm_actions: Sequence[aws_cloudwatch.IAlarmAction]
    ok_actions: bool
    alarm_name_prefix: str | None
    runbook_url: str | None
    create_alarms: bool
    event_source_metrics: bool
