"""``IdempotentSubscriber``'s props in one value, their validation, and the values derived from them.

As for the pipeline (``idempotent_order_pipeline.props``): every check runs up front, every
problem is collected, messages name the prop, the value received and what is allowed, and
unresolved tokens are not checked. The service limits come from the pipeline's props module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, get_type_hints

from aws_cdk import Duration, RemovalPolicy, Token, aws_cloudwatch, aws_lambda, aws_logs, aws_sns

from idempotent_order_pipeline import monitoring, notifications
from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import config
from idempotent_order_pipeline.props import (
    ALLOWED_REMOVAL_POLICIES,
    DEAD_LETTER_RETENTION,
    MAX_BATCH_SIZE_FIFO,
    MAX_BATCH_SIZE_STANDARD,
    MAX_BATCH_SIZE_WITHOUT_WINDOW,
    MAX_BATCHING_WINDOW_SECONDS,
    MAX_FUNCTION_TIMEOUT_SECONDS,
    MAX_MAX_CONCURRENCY,
    MAX_MEMORY_MB,
    MAX_RECEIVE_COUNT,
    MAX_VISIBILITY_TIMEOUT_SECONDS,
    MIN_MAX_CONCURRENCY,
    MIN_MEMORY_MB,
    MIN_RETENTION_SECONDS,
    VISIBILITY_TIMEOUT_FACTOR,
    Findings,
    as_time,
    has_type,
    seconds,
    type_name,
)

if TYPE_CHECKING:
    from idempotent_order_pipeline.construct import IdempotentOrderPipeline

#: The runtimes the helper's layer is built and tested for (it is pure Python, any architecture).
LAYER_RUNTIMES = (
    aws_lambda.Runtime.PYTHON_3_11,
    aws_lambda.Runtime.PYTHON_3_12,
    aws_lambda.Runtime.PYTHON_3_13,
    aws_lambda.Runtime.PYTHON_3_14,
)


@dataclass(frozen=True, kw_only=True)
class SubscriberProps:
    """Every prop of :class:`IdempotentSubscriber` with its default: the one home of the defaults.

    What each prop does is documented once, in the class docstring of ``IdempotentSubscriber``;
    a test keeps the constructor's signature equal to these fields.
    """

    code: aws_lambda.Code
    handler: str
    pipeline: Any = None  # IdempotentOrderPipeline | None (checked by validate: imported lazily)
    topic: aws_sns.ITopic | None = None
    runtime: aws_lambda.Runtime = aws_lambda.Runtime.PYTHON_3_14
    architecture: aws_lambda.Architecture = aws_lambda.Architecture.ARM_64
    memory_size: int = 256
    function_timeout: Duration = Duration.seconds(30)
    environment: Mapping[str, str] | None = None
    filter_policy: Mapping[str, aws_sns.SubscriptionFilter] | None = None
    filter_policy_with_message_body: Mapping[str, aws_sns.FilterOrPolicy] | None = None
    raw_message_delivery: bool = True
    batch_size: int = 10
    max_batching_window: Duration | None = None
    max_concurrency: int | None = None
    max_receive_count: int = 5
    lease: Duration | None = None
    visibility_timeout: Duration | None = None
    retention_period: Duration = Duration.days(4)
    record_retention: Duration = Duration.days(30)
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    log_retention: aws_logs.RetentionDays = aws_logs.RetentionDays.ONE_MONTH
    alarm_actions: Sequence[aws_cloudwatch.IAlarmAction] = ()
    ok_actions: bool = True
    alarm_name_prefix: str | None = None
    runbook_url: str | None = None
    oldest_message_age_threshold: Duration = Duration.minutes(15)
    alarm_evaluation_periods: int = 3
    create_alarms: bool = True

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> SubscriberProps:
        """The props among ``arguments`` (a constructor's ``locals()``): every field, nothing else."""
        return cls(**{name: arguments[name] for name in PROP_NAMES})


#: The props' names, in the constructor's order.
PROP_NAMES = tuple(prop.name for prop in fields(SubscriberProps))
#: Every optional prop's default (``code`` and ``handler`` have none).
DEFAULTS = SubscriberProps(code=None, handler="")  # type: ignore[arg-type]

_ALLOWED_TYPE_TEXT = {
    "code": "an aws_lambda.Code, e.g. Code.from_asset('shipping')",
    "handler": "a string, e.g. 'shipping.handler'",
    "pipeline": "an IdempotentOrderPipeline, or None with topic=",
    "raw_message_delivery": "True or False",
    "ok_actions": "True or False",
    "create_alarms": "True or False",
    "memory_size": "an int (MB)",
    "function_timeout": "a Duration, e.g. Duration.seconds(30)",
    "lease": "a Duration, e.g. Duration.seconds(30), or None",
    "visibility_timeout": "a Duration, e.g. Duration.minutes(3), or None",
    "retention_period": "a Duration, e.g. Duration.days(4)",
    "record_retention": "a Duration, e.g. Duration.days(30)",
    "oldest_message_age_threshold": "a Duration, e.g. Duration.minutes(15)",
    "max_batching_window": "a Duration, e.g. Duration.seconds(5), or None",
    "removal_policy": "a RemovalPolicy, e.g. RemovalPolicy.RETAIN",
    "log_retention": "an aws_logs.RetentionDays, e.g. RetentionDays.ONE_MONTH",
}


def _is_pipeline(value: Any) -> bool:
    from idempotent_order_pipeline.construct import IdempotentOrderPipeline

    return isinstance(value, IdempotentOrderPipeline)


def well_typed(props: SubscriberProps, findings: Findings) -> SubscriberProps:
    """Report every prop of the wrong type; return the props with those at their defaults."""
    hints = get_type_hints(SubscriberProps)
    wrong: dict[str, Any] = {}
    for name in PROP_NAMES:
        value = getattr(props, name)
        fits = (value is None or _is_pipeline(value)) if name == "pipeline" else has_type(value, hints[name])
        if not fits:
            allowed = _ALLOWED_TYPE_TEXT.get(name) or type_name(hints[name])
            findings.errors.append(f"{name}={value!r} ({type(value).__name__}): allowed {allowed}")
            wrong[name] = getattr(DEFAULTS, name)
    return replace(props, **wrong) if wrong else props


def _number(value: float | None) -> float | None:
    return None if value is None or Token.is_unresolved(value) else value


def topic_of(props: SubscriberProps) -> aws_sns.ITopic | None:
    """The topic subscribed to: the pipeline's, or ``topic``."""
    pipeline: IdempotentOrderPipeline | None = props.pipeline
    return pipeline.topic if pipeline is not None else props.topic


def is_fifo(props: SubscriberProps) -> bool:
    """Whether the topic is FIFO (then so are the queues)."""
    topic = topic_of(props)
    return bool(topic is not None and topic.fifo is True)


def derived_lease(props: SubscriberProps) -> Duration:
    """The claim's lease: the prop, else the function timeout (a live invocation never loses its claim)."""
    return props.lease if props.lease is not None else props.function_timeout


def derived_visibility_timeout(props: SubscriberProps) -> Duration:
    """The prop, else 6x the function timeout plus the batching window (longer than the lease by default)."""
    if props.visibility_timeout is not None:
        return props.visibility_timeout
    timeout = seconds(props.function_timeout)
    window = seconds(props.max_batching_window) or 0
    if timeout is None:
        return Duration.seconds(0)  # reported by validate()
    return Duration.seconds(int(VISIBILITY_TIMEOUT_FACTOR * timeout + window))


def validate(props: SubscriberProps, findings: Findings | None = None) -> Findings:
    """Check every prop's value (of the right type: see :func:`well_typed`); collect every problem."""
    findings = Findings() if findings is None else findings
    _check_source(props, findings)
    _check_function(props, findings)
    _check_batching(props, findings)
    _check_times(props, findings)
    _check_alarms(props, findings)
    return findings


def _check_source(props: SubscriberProps, findings: Findings) -> None:
    errors = findings.errors
    if (props.pipeline is None) == (props.topic is None):
        errors.append(
            f"pipeline={props.pipeline!r}, topic={props.topic!r}: allowed exactly one of them (the pipeline whose "
            "notifications to act on, or its topic)"
        )
    if props.filter_policy is not None and props.filter_policy_with_message_body is not None:
        errors.append(
            "filter_policy and filter_policy_with_message_body: allowed one of them (an SNS subscription filters "
            "either the message attributes or the body)"
        )
    elif props.pipeline is not None and _is_pipeline(props.pipeline):
        _check_filter_against_pipeline(props, errors)


def _check_filter_against_pipeline(props: SubscriberProps, errors: list[str]) -> None:
    """A filter on a field the pipeline never sends matches nothing: the queue would stay empty, silently.

    Checked as the pipeline's ``add_subscription`` checks its own ``filter_policy`` (the names the
    policy matches on, against what its notifications carry). With ``topic=`` nothing is known of
    what the notifications carry, so nothing is checked.
    """
    for name, policy, scope in (
        ("filter_policy", props.filter_policy, notifications.ATTRIBUTES_SCOPE),
        ("filter_policy_with_message_body", props.filter_policy_with_message_body, notifications.BODY_SCOPE),
    ):
        if policy is not None:
            problems = notifications.filter_policy_problems(policy, scope, props.pipeline.notification_format)
            # The pipeline's wording names its own parameter, filter_policy; name this prop instead.
            errors.extend(problem.replace("filter_policy", name, 1) for problem in problems)


def _check_function(props: SubscriberProps, findings: Findings) -> None:
    errors = findings.errors
    if not Token.is_unresolved(props.handler) and not props.handler.strip():
        errors.append(f"handler={props.handler!r}: allowed a non-empty 'module.function', e.g. 'shipping.handler'")
    if props.runtime.name not in {runtime.name for runtime in LAYER_RUNTIMES}:
        errors.append(
            f"runtime={props.runtime.name}: allowed {', '.join(r.name for r in LAYER_RUNTIMES)} (the helper's layer "
            "is Python)"
        )
    memory = _number(props.memory_size)
    if memory is not None and not MIN_MEMORY_MB <= memory <= MAX_MEMORY_MB:
        errors.append(f"memory_size={props.memory_size!r}: allowed {MIN_MEMORY_MB}..{MAX_MEMORY_MB} MB")
    owned = sorted(set(props.environment or {}) & set(config.VARIABLES))
    if owned:
        errors.append(
            f"environment keys {owned}: set by the construct for the helper; allowed any other name "
            f"(reserved: {', '.join(config.VARIABLES)})"
        )


def _check_batching(props: SubscriberProps, findings: Findings) -> None:
    errors = findings.errors
    fifo = is_fifo(props)
    batch_size = _number(props.batch_size)
    window = seconds(props.max_batching_window)
    if batch_size is not None:
        limit = MAX_BATCH_SIZE_FIFO if fifo else MAX_BATCH_SIZE_STANDARD
        if not 1 <= batch_size <= limit:
            errors.append(f"batch_size={props.batch_size!r}: allowed 1..{limit} for {'a FIFO' if fifo else 'a'} queue")
        elif batch_size > MAX_BATCH_SIZE_WITHOUT_WINDOW and not window:
            errors.append(
                f"batch_size={props.batch_size!r}: above {MAX_BATCH_SIZE_WITHOUT_WINDOW} Lambda requires "
                "max_batching_window of at least 1 second"
            )
    if window is not None:
        if fifo and window > 0:
            errors.append(f"max_batching_window={as_time(window)}: not supported for a FIFO queue (allowed: None)")
        elif not 0 <= window <= MAX_BATCHING_WINDOW_SECONDS:
            errors.append(f"max_batching_window={as_time(window)}: allowed 0..{MAX_BATCHING_WINDOW_SECONDS} seconds")
    concurrency = _number(props.max_concurrency)
    if concurrency is not None and not MIN_MAX_CONCURRENCY <= concurrency <= MAX_MAX_CONCURRENCY:
        errors.append(
            f"max_concurrency={props.max_concurrency!r}: allowed None or {MIN_MAX_CONCURRENCY}..{MAX_MAX_CONCURRENCY}"
        )
    count = _number(props.max_receive_count)
    if count is not None and not 1 <= count <= MAX_RECEIVE_COUNT:
        errors.append(f"max_receive_count={props.max_receive_count!r}: allowed 1..{MAX_RECEIVE_COUNT}")


def _check_times(props: SubscriberProps, findings: Findings) -> None:
    """The protocol's order of times: function timeout <= lease < visibility timeout; records outlive copies."""
    errors = findings.errors
    timeout = seconds(props.function_timeout)
    if timeout is not None and not 1 <= timeout <= MAX_FUNCTION_TIMEOUT_SECONDS:
        errors.append(f"function_timeout={as_time(timeout)}: allowed 1..{MAX_FUNCTION_TIMEOUT_SECONDS} seconds")
        return
    lease = seconds(derived_lease(props))
    if props.lease is not None and lease is not None and timeout is not None and lease < timeout:
        errors.append(
            f"lease={as_time(lease)}: must be at least function_timeout ({as_time(timeout)}), so a live invocation "
            "never loses its claim to another copy"
        )
    if props.visibility_timeout is None and props.function_timeout.is_unresolved():
        errors.append("visibility_timeout=None: cannot be derived from a function_timeout that is a token; give it")
    visibility = seconds(derived_visibility_timeout(props))
    if visibility is not None and lease is not None:
        if not 0 < visibility <= MAX_VISIBILITY_TIMEOUT_SECONDS:
            errors.append(
                f"visibility_timeout={as_time(visibility)}: allowed 1..{MAX_VISIBILITY_TIMEOUT_SECONDS} seconds"
            )
        elif visibility <= lease:
            errors.append(
                f"visibility_timeout={as_time(visibility)}: must be longer than the lease ({as_time(lease)}), so a "
                "copy redelivered after a crash finds the crashed claim expired"
            )
    retention = seconds(props.retention_period)
    dlq_retention = DEAD_LETTER_RETENTION.to_seconds()
    if retention is not None and not MIN_RETENTION_SECONDS <= retention < dlq_retention:
        errors.append(
            f"retention_period={as_time(retention)}: allowed from 60 seconds to less than the dead-letter queue's "
            f"{as_time(dlq_retention)}"
        )
    record = seconds(props.record_retention)
    if record is not None and retention is not None and record <= retention + dlq_retention:
        errors.append(
            f"record_retention={as_time(record)}: must be longer than retention_period + dead-letter retention "
            f"({as_time(retention + dlq_retention)}), so a deduplication record outlives every copy of its notification"
        )
    if props.removal_policy not in ALLOWED_REMOVAL_POLICIES:
        errors.append(
            f"removal_policy={props.removal_policy}: allowed DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE (queues, "
            "table and log group cannot be snapshotted)"
        )


def _check_alarms(props: SubscriberProps, findings: Findings) -> None:
    errors = findings.errors
    threshold = seconds(props.oldest_message_age_threshold)
    retention = seconds(props.retention_period)
    if threshold is not None and threshold <= 0:
        errors.append(f"oldest_message_age_threshold={as_time(threshold)}: allowed more than 0 seconds")
    elif threshold is not None and retention is not None and threshold >= retention:
        errors.append(
            f"oldest_message_age_threshold={as_time(threshold)}: must be less than retention_period "
            f"({as_time(retention)}), or notifications expire before the alarm fires"
        )
    periods = _number(props.alarm_evaluation_periods)
    if periods is not None and periods < 1:
        errors.append(f"alarm_evaluation_periods={props.alarm_evaluation_periods!r}: allowed 1 or more")
    prefix = props.alarm_name_prefix
    limit = monitoring.MAX_ALARM_NAME_PREFIX_LENGTH
    if (
        prefix is not None
        and not Token.is_unresolved(prefix)
        and not (0 < len(prefix) <= limit and prefix.isascii() and prefix.isprintable())
    ):
        errors.append(f"alarm_name_prefix={prefix!r}: allowed 1..{limit} printable ASCII characters, or None")
    url = props.runbook_url
    if url is not None and not Token.is_unresolved(url) and not url.startswith(("https://", "http://")):
        errors.append(f"runbook_url={url!r}: allowed an http(s):// URL, or None")
