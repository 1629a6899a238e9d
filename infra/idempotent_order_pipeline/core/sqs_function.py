"""The builders of an SQS-fed function, after Solutions Constructs' ``buildQueue`` and ``buildLambdaFunction``.

Each builder creates its resource in the scope it is given (the construct itself, so the logical ids are
the construct's), with the secure defaults both constructs share; a construct adds what only it needs
(its key, its overrides, its statements). :data:`QUEUE_ID` and :data:`DEAD_LETTER_QUEUE_ID` are the ids of
stateful resources: a test pins the logical ids they make.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aws_cdk import (
    RemovalPolicy,
    Stack,
    aws_cloudwatch,
    aws_iam,
    aws_kms,
    aws_lambda,
    aws_lambda_event_sources,
    aws_logs,
    aws_sqs,
)
from constructs import Construct

from idempotent_order_pipeline import monitoring
from idempotent_order_pipeline.core.event_source import QueueEventSource
from idempotent_order_pipeline.core.rules import DEAD_LETTER_RETENTION

if TYPE_CHECKING:
    from idempotent_order_pipeline.core.function_props import SqsFunctionProps

#: The functions' runtime and architecture (the asset and the subscriber's layer are built and tested for
#: them; ``make test-runtime`` runs the function tests on this Python).
RUNTIME = aws_lambda.Runtime.PYTHON_3_14
ARCHITECTURE = aws_lambda.Architecture.ARM_64
#: Construct ids of the queues (part of their logical ids: never change them).
QUEUE_ID = "Queue"
DEAD_LETTER_QUEUE_ID = "DeadLetterQueue"
#: The standard alarms of an SQS-fed function, by key, with their construct ids.
STANDARD_ALARMS = {
    "dead_letter_queue_not_empty": "DeadLetterQueueNotEmptyAlarm",
    "oldest_message_too_old": "OldestMessageTooOldAlarm",
    "function_errors": "FunctionErrorsAlarm",
}
#: What the role of a function may do with its own log group, and nothing else of CloudWatch Logs.
LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")


def queue_defaults(
    *, fifo: bool, removal_policy: RemovalPolicy, encryption_key: aws_kms.IKey | None = None
) -> dict[str, Any]:
    """What every queue of the library is: encrypted (SQS-managed, or with the key), TLS only, FIFO or not."""
    return {
        **({"fifo": True} if fifo else {}),
        "encryption": aws_sqs.QueueEncryption.SQS_MANAGED if encryption_key is None else aws_sqs.QueueEncryption.KMS,
        **({"encryption_master_key": encryption_key} if encryption_key is not None else {}),
        "enforce_ssl": True,
        "removal_policy": removal_policy,
    }


def default_name(scope: Construct) -> str:
    """The stack name and ``scope``'s path inside the stack (``dev-Orders-Pipeline``): unique per account and
    region, for what must be (a pipeline's service name, a subscriber's alarm names)."""
    stack = Stack.of(scope)
    return "-".join([stack.stack_name, *scope.node.path.removeprefix(f"{stack.node.path}/").split("/")])


def function_defaults(
    props: SqsFunctionProps,
    *,
    description: str,
    code: aws_lambda.Code,
    handler: str,
    layers: Sequence[aws_lambda.ILayerVersion],
    environment: Mapping[str, str],
    log_group: aws_logs.ILogGroup,
    role: aws_iam.IRole,
    runtime: aws_lambda.Runtime = RUNTIME,
    architecture: aws_lambda.Architecture = ARCHITECTURE,
) -> dict[str, Any]:
    """The function's keyword arguments: its code, layers and environment, its memory and timeout from
    ``props``, its own log group and role."""
    return {
        "description": description,
        "runtime": runtime,
        "architecture": architecture,
        "handler": handler,
        "code": code,
        "layers": list(layers),
        "memory_size": props.memory_size,
        "timeout": props.function_timeout,
        "log_group": log_group,
        "role": role,
        "environment": dict(environment),
    }


def build_dead_letter_queue(scope: Construct, **kwargs: Any) -> aws_sqs.Queue:
    """The dead-letter queue, keeping messages the longest SQS allows unless ``kwargs`` says otherwise."""
    return aws_sqs.Queue(scope, DEAD_LETTER_QUEUE_ID, **{"retention_period": DEAD_LETTER_RETENTION, **kwargs})


def build_queue(
    scope: Construct, *, dead_letter_queue: aws_sqs.IQueue, max_receive_count: int, **kwargs: Any
) -> aws_sqs.Queue:
    """The function's source queue, redriving to ``dead_letter_queue`` after ``max_receive_count`` receives."""
    return aws_sqs.Queue(
        scope,
        QUEUE_ID,
        dead_letter_queue=aws_sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=max_receive_count),
        **kwargs,
    )


