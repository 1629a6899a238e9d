"""Bring your own resources: one helper per resource, after Solutions Constructs' ``sqs-helper``.

Each helper takes ``existing_x`` *or* ``x_props`` (never both: :func:`check_resources` reports
it), merges the overrides over the construct's defaults in one place (:func:`merged`), and
returns the resource. What the exactly-once design cannot do without is checked after the merge
(:func:`check_resources`, run with the props validation so one synth reports every problem):

==========================  ==============================================================
Requirement                 Why
==========================  ==============================================================
Table keys                  processed_events: partition key ``event_id`` (S), no sort key;
                            order_records: partition key ``order_id`` (S), no sort key. The
                            transaction's conditions are written against those keys.
TTL attribute ``ttl``       processed_events only: the ``sent`` mark sets ``ttl``.
Redrive to the DLQ          The queue's redrive policy must target ``dead_letter_queue``,
                            where the handler also parks permanent failures.
Visibility timeout          At least ``function_timeout`` (error), 6x recommended (warning).
FIFO on every side or none  Queue, DLQ and topic are all FIFO, or all standard.
ReportBatchItemFailures     Always on the event source mapping (not overridable).
Encryption, TLS-only        Overrides may not turn encryption or the TLS-only policy off.
==========================  ==============================================================

Keys of ``x_props`` that another prop owns are refused with the prop to use instead (e.g.
``queue_props={"visibility_timeout": ...}``: use ``visibility_timeout=``), so no value is set in
two places. Imported resources (``Queue.from_queue_arn``, ``Table.from_table_name``, ...) cannot
be inspected at synth: each adds a warning saying what the caller must guarantee, which the
caller acknowledges with ``Annotations.of(pipeline).acknowledge_warning(<id>)`` once checked.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Token, aws_dynamodb, aws_lambda, aws_sns, aws_sqs

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import DEAD_LETTER_MAX_MESSAGE_BYTES
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import TTL_ATTRIBUTE
from idempotent_order_pipeline.core import sqs_function, tables
from idempotent_order_pipeline.core.props import Findings, describe_value
from idempotent_order_pipeline.core.rules import (
    DEAD_LETTER_RETENTION,
    VISIBILITY_TIMEOUT_FACTOR,
    as_time,
    derived_visibility_timeout,
    number,
    seconds,
)

if TYPE_CHECKING:
    from idempotent_order_pipeline.props import PipelineProps

#: What SQS does without an explicit visibility timeout.
SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class TableSpec:
    """One of the two tables the design needs."""

    construct_id: str
    #: The prop name of the existing table (``existing_<role>``).
    role: str
    partition_key: str
    time_to_live_attribute: str | None


PROCESSED_EVENTS = TableSpec("ProcessedEventsTable", "processed_events_table", "event_id", TTL_ATTRIBUTE)
ORDER_RECORDS = TableSpec("OrderRecordsTable", "order_records_table", "order_id", None)

# Keys of each x_props the construct owns, with what to use instead.
_FIXED = "fixed by the design"
OWNED_QUEUE_KEYS: Mapping[str, str] = {
    "fifo": "use fifo=",
    "content_based_deduplication": f"{_FIXED} (off: the producer sends deduplication ids)",
    "dead_letter_queue": "use existing_dead_letter_queue= and max_receive_count=",
    "visibility_timeout": "use visibility_timeout=",
    "retention_period": "use retention_period=",
    "max_message_size_bytes": "use max_message_size=",
    "encryption_master_key": "use encryption_key=",
    "removal_policy": "use removal_policy=",
    "deduplication_scope": "use fifo_high_throughput=",
    "fifo_throughput_limit": "use fifo_high_throughput=",
}
OWNED_DEAD_LETTER_QUEUE_KEYS: Mapping[str, str] = {
    "fifo": "use fifo=",
    "content_based_deduplication": f"{_FIXED} (off: the handler sends deduplication ids)",
    "dead_letter_queue": f"{_FIXED} (a dead-letter queue of the dead-letter queue only moves the problem)",
    "max_message_size_bytes": f"{_FIXED} (1 MiB: a parked message is the original plus its reason)",
    "encryption_master_key": "use encryption_key=",
    "removal_policy": "use removal_policy=",
    "deduplication_scope": "use fifo_high_throughput=",
    "fifo_throughput_limit": "use fifo_high_throughput=",
}
OWNED_TABLE_KEYS: Mapping[str, str] = {
    "partition_key": f"{_FIXED} (event_id (S) for processed_events, order_id (S) for order_records)",
    "sort_key": f"{_FIXED} (the tables have a partition key only)",
    "time_to_live_attribute": f"{_FIXED} ('{TTL_ATTRIBUTE}' on processed_events, none on order_records)",
    "encryption": "use encryption_key=",
    "encryption_key": "use encryption_key=",
    "removal_policy": "use removal_policy=",
    "deletion_protection": "follows removal_policy= (on unless the policy deletes the table)",
    "table_name": f"{_FIXED} (one table_props applies to both tables; no physical names)",
}
OWNED_TOPIC_KEYS: Mapping[str, str] = {
    "fifo": "use fifo=",
    "master_key": "use encryption_key=",
    "fifo_throughput_scope": "use fifo_high_throughput=",
}
OWNED_FUNCTION_KEYS: Mapping[str, str] = {
    "runtime": f"{_FIXED} (the asset is built and tested for python3.14)",
    "architecture": f"{_FIXED} (arm64, matching the Powertools layer)",
    "handler": f"{_FIXED} (order_consumer.handler.handler)",
    "code": f"{_FIXED} (the packaged asset)",
    "environment": f"{_FIXED} (the handler's contract; derived from the props)",
    "role": f"{_FIXED} (least privilege, written out by the construct)",
    "initial_policy": f"{_FIXED} (the role holds exactly what the handler needs; grant on function.role)",
    "log_group": "use log_retention=",
    "log_retention": "use log_retention=",
    "layers": "use powertools_layer=",
    "events": "the queue is the event source; add others on function after creation",
    "memory_size": "use memory_size=",
    "timeout": "use function_timeout=",
    "reserved_concurrent_executions": "use reserved_concurrency=",
    "tracing": "use tracing=",
    "snap_start": "use snap_start=",
    "vpc": "use vpc=",
    "vpc_subnets": "use vpc_subnets=",
    "security_groups": "use security_groups=",
}


def as_kwargs(value: Any) -> dict[str, Any]:
    """An ``x_props`` override as keyword arguments: a mapping, or the jsii props struct (``QueueProps(...)``)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    values = getattr(value, "_values", None)  # jsii structs keep their keyword arguments here
    if isinstance(values, Mapping):
        return dict(values)
    raise TypeError(f"expected a mapping of keyword arguments or a props struct, got {type(value).__name__}")


