"""The construct's props in one value, their validation, and the values derived from them.

Every check runs up front and every problem is collected, so one synth reports them all. Messages
name the prop, the value received and what is allowed. Values that are unresolved tokens (a
``CfnParameter``, say) are not checked: CloudFormation or the service will.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from aws_cdk import (
    Duration,
    Token,
    aws_dynamodb,
    aws_ec2,
    aws_kms,
    aws_lambda,
    aws_sns,
    aws_sqs,
)

from idempotent_order_pipeline import monitoring
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_MESSAGE_BYTES
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import DEFAULT_RECORD_RETENTION_DAYS
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.notification import BODY_THIN
from idempotent_order_pipeline.core import rules
from idempotent_order_pipeline.core.function_props import SqsFunctionKwargs, SqsFunctionProps
from idempotent_order_pipeline.core.props import Findings, prop
from idempotent_order_pipeline.core.props import well_typed as _well_typed
from idempotent_order_pipeline.core.rules import as_time, derived_visibility_timeout, number, seconds
from idempotent_order_pipeline.keys import DEFAULT_IDENTITY_FIELDS, parse_identity_fields
from idempotent_order_pipeline.reconciliation import ALARM_RUNS_OF_MARGIN

#: ``reconcile_after=None`` means this, or the redelivery window when that is longer.
RECONCILE_AFTER_AT_LEAST = Duration.minutes(15)
#: SQS's smallest MaximumMessageSize; the largest the pipeline allows is the consumer's (contract.parked).
MIN_MAX_MESSAGE_SIZE = 1024
MIN_RESERVED_CONCURRENCY = 1
#: Provisioned pollers for an SQS source (Lambda developer guide, "provisioned mode").
MIN_POLLERS, MAX_MINIMUM_POLLERS, MAX_MAXIMUM_POLLERS = 2, 200, 2000


@dataclass(frozen=True, kw_only=True)
class PipelineProps(SqsFunctionProps):
    """Every prop of :class:`IdempotentOrderPipeline`, declared once: its default, type, doc and allowed text.

    The class docstring's ``:param`` lines and docs/construct.md's props table are made from these
    fields (:mod:`idempotent_order_pipeline.core.props`); the constructor's keyword-only parameters
    take their defaults from :data:`DEFAULTS`, and a test proves its signature equal to the fields.
    """

    fifo: bool = prop(
        False,
        (
            "a FIFO queue, FIFO dead-letter queue and FIFO topic (content-based deduplication off: the "
            "handler sends group and deduplication ids itself)."
        ),
        default_means="standard",
        allowed="True or False",
    )
    memory_size: int = prop(
        1769,
        "the Lambda memory in MB.",
        default_means="one full vCPU; chosen by `make bench`'s memory sweep",
        allowed="an int (MB)",
    )
    record_retention: Duration = prop(
        Duration.days(DEFAULT_RECORD_RETENTION_DAYS),
        (
            "how long an idempotency record lives after its notification was sent "
            "(``RECORD_TTL_SECONDS``: the ``sent`` mark sets ``ttl``; a ``pending`` record never "
            "expires); must exceed ``retention_period`` + 14 days, so a record outlives every copy of its "
            "message."
        ),
        allowed="a Duration, e.g. Duration.days(30)",
    )
    max_message_size: int = prop(
        MAX_MESSAGE_BYTES,
        (
            "the queue's maximum message size in bytes (body and attributes, as SQS counts them), from "
            "1024 to 262144. The dead-letter queue's is fixed at 1 MiB, so every message the queue "
            "accepts can be parked whole with its reason."
        ),
        default_means="256 KiB, the largest message the consumer is built and tested for",
    )
    identity_fields: Sequence[str] = prop(
        DEFAULT_IDENTITY_FIELDS,
        (
            "the body fields whose values make the idempotency key when a message has neither "
            "``event_id`` nor an ``idempotency_key`` attribute (``IDENTITY_FIELDS``)."
        ),
        default_means="``order_consumer.contract.keys.DEFAULT_IDENTITY_FIELDS``",
        allowed="a sequence of field names, e.g. ('order_id',), not a string",
    )
    service_name: str | None = prop(
        None,
        (
            "``POWERTOOLS_SERVICE_NAME``, the logs' service and the outcome metrics' ``service`` "
            "dimension, which the alarms filter on; two pipelines of one app in the same account and "
            "region may not share it (synth error)."
        ),
        default_means=(
            "the stack name and this construct's path in the stack, e.g. ``dev-OrderPipeline-Pipeline``: "
            "unique per deployment, so two stages in one account never trip each other's alarms"
        ),
    )
    metrics_namespace: str = prop(
        "IdempotentOrderPipeline",
        "``POWERTOOLS_METRICS_NAMESPACE``.",
    )
    encryption_key: aws_kms.IKey | None = prop(
        None,
        (
            "a customer managed KMS key for the queues, topic, tables and the function's log group (the "
            "key policy gets a statement letting this region's CloudWatch Logs use it for this account's "
            "log groups; an imported key's owner must add it)."
        ),
        default_means=(
            "SQS-managed SSE on the queues, the AWS managed ``alias/aws/sns`` key on the topic, AWS owned "
            "keys on the tables"
        ),
    )
    powertools_layer: aws_lambda.ILayerVersion | None = prop(
        None,
        "the layer providing Powertools for AWS Lambda (Python).",
        default_means=(
            "the official public layer of the pinned version, arm64, Python 3.14, its ARN read at deploy "
            "from Powertools' public SSM parameter through the stack parameter ``PowertoolsLayerArn``; an "
            "error in a region of aws-cn or aws-us-gov, which have no such parameter; see "
            "``idempotent_order_pipeline.powertools``"
        ),
    )
    existing_queue: aws_sqs.IQueue | None = prop(
        None,
        (
            "use this queue (``IQueue``) instead of creating one. Requires "
            "``existing_dead_letter_queue``; it must redrive there, have a visibility timeout of at least "
            "``function_timeout`` (6x recommended), match ``fifo`` and accept no message larger than "
            "``max_message_size`` (see ``acknowledge_existing_queue_message_size``)."
        ),
        default_means="created",
    )
    acknowledge_existing_queue_message_size: bool = prop(
        False,
        (
            "accept an ``existing_queue`` whose ``MaximumMessageSize`` is unset (SQS's default, 1 MiB) or above "
            "``max_message_size``: a synth error otherwise. The consumer is built and tested for "
            "``max_message_size``; a larger order is recorded if DynamoDB takes its row (400 KB per item, "
            "else it is parked as ``ITEM_TOO_LARGE``), and one whose parked copy exceeds the DLQ's 1 MiB "
            "cannot be parked with its reason, so it is retried until ``max_receive_count`` moves it to the "
            "DLQ without one. For an imported queue, drops the size from the ``existing-queue-unverified`` "
            "warning's guarantees."
        ),
        default_means="an error for such a queue; the imported queue's warning asks the caller to guarantee it",
        allowed="True or False",
    )
    existing_dead_letter_queue: aws_sqs.IQueue | None = prop(
        None,
        (
            "use this queue as the dead-letter queue (the handler also parks permanent failures there); "
            "it must match ``fifo`` and keep messages longer than the queue."
        ),
        default_means="created, 14 days retention",
    )
    existing_topic: aws_sns.ITopic | None = prop(
        None,
        "announce orders on this topic (``ITopic``); it must match ``fifo``.",
        default_means="created",
    )
    existing_processed_events_table: aws_dynamodb.ITable | None = prop(
        None,
        (
            "use this table (``ITable``) for idempotency records: partition key ``event_id`` (S), no sort "
            "key, TTL on ``ttl``."
        ),
        default_means="created",
    )
    existing_order_records_table: aws_dynamodb.ITable | None = prop(
        None,
        "use this table for orders: partition key ``order_id`` (S), no sort key.",
        default_means="created",
    )
    queue_props: Mapping[str, Any] | aws_sqs.QueueProps | None = prop(
        None,
        (
            "``aws_sqs.QueueProps`` keywords (a mapping or the struct) merged over the queue's defaults, "
            'e.g. ``{"receive_message_wait_time": Duration.seconds(20)}``; keys another prop owns '
            "(``visibility_timeout``, ``fifo``, ...) and turning encryption or TLS off are errors."
        ),
        default_means="the defaults above",
    )
    dead_letter_queue_props: Mapping[str, Any] | aws_sqs.QueueProps | None = prop(
        None,
        "the same for the dead-letter queue (its ``retention_period`` must stay longer than the queue's).",
    )
    table_props: Mapping[str, Any] | None = prop(
        None,
        (
            "``aws_dynamodb.TableProps`` keywords merged over the defaults of the tables it creates "
            "(billing mode, table class, contributor insights, ...); key schema, TTL, encryption and "
            "removal keys are errors; turning point-in-time recovery off adds a warning."
        ),
    )
    topic_props: Mapping[str, Any] | aws_sns.TopicProps | None = prop(
        None,
        (
            "``aws_sns.TopicProps`` keywords merged over the topic's defaults; ``fifo``, ``master_key`` "
            "and ``fifo_throughput_scope`` are errors, so is ``enforce_ssl=False``."
        ),
    )
    function_props: Mapping[str, Any] | aws_lambda.FunctionOptions | None = prop(
        None,
        (
            "``aws_lambda.FunctionOptions`` keywords merged over the function's defaults (description, "
            "ephemeral storage, log format, ...); the handler's contract (code, runtime, environment, "
            "role, ...) and keys another prop owns are errors."
        ),
    )
    vpc: aws_ec2.IVpc | None = prop(
        None,
        (
            "run the function in this VPC. Its calls must still reach DynamoDB, SNS and SQS: through "
            "``create_vpc_endpoints`` or the caller's NAT or endpoints."
        ),
        default_means="no VPC",
    )
    vpc_subnets: aws_ec2.SubnetSelection | None = prop(
        None,
        "the subnets of ``vpc`` for the function (and the endpoints).",
        default_means="the VPC's private subnets, as aws_lambda.Function chooses",
    )
    security_groups: Sequence[aws_ec2.ISecurityGroup] | None = prop(
        None,
        "the function's security groups.",
        default_means="one created, all outbound allowed",
    )
    create_vpc_endpoints: bool = prop(
        False,
        (
            "create a DynamoDB gateway endpoint and SNS and SQS interface endpoints (HTTPS from the "
            "functions only) in ``vpc``; the functions reach the interface endpoints by their own DNS names "
            "(``AWS_ENDPOINT_URL_SNS``, ``AWS_ENDPOINT_URL_SQS``), so the VPC's other workloads keep "
            "resolving SNS and SQS as before (``vpc_endpoints_private_dns``)."
        ),
        default_means="reaching the services is the caller's job",
        allowed="True or False",
    )
    vpc_endpoints_private_dns: bool = prop(
        False,
        (
            "private DNS on the SNS and SQS interface endpoints: the services' regional names resolve to "
            "them for the whole VPC, so every workload there meets their policies (the pipeline's topic and "
            "DLQ only) and security groups (the functions' only), and the deploy fails where the VPC has "
            "such an endpoint already. For a VPC of the pipeline's own; requires ``create_vpc_endpoints``."
        ),
        default_means="off: only the functions use the endpoints, through the variables above",
        allowed="True or False",
    )
    reserved_concurrency: int | None = prop(
        None,
        "reserved concurrent executions of the function, at least 1.",
        default_means="the account's unreserved pool",
    )
    fifo_high_throughput: bool = prop(
        False,
        (
            "FIFO high throughput: the queues deduplicate and throttle per message group, the topic's "
            "throughput scope is the message group. Requires ``fifo``."
        ),
        default_means="per-queue and per-topic limits",
        allowed="True or False",
    )
    provisioned_pollers: aws_lambda.ProvisionedPollerConfig | None = prop(
        None,
        (
            "provisioned mode for the event source mapping (``aws_lambda.ProvisionedPollerConfig``, "
            "2..200 minimum and 2..2000 maximum pollers); excludes ``max_concurrency``."
        ),
        default_means="on-demand polling",
    )
    tracing: bool = prop(
        False,
        (
            "X-Ray active tracing on the function (and its X-Ray permissions). The handler does not "
            "instrument its AWS calls, so traces show the invocation only."
        ),
        default_means="no tracing, no X-Ray permissions",
        allowed="True or False",
    )
    snap_start: bool = prop(
        False,
        (
            "Lambda SnapStart: each deployment that changes the function publishes a version whose "
            "initialized environment Lambda snapshots; the alias ``function_alias`` (``live``) points at "
            "it and the queue's event source mapping invokes the alias, so cold starts resume from the "
            "snapshot. After a restore the handler makes new AWS clients and a new random seed "
            "(``order_consumer.snapstart``). Python SnapStart bills snapshot caching and each restore. In a "
            "region without SnapStart (``core.rules.SNAP_START_UNSUPPORTED_REGIONS``: Asia Pacific (New "
            "Zealand) and (Taipei)) a synth error when the stack's region is known; a region-agnostic stack "
            "is left to Lambda at deploy."
        ),
        default_means="no version, no alias; the mapping invokes ``$LATEST``",
        allowed="True or False",
    )
    alarm_overrides: Mapping[str, monitoring.AlarmOverride] | None = prop(
        None,
        (
            "per alarm key (``monitoring.ALARM_KEYS``): False to not create it, or an "
            "``AlarmThreshold(threshold=, evaluation_periods=, datapoints_to_alarm=)``."
        ),
        default_means="every alarm, with its own threshold",
    )
    dashboard: bool = prop(
        True,
        "create the CloudWatch dashboard (3 USD a month beyond an account's 3 free ones).",
        allowed="True or False",
    )
    reconcile_every: Duration | None = prop(
        Duration.minutes(5),
        (
            "how often the reconciler (a second function, ``reconciliation.function``) notifies records "
            "left ``pending`` with no copy of their message to redeliver them (the DLQ was dropped or "
            "expired); a whole number of minutes, or None for no reconciler. At most what CloudWatch lets "
            "the reconciler's alarms evaluate (84 hours with the default alarms: 7 days for "
            "``pending_too_old``'s two runs per period)."
        ),
        allowed="a Duration, e.g. Duration.minutes(5), or None",
    )
    reconcile_after: Duration | None = prop(
        None,
        (
            "how long a record must have been ``pending`` before the reconciler notifies it; at least "
            "``visibility_timeout`` x ``max_receive_count``, the longest a normal redelivery of the "
            "message can still come, so the reconciler never races one by design. The ``pending_too_old`` "
            "alarm fires above this plus two runs."
        ),
        default_means="15 minutes, or ``visibility_timeout`` x ``max_receive_count`` when that is longer",
        allowed="a Duration, e.g. Duration.minutes(30), or None",
    )
    order_schema: Mapping[str, Any] | None = prop(
        None,
        (
            "a JSON Schema (a dict; draft 2020-12, draft-07, -06 or -04) every order must match: checked "
            "at synth (an invalid schema is a ``ValueError`` naming ``order_schema`` and the schema "
            "path), compiled into the function's code (no environment size limit), and enforced by the "
            "consumer before any write: an order that breaks it is parked in the DLQ at once with "
            "``error_code=SCHEMA_VIOLATION`` (the ``SchemaViolations`` metric and the "
            "``schema_violations`` alarm). The producer client and ``order-pipeline send`` run the same "
            "check before sending."
        ),
        default_means="no schema: any order the message contract accepts",
        allowed="a JSON Schema as a dict, or None",
    )
    notification_attributes: Sequence[str] = prop(
        (),
        (
            "order field paths (``country``, dotted into objects: ``customer.tier``) copied into every "
            "notification as SNS message attributes named by the path, for subscription filter policies "
            "(:meth:`add_subscription`): String, Number or String.Array (a JSON array); an absent field "
            "or one SNS cannot carry is left out. At most 8 (SNS delivers 10 to SQS, ``event_id`` and "
            "``order_id`` among them)."
        ),
        default_means="the two ids only",
        allowed="a sequence of field paths, e.g. ('country', 'customer.tier'), not a string",
    )
    notification_body: str = prop(
        BODY_THIN,
        (
            '``"thin"``: ``{event_id, order_id, payload_sha256}``; ``"order"``: the whole stored order '
            "(with those three fields) when the notification fits SNS's 256 KiB, else the thin body."
        ),
        allowed="'thin' or 'order'",
    )

    @property
    def identity_field_names(self) -> tuple[str, ...]:
        """The identity fields as a tuple (a string, reported by validate(), gives no fields)."""
        return () if isinstance(self.identity_fields, str) else tuple(self.identity_fields)

    @property
    def alarm_override_map(self) -> Mapping[str, monitoring.AlarmOverride]:
        """``alarm_overrides``, None as empty."""
        return self.alarm_overrides or {}


class PipelineKwargs(SqsFunctionKwargs, total=False):
    """The constructor's keyword arguments: one per field of :class:`PipelineProps` (a test keeps the two equal)."""

    fifo: bool
    max_message_size: int
    identity_fields: Sequence[str]
    service_name: str | None
    metrics_namespace: str
    encryption_key: aws_kms.IKey | None
    powertools_layer: aws_lambda.ILayerVersion | None
    existing_queue: aws_sqs.IQueue | None
    acknowledge_existing_queue_message_size: bool
    existing_dead_letter_queue: aws_sqs.IQueue | None
    existing_topic: aws_sns.ITopic | None
    existing_processed_events_table: aws_dynamodb.ITable | None
    existing_order_records_table: aws_dynamodb.ITable | None
    queue_props: Mapping[str, Any] | aws_sqs.QueueProps | None
    dead_letter_queue_props: Mapping[str, Any] | aws_sqs.QueueProps | None
    table_props: Mapping[str, Any] | None
    topic_props: Mapping[str, Any] | aws_sns.TopicProps | None
    function_props: Mapping[str, Any] | aws_lambda.FunctionOptions | None
    vpc: aws_ec2.IVpc | None
    vpc_subnets: aws_ec2.SubnetSelection | None
    security_groups: Sequence[aws_ec2.ISecurityGroup] | None
    create_vpc_endpoints: bool
    vpc_endpoints_private_dns: bool
    reserved_concurrency: int | None
    fifo_high_throughput: bool
    provisioned_pollers: aws_lambda.ProvisionedPollerConfig | None
    tracing: bool
    snap_start: bool
    alarm_overrides: Mapping[str, monitoring.AlarmOverride] | None
    dashboard: bool
    reconcile_every: Duration | None
    reconcile_after: Duration | None
    order_schema: Mapping[str, Any] | None
    notification_attributes: Sequence[str]
    notification_body: str