def build_log_group(
    scope: Construct,
    *,
    retention: aws_logs.RetentionDays,
    removal_policy: RemovalPolicy,
    encryption_key: aws_kms.IKey | None = None,
    construct_id: str = "FunctionLogGroup",
) -> aws_logs.LogGroup:
    """The function's own log group (its retention and removal policy the construct's)."""
    return aws_logs.LogGroup(
        scope, construct_id, retention=retention, removal_policy=removal_policy, encryption_key=encryption_key
    )


def build_role(
    scope: Construct, *, log_group: aws_logs.ILogGroup, description: str, construct_id: str = "FunctionRole"
) -> aws_iam.Role:
    """The function's least-privilege role: no managed policy, only its own log group to start with.

    Instead of AWSLambdaBasicExecutionRole, which may write every log group of the account. The construct
    adds each statement its code needs, each on its exact resources.
    """
    role = aws_iam.Role(
        scope, construct_id, assumed_by=aws_iam.ServicePrincipal("lambda.amazonaws.com"), description=description
    )
    role.add_to_principal_policy(
        aws_iam.PolicyStatement(sid="WriteOwnLogs", actions=list(LOG_ACTIONS), resources=[log_group.log_group_arn])
    )
    return role


def build_event_source(
    queue: aws_sqs.IQueue,
    props: SqsFunctionProps,
    *,
    grant_through: aws_sqs.IQueue | None = None,
    provisioned_pollers: aws_lambda.ProvisionedPollerConfig | None = None,
) -> aws_lambda_event_sources.SqsEventSource:
    """The queue as the function's event source, as ``props`` shape it: partial batch responses always on,
    and the ``EventCount`` metrics (polled, filtered out, invoked, failed, deleted; billed as custom
    metrics) unless ``event_source_metrics`` is off.

    ``grant_through``: another view of the queue the consume grant goes through (the pipeline's keyless
    view, :class:`~.event_source.QueueEventSource`); the mapping is named after ``queue`` either way.
    """
    options: dict[str, Any] = {
        "batch_size": props.batch_size,
        "max_batching_window": props.max_batching_window,
        "max_concurrency": props.max_concurrency,
        "provisioned_poller_config": provisioned_pollers,
        "report_batch_item_failures": True,
        "metrics_config": (
            aws_lambda.MetricsConfig(metrics=[aws_lambda.MetricType.EVENT_COUNT])
            if props.event_source_metrics
            else None
        ),
    }
    if grant_through is not None:
        return QueueEventSource(queue, grant_through=grant_through, **options)
    return aws_lambda_event_sources.SqsEventSource(queue, **options)


def add_standard_alarms(
    factory: monitoring.AlarmFactory,
    props: SqsFunctionProps,
    *,
    queue: aws_sqs.IQueue,
    dead_letter_queue: aws_sqs.IQueue,
    function: aws_lambda.IFunction,
    meanings: Mapping[str, str],
) -> None:
    """The alarms every SQS-fed function has (:data:`STANDARD_ALARMS`); ``meanings``: what each means, by key."""
    period = monitoring.PERIOD
    factory.add_alarm(
        "dead_letter_queue_not_empty",
        STANDARD_ALARMS["dead_letter_queue_not_empty"],
        dead_letter_queue.metric_approximate_number_of_messages_visible(period=period, statistic="Maximum"),
        description=meanings["dead_letter_queue_not_empty"],
    )
    factory.add_alarm(
        "oldest_message_too_old",
        STANDARD_ALARMS["oldest_message_too_old"],
        queue.metric_approximate_age_of_oldest_message(period=period, statistic="Maximum"),
        description=meanings["oldest_message_too_old"],
        threshold=props.oldest_message_age_threshold.to_seconds(),
        sustained=True,
        comparison=aws_cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    )
    factory.add_alarm(
        "function_errors",
        STANDARD_ALARMS["function_errors"],
        function.metric_errors(period=period, statistic="Sum"),
        description=meanings["function_errors"],
        sustained=True,
    )