def merged(defaults: Mapping[str, Any], overrides: Mapping[str, Any], owned: Mapping[str, str]) -> dict[str, Any]:
    """The construct's defaults with the caller's overrides on top, except the keys the construct owns.

    The one place overrides are merged. Owned keys are reported by :func:`check_resources`; here
    they are dropped, so a synth that goes on collecting errors never uses them.
    """
    return {**defaults, **{key: value for key, value in overrides.items() if key not in owned}}


# ---- defaults -------------------------------------------------------------------------------------


def _queue_defaults(props: PipelineProps) -> dict[str, Any]:
    """Every queue's (core's: encrypted, TLS only), with the pipeline's FIFO settings."""
    defaults = sqs_function.queue_defaults(
        fifo=props.fifo, removal_policy=props.removal_policy, encryption_key=props.encryption_key
    )
    if not props.fifo:
        return defaults
    defaults["content_based_deduplication"] = False
    if props.fifo_high_throughput:
        defaults["deduplication_scope"] = aws_sqs.DeduplicationScope.MESSAGE_GROUP
        defaults["fifo_throughput_limit"] = aws_sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID
    return defaults


def dead_letter_queue_kwargs(props: PipelineProps) -> dict[str, Any]:
    """The dead-letter queue's keyword arguments: defaults, then ``dead_letter_queue_props``."""
    defaults = {
        **_queue_defaults(props),
        "retention_period": DEAD_LETTER_RETENTION,
        # SQS counts attributes in the size: the largest message plus its reason must always fit.
        "max_message_size_bytes": DEAD_LETTER_MAX_MESSAGE_BYTES,
    }
    return merged(defaults, as_kwargs(props.dead_letter_queue_props), OWNED_DEAD_LETTER_QUEUE_KEYS)


