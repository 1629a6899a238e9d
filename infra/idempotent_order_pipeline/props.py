"""The construct's props in one value, their validation, and the values derived from them.

Every check runs up front and every problem is collected, so one synth reports them all. Messages
name the prop, the value received and what is allowed. Values that are unresolved tokens (a
``CfnParameter``, say) are not checked: CloudFormation or the service will.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Token,
    aws_cloudwatch,
    aws_dynamodb,
    aws_ec2,
    aws_kms,
    aws_lambda,
    aws_logs,
    aws_sns,
    aws_sqs,
)

from idempotent_order_pipeline import monitoring
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_MESSAGE_BYTES
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.notification import BODY_THIN
from idempotent_order_pipeline.keys import DEFAULT_IDENTITY_FIELDS, parse_identity_fields
from idempotent_order_pipeline.reconciliation import ALARM_RUNS_OF_MARGIN

#: Fixed: the longest SQS allows, so a parked message has the most time to be looked at.
DEAD_LETTER_RETENTION = Duration.days(14)
#: AWS's advice for an SQS event source: visibility timeout at least 6x the function timeout (plus
#: the batching window), so a batch retried by Lambda is not redelivered while still in flight.
VISIBILITY_TIMEOUT_FACTOR = 6
#: ``reconcile_after=None`` means this, or the redelivery window when that is longer.
RECONCILE_AFTER_AT_LEAST = Duration.minutes(15)
#: Below this, one transient blip (a throttle, a deploy) can push a good message to the DLQ.
RECOMMENDED_MIN_RECEIVE_COUNT = 5

# Service limits the checks enforce.
MAX_RECEIVE_COUNT = 1000
MAX_BATCH_SIZE_STANDARD = 10_000
MAX_BATCH_SIZE_FIFO = 10
MAX_BATCH_SIZE_WITHOUT_WINDOW = 10
MAX_BATCHING_WINDOW_SECONDS = 300
MIN_MAX_CONCURRENCY, MAX_MAX_CONCURRENCY = 2, 1000
MIN_MEMORY_MB, MAX_MEMORY_MB = 128, 10_240
MAX_FUNCTION_TIMEOUT_SECONDS = 900
MAX_VISIBILITY_TIMEOUT_SECONDS = 12 * 3600
MIN_RETENTION_SECONDS = 60
#: SQS's smallest MaximumMessageSize; the largest the pipeline allows is the consumer's (contract.parked).
MIN_MAX_MESSAGE_SIZE = 1024
MIN_RESERVED_CONCURRENCY = 1
#: Provisioned pollers for an SQS source (Lambda developer guide, "provisioned mode").
MIN_POLLERS, MAX_MINIMUM_POLLERS, MAX_MAXIMUM_POLLERS = 2, 200, 2000
#: Removal policies the pipeline's resources support (none of SQS, DynamoDB, SNS, CloudWatch Logs
#: supports a CloudFormation ``Snapshot`` deletion policy).
ALLOWED_REMOVAL_POLICIES = (RemovalPolicy.DESTROY, RemovalPolicy.RETAIN, RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)


@dataclass(frozen=True, kw_only=True)
class PipelineProps:
    """Every prop of :class:`IdempotentOrderPipeline` with its default: the one home of the defaults.

    The constructor's keyword-only parameters take their defaults from :data:`DEFAULTS`; a test
    checks that the signature, the class docstring and the docs' props table agree with these
    fields (names, types and defaults, Durations included). What each prop does is documented once,
    in the class docstring of :class:`IdempotentOrderPipeline`.
    """

    fifo: bool = False
    batch_size: int = 10
    max_batching_window: Duration | None = None
    max_concurrency: int | None = None
    max_receive_count: int = 5
    function_timeout: Duration = Duration.seconds(30)
    #: One full vCPU: the knee of `make bench`'s memory sweep.
    memory_size: int = 1769
    visibility_timeout: Duration | None = None
    retention_period: Duration = Duration.days(4)
    record_retention: Duration = Duration.days(30)
    max_message_size: int = MAX_MESSAGE_BYTES
    #: As given: a string is reported by :func:`validate` with the other problems.
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS
    service_name: str | None = None
    metrics_namespace: str = "IdempotentOrderPipeline"
    encryption_key: aws_kms.IKey | None = None
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    log_retention: aws_logs.RetentionDays = aws_logs.RetentionDays.ONE_MONTH
    powertools_layer: aws_lambda.ILayerVersion | None = None
    oldest_message_age_threshold: Duration = Duration.minutes(15)
    alarm_evaluation_periods: int = 3
    existing_queue: aws_sqs.IQueue | None = None
    existing_dead_letter_queue: aws_sqs.IQueue | None = None
    existing_topic: aws_sns.ITopic | None = None
    existing_processed_events_table: aws_dynamodb.ITable | None = None
    existing_order_records_table: aws_dynamodb.ITable | None = None
    queue_props: Mapping[str, Any] | aws_sqs.QueueProps | None = None
    dead_letter_queue_props: Mapping[str, Any] | aws_sqs.QueueProps | None = None
    table_props: Mapping[str, Any] | None = None
    topic_props: Mapping[str, Any] | aws_sns.TopicProps | None = None
    function_props: Mapping[str, Any] | aws_lambda.FunctionOptions | None = None
    vpc: aws_ec2.IVpc | None = None
    vpc_subnets: aws_ec2.SubnetSelection | None = None
    security_groups: Sequence[aws_ec2.ISecurityGroup] | None = None
    create_vpc_endpoints: bool = False
    reserved_concurrency: int | None = None
    fifo_high_throughput: bool = False
    provisioned_pollers: aws_lambda.ProvisionedPollerConfig | None = None
    tracing: bool = False
    snap_start: bool = False
    alarm_actions: Sequence[aws_cloudwatch.IAlarmAction] = ()
    ok_actions: bool = True
    alarm_name_prefix: str | None = None
    runbook_url: str | None = None
    alarm_overrides: Mapping[str, monitoring.AlarmOverride] | None = None
    dashboard: bool = True
    create_alarms: bool = True
    event_source_metrics: bool = True
    reconcile_every: Duration | None = Duration.minutes(5)
    reconcile_after: Duration | None = None
    #: A JSON Schema as a dict: checked at synth, compiled into the function's asset (order_schema.py).
    order_schema: Mapping[str, Any] | None = None
    notification_attributes: Sequence[str] = ()
    notification_body: str = BODY_THIN

    @property
    def identity_field_names(self) -> tuple[str, ...]:
        """The identity fields as a tuple (a string, reported by validate(), gives no fields)."""
        return () if isinstance(self.identity_fields, str) else tuple(self.identity_fields)

    @property
    def alarm_override_map(self) -> Mapping[str, monitoring.AlarmOverride]:
        """``alarm_overrides``, None as empty."""
        return self.alarm_overrides or {}

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> PipelineProps:
        """The props among ``arguments`` (a constructor's ``locals()``): every field, nothing else."""
        return cls(**{name: arguments[name] for name in PROP_NAMES})


#: Every prop's default, as one value: the constructor's parameters default to its fields.
DEFAULTS = PipelineProps()
#: The props' names, in the constructor's order.
PROP_NAMES = tuple(prop.name for prop in fields(PipelineProps))


def describe_default(value: object) -> str:
    """A default as the docstring states it: ``30 seconds``, ``RemovalPolicy.RETAIN``, ``('order_id',)``, ``None``."""
    if isinstance(value, Duration):
        return value.to_human_string()
    if isinstance(value, Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


@dataclass
class Findings:
    """What validation found: errors stop synthesis, warnings become annotations."""

    errors: list[str] = field(default_factory=list)
    #: (annotation id, message) pairs.
    warnings: list[tuple[str, str]] = field(default_factory=list)


# ---- types -----------------------------------------------------------------------------------------

#: Plain Python values: never a CDK object, so never what a prop typed as a CDK interface wants.
_PLAIN_VALUES = (str, bytes, int, float, bool, Mapping, list, tuple, set)


def type_name(hint: Any) -> str:
    if hint is type(None):
        return "None"
    if isinstance(hint, type):
        module = hint.__module__.removeprefix("aws_cdk.").removeprefix("aws_cdk")
        return hint.__name__ if module in ("", "builtins") else f"{module}.{hint.__name__}"
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return " or ".join(type_name(arg) for arg in get_args(hint))
    if origin is not None:
        args = get_args(hint)
        element = type_name(args[-1]) if args and args[-1] is not Any else "keyword arguments"
        kind = "mapping" if isinstance(origin, type) and issubclass(origin, Mapping) else "sequence"
        return f"a {kind} of {element}"
    return str(hint)


def has_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint`` (an unresolved number or string token always fits)."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return any(has_type(value, arg) for arg in get_args(hint))
    if origin is not None:  # Sequence[X] or Mapping[str, X]: the container; elements are checked by their own rules
        if issubclass(origin, Mapping):
            return isinstance(value, Mapping)
        return isinstance(value, Sequence) and not isinstance(value, str | bytes)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        token = isinstance(value, float) and Token.is_unresolved(value)
        return (isinstance(value, int) and not isinstance(value, bool)) or token
    if getattr(hint, "_is_protocol", False):  # a jsii interface (IKey, IQueue, ...): any CDK object
        return not isinstance(value, _PLAIN_VALUES) and value is not None
    return isinstance(value, hint)


def _allowed(name: str, hint: Any) -> str:
    if name in _ALLOWED_TYPE_TEXT:
        return _ALLOWED_TYPE_TEXT[name]
    return type_name(hint)


#: How a type error states what is allowed, where the type's name alone would not say it.
_ALLOWED_TYPE_TEXT = {
    "fifo": "True or False",
    "create_vpc_endpoints": "True or False",
    "fifo_high_throughput": "True or False",
    "tracing": "True or False",
    "snap_start": "True or False",
    "ok_actions": "True or False",
    "dashboard": "True or False",
    "create_alarms": "True or False",
    "event_source_metrics": "True or False",
    "memory_size": "an int (MB)",
    "identity_fields": "a sequence of field names, e.g. ('order_id',), not a string",
    "order_schema": "a JSON Schema as a dict, or None",
    "notification_attributes": "a sequence of field paths, e.g. ('country', 'customer.tier'), not a string",
    "notification_body": "'thin' or 'order'",
    "function_timeout": "a Duration, e.g. Duration.seconds(30)",
    "retention_period": "a Duration, e.g. Duration.days(4)",
    "record_retention": "a Duration, e.g. Duration.days(30)",
    "oldest_message_age_threshold": "a Duration, e.g. Duration.minutes(15)",
    "max_batching_window": "a Duration, e.g. Duration.seconds(5), or None",
    "visibility_timeout": "a Duration, e.g. Duration.minutes(3), or None",
    "reconcile_every": "a Duration, e.g. Duration.minutes(5), or None",
    "reconcile_after": "a Duration, e.g. Duration.minutes(30), or None",
    "removal_policy": "a RemovalPolicy, e.g. RemovalPolicy.RETAIN",
    "log_retention": "an aws_logs.RetentionDays, e.g. RetentionDays.ONE_MONTH",
}


def well_typed(props: PipelineProps, findings: Findings) -> PipelineProps:
    """Report every prop whose value has the wrong type; return the props with those at their defaults.

    The value checks then run on values of the right type only (``memory_size="1024"`` is one
    clear error, not a ``TypeError`` from a comparison), while the synth still collects every problem.
    """
    hints = get_type_hints(PipelineProps)
    wrong: dict[str, Any] = {}
    for name in PROP_NAMES:
        value = getattr(props, name)
        if not has_type(value, hints[name]):
            findings.errors.append(f"{name}={value!r} ({type(value).__name__}): allowed {_allowed(name, hints[name])}")
            wrong[name] = getattr(DEFAULTS, name)
    return replace(props, **wrong) if wrong else props


def _number(value: float | None) -> float | None:
    """The value, or None when it is unset or an unresolved token (not ours to check)."""
    if value is None or Token.is_unresolved(value):
        return None
    return value


def seconds(duration: Duration | None) -> float | None:
    """The duration in seconds, or None when it is unset or an unresolved token."""
    if duration is None or duration.is_unresolved():
        return None
    return duration.to_seconds(integral=False)


def as_time(value: float) -> str:
    """Seconds as people write them: ``20 days``, ``15 minutes``, ``901s``; never ``1.728e+06s``."""
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if value >= size and value % size == 0:
            count = int(value // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{value:.15g}s"


def derived_visibility_timeout(props: PipelineProps) -> Duration:
    """The queue's visibility timeout: the prop, else 6x the function timeout plus the batching window."""
    if props.visibility_timeout is not None:
        return props.visibility_timeout
    timeout = seconds(props.function_timeout)
    window = seconds(props.max_batching_window) or 0
    if timeout is None:  # reported by validate(); keep synthesis going to collect other errors
        return Duration.seconds(0)
    return Duration.seconds(int(VISIBILITY_TIMEOUT_FACTOR * timeout + window))


def redelivery_window_seconds(props: PipelineProps) -> float | None:
    """``visibility_timeout`` x ``max_receive_count``: how long after a write a normal redelivery can still come."""
    visibility = seconds(derived_visibility_timeout(props))
    count = _number(props.max_receive_count)
    if visibility is None or count is None or visibility <= 0:
        return None
    return visibility * count


def derived_reconcile_after(props: PipelineProps) -> Duration:
    """The prop, else 15 minutes, or the redelivery window when that is longer."""
    if props.reconcile_after is not None:
        return props.reconcile_after
    window = redelivery_window_seconds(props)
    default = RECONCILE_AFTER_AT_LEAST.to_seconds()
    return Duration.seconds(int(max(default, window or 0)))


def validate(props: PipelineProps, findings: Findings | None = None) -> Findings:
    """Check every prop's value (of the right type: see :func:`well_typed`); collect every problem."""
    findings = Findings() if findings is None else findings
    _check_batching(props, findings)
    _check_redrive(props, findings)
    _check_function(props, findings)
    _check_retention(props, findings)
    _check_message_size(props, findings)
    _check_naming(props, findings)
    _check_alarms(props, findings)
    _check_removal(props, findings)
    _check_network(props, findings)
    _check_scaling(props, findings)
    _check_reconciliation(props, findings)
    _check_order_contract(props, findings)
    return findings


def _check_order_contract(props: PipelineProps, findings: Findings) -> None:
    """``order_schema`` (valid, compilable) and the notification props (SNS's rules, and the schema's where it says)."""
    from idempotent_order_pipeline import notifications, order_schema  # jsonschema only when a schema is given

    schema_errors = order_schema.schema_problems(props.order_schema) if props.order_schema is not None else []
    findings.errors.extend(schema_errors)
    schema = props.order_schema if props.order_schema is not None and not schema_errors else None
    findings.errors.extend(
        notifications.attribute_problems(props.notification_attributes, props.notification_body, schema)
    )


def _check_batching(props: PipelineProps, findings: Findings) -> None:
    errors = findings.errors
    batch_size = _number(props.batch_size)
    window = seconds(props.max_batching_window)
    if batch_size is not None:
        limit = MAX_BATCH_SIZE_FIFO if props.fifo else MAX_BATCH_SIZE_STANDARD
        kind = "a FIFO" if props.fifo else "a standard"
        if not 1 <= batch_size <= limit:
            errors.append(f"batch_size={props.batch_size!r}: allowed 1..{limit} for {kind} queue")
        elif batch_size > MAX_BATCH_SIZE_WITHOUT_WINDOW and not window:
            errors.append(
                f"batch_size={props.batch_size!r}: above {MAX_BATCH_SIZE_WITHOUT_WINDOW} Lambda requires "
                f"max_batching_window of at least 1 second (got {props.max_batching_window!r})"
            )
    if window is not None:
        if props.fifo and window > 0:
            errors.append(f"max_batching_window={as_time(window)}: not supported for a FIFO queue (allowed: None)")
        elif not 0 <= window <= MAX_BATCHING_WINDOW_SECONDS:
            errors.append(f"max_batching_window={as_time(window)}: allowed 0..{MAX_BATCHING_WINDOW_SECONDS} seconds")
    max_concurrency = _number(props.max_concurrency)
    if max_concurrency is not None and not MIN_MAX_CONCURRENCY <= max_concurrency <= MAX_MAX_CONCURRENCY:
        errors.append(
            f"max_concurrency={props.max_concurrency!r}: allowed None or {MIN_MAX_CONCURRENCY}..{MAX_MAX_CONCURRENCY}"
        )


def _check_redrive(props: PipelineProps, findings: Findings) -> None:
    count = _number(props.max_receive_count)
    if count is None:
        return
    if not 1 <= count <= MAX_RECEIVE_COUNT:
        findings.errors.append(f"max_receive_count={props.max_receive_count!r}: allowed 1..{MAX_RECEIVE_COUNT}")
    elif count < RECOMMENDED_MIN_RECEIVE_COUNT:
        findings.warnings.append(
            (
                "max-receive-count-low",
                f"max_receive_count={props.max_receive_count!r} is below {RECOMMENDED_MIN_RECEIVE_COUNT}: a transient "
                "failure (throttle, deploy, timeout) can move a valid order to the dead-letter queue",
            )
        )


def _check_function(props: PipelineProps, findings: Findings) -> None:
    errors = findings.errors
    memory = _number(props.memory_size)
    if memory is not None and not MIN_MEMORY_MB <= memory <= MAX_MEMORY_MB:
        errors.append(f"memory_size={props.memory_size!r}: allowed {MIN_MEMORY_MB}..{MAX_MEMORY_MB} MB")
    timeout = seconds(props.function_timeout)
    if timeout is not None and not 1 <= timeout <= MAX_FUNCTION_TIMEOUT_SECONDS:
        errors.append(f"function_timeout={as_time(timeout)}: allowed 1..{MAX_FUNCTION_TIMEOUT_SECONDS} seconds")
        return
    if props.visibility_timeout is None:
        if props.function_timeout.is_unresolved():
            errors.append(
                "visibility_timeout=None: cannot be derived from a function_timeout that is a token; "
                "give visibility_timeout explicitly"
            )
        return
    visibility = seconds(props.visibility_timeout)
    if visibility is None or timeout is None:
        return
    recommended = VISIBILITY_TIMEOUT_FACTOR * timeout
    if not 0 <= visibility <= MAX_VISIBILITY_TIMEOUT_SECONDS:
        errors.append(f"visibility_timeout={as_time(visibility)}: allowed 0..{MAX_VISIBILITY_TIMEOUT_SECONDS} seconds")
    elif visibility < timeout:
        errors.append(
            f"visibility_timeout={as_time(visibility)}: must be at least function_timeout ({as_time(timeout)}), "
            "or messages are redelivered while still being processed"
        )
    elif visibility < recommended:
        findings.warnings.append(
            (
                "visibility-timeout-low",
                f"visibility_timeout={as_time(visibility)} is below {VISIBILITY_TIMEOUT_FACTOR}x function_timeout "
                f"({as_time(recommended)}): a batch Lambda retries after throttling can be redelivered while in flight",
            )
        )


def _check_retention(props: PipelineProps, findings: Findings) -> None:
    errors = findings.errors
    retention = seconds(props.retention_period)
    dlq_retention = DEAD_LETTER_RETENTION.to_seconds()
    if retention is not None and not MIN_RETENTION_SECONDS <= retention < dlq_retention:
        errors.append(
            f"retention_period={as_time(retention)}: allowed from 60 seconds to less than the dead-letter queue's "
            f"{as_time(dlq_retention)} (a message keeps its first enqueue time in the DLQ, so the DLQ must keep it "
            "longer)"
        )
    record = seconds(props.record_retention)
    if record is not None and retention is not None and record <= retention + dlq_retention:
        errors.append(
            f"record_retention={as_time(record)}: must be longer than retention_period + dead-letter retention "
            f"({as_time(retention + dlq_retention)}), so an idempotency record outlives every copy of its message "
            "(it expires record_retention after the sent mark; a pending record never expires)"
        )


def _check_message_size(props: PipelineProps, findings: Findings) -> None:
    size = _number(props.max_message_size)
    if size is not None and (size != int(size) or not MIN_MAX_MESSAGE_SIZE <= size <= MAX_MESSAGE_BYTES):
        findings.errors.append(
            f"max_message_size={size:g}: allowed a whole number of bytes from {MIN_MAX_MESSAGE_SIZE} to "
            f"{MAX_MESSAGE_BYTES} (256 KiB, the largest message the consumer is built for; SQS would accept up to "
            "1 MiB)"
        )


def _check_naming(props: PipelineProps, findings: Findings) -> None:
    errors = findings.errors
    _check_identity_fields(props.identity_fields, errors)
    if props.service_name is not None and not Token.is_unresolved(props.service_name) and not props.service_name:
        errors.append("service_name='': allowed a non-empty name, or None for the default")
    namespace = props.metrics_namespace
    if not Token.is_unresolved(namespace) and (not namespace or namespace.startswith("AWS/")):
        errors.append(
            f"metrics_namespace={namespace!r}: allowed a non-empty namespace not starting with 'AWS/' (reserved)"
        )


def _check_identity_fields(identity_fields: Sequence[str], errors: list[str]) -> None:
    try:
        fields = parse_identity_fields(",".join(identity_fields))
    except ValueError:
        fields = ()
    if (
        not identity_fields
        or fields != tuple(identity_fields)
        or len(set(fields)) != len(fields)
        or any("," in name for name in identity_fields)
    ):
        errors.append(
            f"identity_fields={tuple(identity_fields)!r}: allowed one or more distinct, non-empty field "
            "names without commas or surrounding spaces, e.g. ('order_id',)"
        )


def _check_alarms(props: PipelineProps, findings: Findings) -> None:
    errors = findings.errors
    threshold = seconds(props.oldest_message_age_threshold)
    retention = seconds(props.retention_period)
    if threshold is not None and threshold <= 0:
        errors.append(f"oldest_message_age_threshold={as_time(threshold)}: allowed more than 0 seconds")
    elif threshold is not None and retention is not None and threshold >= retention:
        errors.append(
            f"oldest_message_age_threshold={as_time(threshold)}: must be less than retention_period "
            f"({as_time(retention)}), "
            "or messages expire before the alarm fires"
        )
    periods = _number(props.alarm_evaluation_periods)
    if periods is not None and periods < 1:
        errors.append(f"alarm_evaluation_periods={props.alarm_evaluation_periods!r}: allowed 1 or more")
    _check_alarm_naming(props, findings)
    for key, override in props.alarm_override_map.items():
        _check_alarm_override(key, override, errors)


def _check_alarm_naming(props: PipelineProps, findings: Findings) -> None:
    errors = findings.errors
    prefix = props.alarm_name_prefix
    limit = monitoring.MAX_ALARM_NAME_PREFIX_LENGTH
    if (
        prefix is not None
        and not Token.is_unresolved(prefix)
        and not (0 < len(prefix) <= limit and prefix.isascii() and prefix.isprintable())
    ):
        errors.append(
            f"alarm_name_prefix={prefix!r}: allowed 1..{limit} printable ASCII characters, or None for the service name"
        )
    url = props.runbook_url
    if (
        url is not None
        and not Token.is_unresolved(url)
        and (not url.startswith(("https://", "http://")) or len(url) > monitoring.MAX_RUNBOOK_URL_LENGTH)
    ):
        errors.append(
            f"runbook_url={url!r}: allowed an http(s):// URL of at most {monitoring.MAX_RUNBOOK_URL_LENGTH} "
            "characters, or None"
        )
    if props.alarm_actions and url is None:
        findings.warnings.append(
            (
                "no-runbook-url",
                "alarms notify on-call but runbook_url=None: their descriptions name this library's runbook "
                "(docs/operations.md); "
                "pass runbook_url= to link your team's runbook",
            )
        )


def _check_alarm_override(key: str, override: object, errors: list[str]) -> None:
    if key not in monitoring.ALARM_KEYS:
        errors.append(f"alarm_overrides[{key!r}]: unknown alarm; allowed keys {list(monitoring.ALARM_KEYS)}")
        return
    if isinstance(override, bool):
        return
    if not isinstance(override, monitoring.AlarmThreshold):
        errors.append(f"alarm_overrides[{key!r}]={override!r}: allowed False, True or an AlarmThreshold(...)")
        return
    threshold = _number(override.threshold)
    periods = _number(override.evaluation_periods)
    datapoints = _number(override.datapoints_to_alarm)
    if key == "oldest_message_too_old" and override.threshold is not None:
        errors.append(
            f"alarm_overrides[{key!r}].threshold={override.threshold!r}: set oldest_message_age_threshold instead "
            "(its threshold has one place)"
        )
    elif threshold is not None and threshold <= 0:
        errors.append(f"alarm_overrides[{key!r}].threshold={override.threshold!r}: allowed more than 0")
    if periods is not None and periods < 1:
        errors.append(f"alarm_overrides[{key!r}].evaluation_periods={override.evaluation_periods!r}: allowed 1 or more")
    if override.datapoints_to_alarm is not None and override.evaluation_periods is None:
        errors.append(
            f"alarm_overrides[{key!r}].datapoints_to_alarm={override.datapoints_to_alarm!r}: needs "
            "evaluation_periods in the same AlarmThreshold"
        )
    elif datapoints is not None and periods is not None and not 1 <= datapoints <= periods:
        errors.append(
            f"alarm_overrides[{key!r}].datapoints_to_alarm={override.datapoints_to_alarm!r}: allowed "
            f"1..evaluation_periods ({override.evaluation_periods!r})"
        )


def _check_removal(props: PipelineProps, findings: Findings) -> None:
    if props.removal_policy not in ALLOWED_REMOVAL_POLICIES:
        findings.errors.append(
            f"removal_policy={props.removal_policy}: none of the pipeline's resources (SQS queues, DynamoDB tables, "
            "SNS topic, log group) can be snapshotted by CloudFormation; allowed DESTROY, RETAIN or "
            "RETAIN_ON_UPDATE_OR_DELETE"
        )


def _check_network(props: PipelineProps, findings: Findings) -> None:
    if props.vpc is not None:
        return
    for name, value in (
        ("vpc_subnets", props.vpc_subnets),
        ("security_groups", props.security_groups),
        ("create_vpc_endpoints", props.create_vpc_endpoints or None),
    ):
        if value is not None:
            findings.errors.append(f"{name}={value!r}: allowed only with vpc= (the function is not in a VPC)")


def _check_scaling(props: PipelineProps, findings: Findings) -> None:
    errors = findings.errors
    reserved = _number(props.reserved_concurrency)
    if reserved is not None and reserved < MIN_RESERVED_CONCURRENCY:
        errors.append(
            f"reserved_concurrency={props.reserved_concurrency!r}: allowed None or at least "
            f"{MIN_RESERVED_CONCURRENCY} (0 would stop the consumer)"
        )
    if props.fifo_high_throughput and not props.fifo:
        errors.append("fifo_high_throughput=True: allowed only with fifo=True (a standard queue has no FIFO limit)")
    pollers = props.provisioned_pollers
    if pollers is None:
        return
    if props.max_concurrency is not None:
        errors.append(
            f"provisioned_pollers with max_concurrency={props.max_concurrency!r}: give one or the other (Lambda "
            "refuses both on one event source mapping)"
        )
    minimum, maximum = _number(pollers.minimum_pollers), _number(pollers.maximum_pollers)
    if minimum is not None and not MIN_POLLERS <= minimum <= MAX_MINIMUM_POLLERS:
        errors.append(
            f"provisioned_pollers.minimum_pollers={pollers.minimum_pollers!r}: "
            f"allowed {MIN_POLLERS}..{MAX_MINIMUM_POLLERS}"
        )
    if maximum is not None and not MIN_POLLERS <= maximum <= MAX_MAXIMUM_POLLERS:
        errors.append(
            f"provisioned_pollers.maximum_pollers={pollers.maximum_pollers!r}: "
            f"allowed {MIN_POLLERS}..{MAX_MAXIMUM_POLLERS}"
        )
    if minimum is not None and maximum is not None and minimum > maximum:
        errors.append(
            f"provisioned_pollers: minimum_pollers={pollers.minimum_pollers!r} above "
            f"maximum_pollers={pollers.maximum_pollers!r}"
        )


def _check_reconciler_alarm_windows(props: PipelineProps, every: float, findings: Findings) -> None:
    """``reconcile_every`` sets the periods of the reconciler's alarms (``pending_too_old`` looks at two
    runs per period, ``reconciler_errors`` at one): CloudWatch must accept each alarm's evaluation range
    (period x evaluation periods: at most 7 days, 1 day for a period under an hour), else the deploy fails."""
    for key, runs_per_period in (("pending_too_old", ALARM_RUNS_OF_MARGIN), ("reconciler_errors", 1)):
        override = props.alarm_override_map.get(key, True)
        if override is False:
            continue
        periods = (override.evaluation_periods if isinstance(override, monitoring.AlarmThreshold) else None) or 1
        if not isinstance(periods, int) or periods < 1:
            continue  # reported by the override's own check
        if monitoring.evaluation_range_fits(every * runs_per_period, periods):
            continue
        allowed = " or ".join(
            f"{as_time(low)} to {as_time(high)}"
            for low, high in monitoring.allowed_period_ranges(periods, per_period=runs_per_period)
        )
        findings.errors.append(
            f"reconcile_every={as_time(every)}: allowed {allowed or 'nothing'} with alarm {key} "
            f"({runs_per_period} run(s) per period x {periods} evaluation period(s); CloudWatch evaluates an "
            "alarm over at most 7 days, 1 day for a period under an hour), or turn the alarm off in alarm_overrides"
        )


def _check_reconciliation(props: PipelineProps, findings: Findings) -> None:
    """The reconciler's schedule, and a threshold that never races a normal redelivery.

    After the transaction that left a record ``pending``, SQS can still deliver its message at most
    ``max_receive_count`` - 1 more times, each at the earliest one visibility timeout after the
    previous receive, and each delivery ends within ``function_timeout`` (<= the visibility timeout).
    So, without a backlog, every normal redelivery has ended by ``visibility_timeout`` x
    ``max_receive_count`` after the record was written: a ``reconcile_after`` at least that long
    only finds records no delivery will publish (racing anyway, behind a backlog, costs a duplicate
    notification, never a lost one).
    """
    errors = findings.errors
    every = seconds(props.reconcile_every)
    if every is not None and (every < 60 or every % 60):
        errors.append(
            f"reconcile_every={as_time(every)}: allowed None (no reconciler) or a whole number of minutes, at least 1 "
            "(an EventBridge rate)"
        )
    elif every is not None:
        _check_reconciler_alarm_windows(props, every, findings)
    if props.reconcile_every is None or props.reconcile_after is None:
        return
    after = seconds(props.reconcile_after)
    redelivery_window = redelivery_window_seconds(props)
    visibility = seconds(derived_visibility_timeout(props))
    count = _number(props.max_receive_count)
    if after is None or redelivery_window is None or visibility is None or count is None:
        return
    if after < redelivery_window:
        errors.append(
            f"reconcile_after={as_time(after)}: must be at least visibility_timeout x max_receive_count "
            f"({as_time(visibility)} x {count:g} = {as_time(redelivery_window)}), the longest a normal redelivery "
            "can still "
            "publish the record, so the reconciler never races one"
        )