#: Every prop's default, as one value: the constructor's parameters default to its fields.
DEFAULTS = PipelineProps()
#: The props' names, in the constructor's order.
PROP_NAMES = tuple(prop.name for prop in fields(PipelineProps))


def well_typed(props: PipelineProps, findings: Findings) -> PipelineProps:
    """Report every prop of the wrong type; return the props with those at their defaults (core's rule)."""
    return _well_typed(props, DEFAULTS, findings)


def redelivery_window_seconds(props: PipelineProps) -> float | None:
    """``visibility_timeout`` x ``max_receive_count``: how long after a write a normal redelivery can still come."""
    visibility = seconds(derived_visibility_timeout(props))
    count = number(props.max_receive_count)
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
    rules.check_batching(props, findings, fifo=props.fifo)
    rules.check_redrive(props, findings, item="order")
    rules.check_function(props, findings)
    rules.check_retention(
        props,
        findings,
        record="an idempotency record",
        expires="it expires record_retention after the sent mark; a pending record never expires",
    )
    _check_message_size(props, findings)
    _check_naming(props, findings)
    rules.check_alarms(
        props, findings, default_prefix="the service name", item="messages", default_runbook="docs/operations.md"
    )
    for key, override in props.alarm_override_map.items():
        _check_alarm_override(key, override, findings.errors)
    rules.check_removal(
        props, findings, resources="the pipeline's resources (SQS queues, DynamoDB tables, SNS topic, log group)"
    )
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