def queue_kwargs(props: PipelineProps) -> dict[str, Any]:
    """The queue's keyword arguments (without its redrive policy): defaults, then ``queue_props``."""
    defaults = {
        **_queue_defaults(props),
        "retention_period": props.retention_period,
        "max_message_size_bytes": props.max_message_size,
        "visibility_timeout": derived_visibility_timeout(props),
    }
    return merged(defaults, as_kwargs(props.queue_props), OWNED_QUEUE_KEYS)


def table_kwargs(props: PipelineProps, spec: TableSpec) -> dict[str, Any]:
    """One table's keyword arguments: defaults, then ``table_props`` (deletion protection is set later)."""
    defaults = tables.table_defaults(
        partition_key=spec.partition_key,
        time_to_live_attribute=spec.time_to_live_attribute,
        removal_policy=props.removal_policy,
        encryption_key=props.encryption_key,
    )
    return merged(defaults, as_kwargs(props.table_props), OWNED_TABLE_KEYS)


#: The signature version of a standard topic's deliveries (SHA256).
TOPIC_SIGNATURE_VERSION = "2"


def topic_kwargs(props: PipelineProps) -> dict[str, Any]:
    """The topic's keyword arguments: defaults, then ``topic_props``."""
    defaults: dict[str, Any] = {"master_key": props.encryption_key, "enforce_ssl": True}
    if not props.fifo:
        # SHA256 signatures on what SNS delivers to HTTPS endpoints (the default, 1, is SHA1). An SNS
        # FIFO topic delivers to SQS queues only, which SNS does not sign for.
        defaults["signature_version"] = TOPIC_SIGNATURE_VERSION
    if props.fifo:
        defaults |= {"fifo": True, "content_based_deduplication": False}
        if props.fifo_high_throughput:
            defaults["fifo_throughput_scope"] = aws_sns.FifoThroughputScope.MESSAGE_GROUP
    return merged(defaults, as_kwargs(props.topic_props), OWNED_TOPIC_KEYS)


def function_overrides(props: PipelineProps) -> dict[str, Any]:
    """``function_props`` without the keys the construct owns (merged over the function's defaults)."""
    return merged({}, as_kwargs(props.function_props), OWNED_FUNCTION_KEYS)


# ---- checks ---------------------------------------------------------------------------------------


def keywords_of(construct_class: type) -> frozenset[str]:
    """The keyword arguments a CDK construct class takes (its props), without ``scope`` and ``id``."""
    parameters = inspect.signature(vars(construct_class)["__init__"]).parameters  # its own, not the metaclass call
    return frozenset(name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY)