def _check_message_size(props: PipelineProps, findings: Findings) -> None:
    size = number(props.max_message_size)
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


def _check_alarm_override(key: str, override: object, errors: list[str]) -> None:
    if key not in monitoring.ALARM_KEYS:
        errors.append(f"alarm_overrides[{key!r}]: unknown alarm; allowed keys {list(monitoring.ALARM_KEYS)}")
        return
    if isinstance(override, bool):
        return
    if not isinstance(override, monitoring.AlarmThreshold):
        errors.append(f"alarm_overrides[{key!r}]={override!r}: allowed False, True or an AlarmThreshold(...)")
        return
    threshold = number(override.threshold)
    periods = number(override.evaluation_periods)
    datapoints = number(override.datapoints_to_alarm)
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


def _check_network(props: PipelineProps, findings: Findings) -> None:
    if props.vpc_endpoints_private_dns and not props.create_vpc_endpoints:
        findings.errors.append(
            "vpc_endpoints_private_dns=True: allowed only with create_vpc_endpoints=True (it is a setting of the "
            "endpoints the construct creates)"
        )
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
    reserved = number(props.reserved_concurrency)
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
    minimum, maximum = number(pollers.minimum_pollers), number(pollers.maximum_pollers)
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
    count = number(props.max_receive_count)
    if after is None or redelivery_window is None or visibility is None or count is None:
        return
    if after < redelivery_window:
        errors.append(
            f"reconcile_after={as_time(after)}: must be at least visibility_timeout x max_receive_count "
            f"({as_time(visibility)} x {count:g} = {as_time(redelivery_window)}), the longest a normal redelivery "
            "can still "
            "publish the record, so the reconciler never races one"
        )