def _unknown_keyword(key: object, known: frozenset[str], target: type) -> str:
    where = f"{target.__module__.removeprefix('aws_cdk.')}.{target.__name__}"
    close = difflib.get_close_matches(str(key), sorted(known), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"allowed keys: {', '.join(sorted(known))}"
    return f"not a keyword of {where}; {hint}"


def check_resources(props: PipelineProps, findings: Findings) -> None:
    """Every requirement on the resources, after the merge; problems go into ``findings``."""
    _check_exclusive(props, findings)
    overrides_valid = True
    for prop, value, owned, target in (
        ("queue_props", props.queue_props, OWNED_QUEUE_KEYS, aws_sqs.Queue),
        ("dead_letter_queue_props", props.dead_letter_queue_props, OWNED_DEAD_LETTER_QUEUE_KEYS, aws_sqs.Queue),
        ("table_props", props.table_props, OWNED_TABLE_KEYS, aws_dynamodb.Table),
        ("topic_props", props.topic_props, OWNED_TOPIC_KEYS, aws_sns.Topic),
        ("function_props", props.function_props, OWNED_FUNCTION_KEYS, aws_lambda.Function),
    ):
        try:
            overrides = as_kwargs(value)
        except TypeError as exc:
            findings.errors.append(f"{prop}={value!r}: {exc}")
            overrides_valid = False
            continue
        for key in sorted(set(overrides) & set(owned)):
            findings.errors.append(f"{prop}[{key!r}]={describe_value(overrides[key])}: not overridable, {owned[key]}")
        known = keywords_of(target)
        for key in sorted(set(overrides) - known - set(owned), key=str):
            findings.errors.append(f"{prop}[{key!r}]: {_unknown_keyword(key, known, target)}")
            overrides_valid = False
    if overrides_valid:  # else the merge itself cannot be built
        _check_merged_queues(props, findings)
        _check_merged_tables(props, findings)
        _check_merged_topic(props, findings)
    _check_existing_queues(props, findings)
    _check_existing_tables(props, findings)
    _check_existing_topic(props, findings)


def _check_exclusive(props: PipelineProps, findings: Findings) -> None:
    for existing, existing_value, override, override_value in (
        ("existing_queue", props.existing_queue, "queue_props", props.queue_props),
        (
            "existing_dead_letter_queue",
            props.existing_dead_letter_queue,
            "dead_letter_queue_props",
            props.dead_letter_queue_props,
        ),
        ("existing_topic", props.existing_topic, "topic_props", props.topic_props),
    ):
        if existing_value is not None and override_value is not None:
            findings.errors.append(
                f"{existing} and {override}={override_value!r}: give one or the other ({override} shapes the "
                "resource the construct creates; an existing one is used as it is)"
            )
    if (
        props.existing_processed_events_table is not None
        and props.existing_order_records_table is not None
        and props.table_props is not None
    ):
        findings.errors.append(
            f"table_props={props.table_props!r} with existing_processed_events_table and "
            "existing_order_records_table: give one or the other (table_props shapes the tables the construct creates)"
        )
    if props.existing_queue is not None and props.existing_dead_letter_queue is None:
        findings.errors.append(
            "existing_queue without existing_dead_letter_queue: required, the queue existing_queue's redrive policy "
            "moves failed messages to (the handler parks permanent failures there too)"
        )


def _check_merged_queues(props: PipelineProps, findings: Findings) -> None:
    for prop, kwargs in (
        ("queue_props", queue_kwargs(props)),
        ("dead_letter_queue_props", dead_letter_queue_kwargs(props)),
    ):
        if kwargs.get("encryption") == aws_sqs.QueueEncryption.UNENCRYPTED:
            findings.errors.append(
                f"{prop}['encryption']=UNENCRYPTED: the queues are always encrypted (allowed SQS_MANAGED, KMS_MANAGED "
                "or, with encryption_key, KMS)"
            )
        if kwargs.get("enforce_ssl") is not True:
            findings.errors.append(f"{prop}['enforce_ssl']={kwargs.get('enforce_ssl')!r}: allowed True (TLS only)")
    # Only a retention the caller gave: the fixed default is checked against retention_period there.
    dlq_retention = seconds(as_kwargs(props.dead_letter_queue_props).get("retention_period"))
    retention = seconds(props.retention_period)
    if dlq_retention is not None and retention is not None and dlq_retention <= retention:
        findings.errors.append(
            f"dead_letter_queue_props['retention_period']={as_time(dlq_retention)}: must be longer than "
            f"retention_period ({as_time(retention)}); a message keeps its first enqueue time in the DLQ"
        )


def _check_merged_tables(props: PipelineProps, findings: Findings) -> None:
    kwargs = table_kwargs(props, PROCESSED_EVENTS)
    specification = kwargs.get("point_in_time_recovery_specification")
    enabled = getattr(specification, "point_in_time_recovery_enabled", None) or kwargs.get("point_in_time_recovery")
    if not enabled:
        findings.warnings.append(
            (
                "point-in-time-recovery-off",
                "table_props turns point-in-time recovery off: an accidental write or delete of idempotency records "
                "or orders cannot be undone",
            )
        )


def _check_merged_topic(props: PipelineProps, findings: Findings) -> None:
    kwargs = topic_kwargs(props)
    if kwargs.get("enforce_ssl") is not True:
        findings.errors.append(f"topic_props['enforce_ssl']={kwargs.get('enforce_ssl')!r}: allowed True (TLS only)")


def _kind(fifo: bool) -> str:
    return "FIFO" if fifo else "standard"


def _fifo_known(value: Any) -> bool | None:
    fifo = getattr(value, "fifo", None)
    return fifo if isinstance(fifo, bool) else None


def _check_fifo(prop: str, resource: Any, props: PipelineProps, findings: Findings) -> None:
    arn = getattr(resource, "queue_arn", None) or getattr(resource, "topic_arn", None)
    if not isinstance(resource, aws_sqs.Queue | aws_sns.Topic) and Token.is_unresolved(arn):
        return  # imported by a token ARN: its FIFO-ness is unknown (the unverified warning says so)
    fifo = _fifo_known(resource)
    if fifo is not None and fifo != props.fifo:
        findings.errors.append(
            f"{prop} is a {_kind(fifo)} {'topic' if 'topic' in prop else 'queue'} but fifo={props.fifo}: the queue, "
            "the dead-letter queue and the topic must all be FIFO or all standard"
        )


def _check_existing_queues(props: PipelineProps, findings: Findings) -> None:
    queue, dead_letter_queue = props.existing_queue, props.existing_dead_letter_queue
    if props.fifo_high_throughput and (queue is not None or dead_letter_queue is not None):
        findings.warnings.append(
            (
                "existing-queue-throughput",
                "fifo_high_throughput with an existing queue: the construct cannot set DeduplicationScope and "
                "FifoThroughputLimit on a queue it does not create; set them to messageGroup and perMessageGroupId "
                "on the queue itself",
            )
        )
    if dead_letter_queue is not None:
        _check_fifo("existing_dead_letter_queue", dead_letter_queue, props, findings)
        if isinstance(dead_letter_queue, aws_sqs.Queue):
            _check_known_key("existing_dead_letter_queue", dead_letter_queue.encryption_master_key, props, findings)
            cfn = dead_letter_queue.node.default_child
            retention = getattr(cfn, "message_retention_period", None)
            source = seconds(props.retention_period)
            if isinstance(retention, int | float) and source is not None and retention <= source:
                findings.errors.append(
                    f"existing_dead_letter_queue keeps messages {as_time(retention)}: must be longer than the queue's "
                    f"retention ({as_time(source)})"
                )
        else:
            findings.warnings.append(
                (
                    "existing-dead-letter-queue-unverified",
                    "existing_dead_letter_queue is imported, so it cannot be checked at synth: the caller guarantees "
                    f"it is {_kind(props.fifo)}, keeps messages longer than the queue (14 days recommended) and, if "
                    "encrypted with a customer managed key, that key is encryption_key",
                )
            )
    if queue is None:
        if props.acknowledge_existing_queue_message_size:
            findings.errors.append(
                "acknowledge_existing_queue_message_size=True: allowed only with existing_queue= (the queue the "
                "construct creates takes max_message_size)"
            )
        return
    _check_fifo("existing_queue", queue, props, findings)
    if not isinstance(queue, aws_sqs.Queue):
        size = (
            ""
            if props.acknowledge_existing_queue_message_size
            else f"its MaximumMessageSize is at most max_message_size ({props.max_message_size} bytes), "
        )
        findings.warnings.append(
            (
                "existing-queue-unverified",
                "existing_queue is imported, so it cannot be checked at synth: the caller guarantees its redrive "
                "policy targets existing_dead_letter_queue, its visibility timeout is at least "
                f"{VISIBILITY_TIMEOUT_FACTOR}x function_timeout, {size}it is {_kind(props.fifo)}, and, if "
                "encrypted with a customer managed key, that key is encryption_key",
            )
        )
        return
    _check_known_key("existing_queue", queue.encryption_master_key, props, findings)
    _check_existing_queue_size(queue, props, findings)
    redrive = queue.dead_letter_queue
    if redrive is None:
        findings.errors.append(
            "existing_queue has no redrive policy: required, to existing_dead_letter_queue (failed messages must "
            "end up where the handler parks permanent failures)"
        )
    elif dead_letter_queue is not None and redrive.queue.node.path != dead_letter_queue.node.path:
        findings.errors.append(
            f"existing_queue redrives to {redrive.queue.node.path}: must redrive to existing_dead_letter_queue "
            f"({dead_letter_queue.node.path})"
        )
    cfn = queue.node.default_child
    visibility = getattr(cfn, "visibility_timeout", None)
    visibility = SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS if visibility is None else visibility
    timeout = seconds(props.function_timeout)
    if isinstance(visibility, int | float) and not Token.is_unresolved(visibility) and timeout is not None:
        if visibility < timeout:
            findings.errors.append(
                f"existing_queue has visibility timeout {as_time(visibility)}: must be at least function_timeout "
                f"({as_time(timeout)}), or messages are redelivered while still being processed"
            )
        elif visibility < VISIBILITY_TIMEOUT_FACTOR * timeout:
            findings.warnings.append(
                (
                    "visibility-timeout-low",
                    f"existing_queue has visibility timeout {as_time(visibility)}, below {VISIBILITY_TIMEOUT_FACTOR}x "
                    f"function_timeout ({as_time(VISIBILITY_TIMEOUT_FACTOR * timeout)}): a batch Lambda retries after "
                    "throttling can be redelivered while in flight",
                )
            )


def _check_existing_queue_size(queue: aws_sqs.Queue, props: PipelineProps, findings: Findings) -> None:
    """The existing queue accepts no larger message than ``max_message_size``, or the caller acknowledged it.

    The consumer is built and tested for messages up to ``max_message_size`` (at most 256 KiB); a queue
    created without ``MaximumMessageSize`` takes SQS's default, 1 MiB since 2025.
    """
    if props.acknowledge_existing_queue_message_size:
        return
    size = getattr(queue.node.default_child, "maximum_message_size", None)
    limit = number(props.max_message_size)
    if limit is None or (size is not None and Token.is_unresolved(size)):
        return
    if size is None:
        got = "has no MaximumMessageSize, so SQS accepts messages up to its default (1 MiB since 2025)"
    elif size > limit:
        got = f"accepts messages up to {size:g} bytes (MaximumMessageSize)"
    else:
        return
    findings.errors.append(
        f"existing_queue {got}: allowed at most max_message_size ({limit:g} bytes), the largest message the "
        f"consumer is built for; set the queue's max_message_size_bytes to at most {limit:g}, or pass "
        "acknowledge_existing_queue_message_size=True once producers never send larger orders (what the consumer "
        "does with one: docs/construct.md, 'Bring your own resources')"
    )


def _check_known_key(prop: str, key: Any, props: PipelineProps, findings: Findings) -> None:
    if key is not None and (props.encryption_key is None or key.node.path != props.encryption_key.node.path):
        findings.errors.append(
            f"{prop} is encrypted with the customer managed key {key.node.path}: pass that key as encryption_key "
            "(the function's role is granted that key only)"
        )


def _check_existing_tables(props: PipelineProps, findings: Findings) -> None:
    for spec, table in (
        (PROCESSED_EVENTS, props.existing_processed_events_table),
        (ORDER_RECORDS, props.existing_order_records_table),
    ):
        if table is None:
            continue
        prop = f"existing_{spec.role}"
        if not isinstance(table, aws_dynamodb.Table):
            ttl = f" and TTL enabled on '{spec.time_to_live_attribute}'" if spec.time_to_live_attribute else ""
            findings.warnings.append(
                (
                    f"existing-{spec.role.replace('_', '-')}-unverified",
                    f"{prop} is imported, so it cannot be checked at synth: the caller guarantees its partition key is "
                    f"'{spec.partition_key}' (S) with no sort key{ttl}, and, if encrypted with a customer managed "
                    "key, that key is encryption_key",
                )
            )
            continue
        _check_known_key(prop, table.encryption_key, props, findings)
        schema = table.schema()
        partition = schema.partition_key
        string = aws_dynamodb.AttributeType.STRING
        if partition is None or partition.name != spec.partition_key or partition.type != string:
            findings.errors.append(
                f"{prop} has partition key {_describe(partition)}: required '{spec.partition_key}' (STRING)"
            )
        if schema.sort_key is not None:
            findings.errors.append(
                f"{prop} has sort key {schema.sort_key.name!r}: required none (items are addressed by "
                f"'{spec.partition_key}' alone)"
            )
        if spec.time_to_live_attribute is not None:
            cfn = table.node.default_child
            ttl_spec = getattr(cfn, "time_to_live_specification", None)
            name = getattr(ttl_spec, "attribute_name", None)
            if name != spec.time_to_live_attribute:
                findings.errors.append(
                    f"{prop} has TTL attribute {name!r}: required '{spec.time_to_live_attribute}' (the sent mark sets "
                    "it, so records expire after record_retention)"
                )


def _describe(attribute: aws_dynamodb.Attribute | None) -> str:
    return "none" if attribute is None else f"{attribute.name!r} ({attribute.type.name})"


def _check_existing_topic(props: PipelineProps, findings: Findings) -> None:
    topic = props.existing_topic
    if topic is None:
        return
    _check_fifo("existing_topic", topic, props, findings)
    if props.fifo_high_throughput:
        findings.warnings.append(
            (
                "existing-topic-throughput",
                "fifo_high_throughput with existing_topic: the construct cannot set FifoThroughputScope on a topic "
                "it does not create; set it to MessageGroup on the topic itself",
            )
        )
    if not isinstance(topic, aws_sns.Topic):
        findings.warnings.append(
            (
                "existing-topic-unverified",
                f"existing_topic is imported, so it cannot be checked at synth: the caller guarantees it is "
                f"{_kind(props.fifo)} and, if encrypted with a customer managed key, that key is encryption_key",
            )
        )
