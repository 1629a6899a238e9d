"""``IdempotentSubscriber``'s props, each declared once, their validation, and the values derived from them.

As for the pipeline (``idempotent_order_pipeline.props``): every check runs up front, every problem is
collected, messages name the prop, the value received and what is allowed, and unresolved tokens are
not checked. The rules an SQS-fed function has (batching, redrive, function, retention, removal, alarm
naming) are the core's (:mod:`idempotent_order_pipeline.core.rules`), shared with the pipeline; what is
the subscriber's own (its source, handler, runtime, environment and lease) is here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypedDict

from aws_cdk import Duration, Stack, Token, aws_lambda, aws_sns

from idempotent_order_pipeline import notifications
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    SERVICE_NAME_VARIABLE,
    TOPIC_ARN_OUTPUT,
)
from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import config
from idempotent_order_pipeline.core import rules, sqs_function
from idempotent_order_pipeline.core.function_props import SqsFunctionKwargs, SqsFunctionProps
from idempotent_order_pipeline.core.props import Findings, prop, required
from idempotent_order_pipeline.core.props import well_typed as _well_typed
from idempotent_order_pipeline.core.rules import as_time, derived_visibility_timeout, seconds

if TYPE_CHECKING:
    from constructs import Construct

    from idempotent_order_pipeline.construct import IdempotentOrderPipeline

#: The runtimes the helper's layer is built and tested for (it is pure Python, any architecture).
LAYER_RUNTIMES = (
    aws_lambda.Runtime.PYTHON_3_11,
    aws_lambda.Runtime.PYTHON_3_12,
    aws_lambda.Runtime.PYTHON_3_13,
    aws_lambda.Runtime.PYTHON_3_14,
)
#: Layers the team may add: Lambda's limit less the helper's and Powertools'.
MAX_TEAM_LAYERS = rules.MAX_LAYERS_PER_FUNCTION - 2
#: The runtimes as messages and the docs name them.
LAYER_RUNTIME_NAMES = ", ".join(runtime.name for runtime in LAYER_RUNTIMES)
#: The architectures the function may run on (the helper is pure Python; Powertools has a layer for each).
ARCHITECTURES = (aws_lambda.Architecture.ARM_64, aws_lambda.Architecture.X86_64)


@dataclass(frozen=True, kw_only=True)
class SubscriberProps(SqsFunctionProps):
    """Every prop of :class:`IdempotentSubscriber`, declared once: its default, type, doc and allowed text.

    The class docstring's ``:param`` lines are made from these fields (:mod:`idempotent_order_pipeline.core.props`);
    a test proves the constructor's signature equal to them.
    """

    code: aws_lambda.Code = required(
        "the team's function code (any ``aws_lambda.Code``).",
        allowed="an aws_lambda.Code, e.g. Code.from_asset('shipping')",
    )
    handler: str = required(
        "the team's handler, ``module.function``, e.g. ``'shipping.handler'``.",
        allowed="a string, e.g. 'shipping.handler'",
    )
    pipeline: Any = prop(
        None,  # an IdempotentOrderPipeline or None: checked by well_typed (the class is imported lazily)
        "the ``IdempotentOrderPipeline`` whose notifications to act on (subscribed with its ``add_subscription``).",
        default_means="give ``topic``",
        allowed="an IdempotentOrderPipeline, or None with topic=",
    )
    topic: aws_sns.ITopic | None = prop(
        None,
        (
            "the pipeline's topic, e.g. from another stack or ``Topic.from_topic_arn``. Exactly one of "
            "``pipeline`` and ``topic``."
        ),
        default_means="give ``pipeline``",
    )
    runtime: aws_lambda.Runtime = prop(
        sqs_function.RUNTIME,
        "the function's Python runtime, 3.11 to 3.14 (the layer's); the Powertools layer is the one for it.",
        allowed=f"an aws_lambda.Runtime, one of {LAYER_RUNTIME_NAMES}, e.g. Runtime.PYTHON_3_13",
    )
    architecture: aws_lambda.Architecture = prop(
        sqs_function.ARCHITECTURE,
        "the function's architecture (the layer is pure Python); the Powertools layer is the one for it.",
        allowed="Architecture.ARM_64 or Architecture.X86_64",
    )
    layers: Sequence[aws_lambda.ILayerVersion] = prop(
        (),
        "the team's own Lambda layers, after the helper's and Powertools' (Lambda allows five in all).",
        default_means="none",
        allowed="a sequence of aws_lambda.ILayerVersion, e.g. [LayerVersion.from_layer_version_arn(...)]",
    )
    powertools_layer: aws_lambda.ILayerVersion | None = prop(
        None,
        "the layer providing Powertools for AWS Lambda (Python) to the team's code.",
        default_means=(
            "the official public layer of the pinned version for ``runtime`` and ``architecture``, its ARN "
            "read at deploy from Powertools' public SSM parameter (the stack parameter ``PowertoolsLayerArn`` "
            "for Python 3.14 on arm64, shared with the pipeline; ``PowertoolsLayerArn<Python3NN><Arch>`` "
            "otherwise); an error in aws-cn or aws-us-gov, which have no such parameter"
        ),
    )
    service_name: str | None = prop(
        None,
        "``POWERTOOLS_SERVICE_NAME``: the service of the team's Powertools logs, metrics and traces.",
        default_means="the stack name and this construct's path in the stack, e.g. ``dev-Shop-Fulfilment``",
    )
    environment: Mapping[str, str] | None = prop(
        None,
        "the team's own environment variables (the helper's ``ORDER_SUBSCRIBER_*`` ones are the construct's).",
        default_means="none",
    )
    filter_policy: Mapping[str, aws_sns.SubscriptionFilter] | None = prop(
        None,
        (
            'an SNS filter policy on the message attributes (``{"country": '
            'SubscriptionFilter.string_filter(allowlist=["DE"])}``): only matching notifications reach '
            "the queue. With ``pipeline``, a name its notifications never carry (``event_id``, "
            "``order_id`` and its ``notification_attributes``) is a ``ValueError``: it would match "
            "nothing."
        ),
        default_means="every notification",
    )
    filter_policy_with_message_body: Mapping[str, aws_sns.FilterOrPolicy] | None = prop(
        None,
        (
            "a filter policy on the JSON body instead (SNS filters one scope per subscription), e.g. on "
            'the fields of ``notification_body="order"``; with ``pipeline``, checked against the body it '
            "sends."
        ),
    )
    raw_message_delivery: bool = prop(
        True,
        (
            "deliver the notification itself, its attributes as SQS message attributes, rather than SNS's "
            "JSON envelope: smaller messages, and a body near SNS's size limit still fits the queue. The "
            "helper reads both, so switching is safe with messages queued."
        ),
        allowed="True or False",
    )
    lease: Duration | None = prop(
        None,
        "how long a claim holds an event: at least ``function_timeout``, and less than ``visibility_timeout``, "
        "so a copy redelivered after a crash finds the crashed claim expired.",
        default_means="``function_timeout``: a live invocation never loses its claim",
        allowed="a Duration, e.g. Duration.seconds(30), or None",
    )

    @property
    def fifo(self) -> bool:
        """Whether the topic is FIFO (then so are the queues)."""
        topic = topic_of(self)
        return bool(topic is not None and topic.fifo is True)


class _RequiredSubscriberKwargs(TypedDict):
    """The keyword arguments without a default (``Required[...]`` is not read from postponed annotations)."""

    code: aws_lambda.Code
    handler: str


class SubscriberKwargs(SqsFunctionKwargs, _RequiredSubscriberKwargs, total=False):
    """The constructor's keyword arguments: one per field of :class:`SubscriberProps` (a test keeps the two equal)."""

    pipeline: IdempotentOrderPipeline | None
    topic: aws_sns.ITopic | None
    runtime: aws_lambda.Runtime
    architecture: aws_lambda.Architecture
    layers: Sequence[aws_lambda.ILayerVersion]
    powertools_layer: aws_lambda.ILayerVersion | None
    service_name: str | None
    environment: Mapping[str, str] | None
    filter_policy: Mapping[str, aws_sns.SubscriptionFilter] | None
    filter_policy_with_message_body: Mapping[str, aws_sns.FilterOrPolicy] | None
    raw_message_delivery: bool
    lease: Duration | None


#: The props' names, in the constructor's order.
PROP_NAMES = tuple(prop.name for prop in fields(SubscriberProps))
#: Every optional prop's default (``code`` and ``handler`` have none).
DEFAULTS = SubscriberProps(code=None, handler="")  # type: ignore[arg-type]


def _is_pipeline(value: Any) -> bool:
    from idempotent_order_pipeline.construct import IdempotentOrderPipeline

    return isinstance(value, IdempotentOrderPipeline)


def well_typed(props: SubscriberProps, findings: Findings) -> SubscriberProps:
    """Report every prop of the wrong type; return the props with those at their defaults (core's rule)."""
    return _well_typed(props, DEFAULTS, findings, fits={"pipeline": lambda value: value is None or _is_pipeline(value)})


def topic_of(props: SubscriberProps) -> aws_sns.ITopic | None:
    """The topic subscribed to: the pipeline's, or ``topic``."""
    pipeline: IdempotentOrderPipeline | None = props.pipeline
    return pipeline.topic if pipeline is not None else props.topic


def derived_lease(props: SubscriberProps) -> Duration:
    """The claim's lease: the prop, else the function timeout (a live invocation never loses its claim)."""
    return props.lease if props.lease is not None else props.function_timeout


def validate(props: SubscriberProps, findings: Findings | None = None) -> Findings:
    """Check every prop's value (of the right type: see :func:`well_typed`); collect every problem."""
    findings = Findings() if findings is None else findings
    _check_source(props, findings)
    _check_code(props, findings)
    rules.check_batching(props, findings, fifo=props.fifo)
    rules.check_redrive(props, findings, item="notification")
    rules.check_function(props, findings)
    _check_lease(props, findings)
    rules.check_retention(
        props,
        findings,
        record="a deduplication record",
        expires="it expires record_retention after its last write",
    )
    rules.check_removal(props, findings, resources="the queues, the table and the log group")
    rules.check_alarms(
        props,
        findings,
        default_prefix="the stack name and this construct's path",
        item="notifications",
        default_runbook="docs/subscriber.md",
    )
    return findings


def source_environment_problems(scope: Construct, props: SubscriberProps) -> list[str]:
    """A pipeline (or a topic created in this app) in another account or region than the subscriber's stack.

    CloudFormation references values across stacks of one account and region only, and the topic's
    ARN holds the name CloudFormation generates: it is known only in the pipeline's stack. So the
    subscription, made in the subscriber's stack, can name the topic only by an ARN given as text
    (``Topic.from_topic_arn``). Without this check CDK fails later with ``CannotUseCrossEnvironment``
    or asks for a physical topic name, which the pipeline never sets.
    """
    mine = Stack.of(scope)
    for name, source in (("pipeline", props.pipeline), ("topic", props.topic)):
        if source is None or (name == "pipeline" and not _is_pipeline(source)):
            continue
        if name == "topic" and not isinstance(source, aws_sns.Topic):
            continue  # imported: its ARN is text the subscription can name in any environment
        theirs = Stack.of(source)
        if theirs.environment == mine.environment:
            continue
        return [
            f"{name}={source.node.path} is in {_environment(theirs)}, this subscriber in {_environment(mine)}: "
            "CloudFormation cannot reference the topic across accounts or regions (its ARN is known in the "
            "pipeline's stack only); allowed: the pipeline in this subscriber's account and region, or "
            f"topic=aws_sns.Topic.from_topic_arn(scope, id, '<the topic ARN, the pipeline stack's {TOPIC_ARN_OUTPUT} "
            "output>') "
            "instead of pipeline=, with pipeline.grant_subscribe(aws_iam.AccountPrincipal('<this account>')) in the "
            "pipeline's stack when the accounts differ (docs/subscriber.md, 'Another account or region')"
        ]
    return []


def _environment(stack: Stack) -> str:
    """``account 111111111111, region eu-west-1``, with ``unknown`` for an environment-agnostic side."""
    account = "unknown" if Token.is_unresolved(stack.account) else stack.account
    region = "unknown" if Token.is_unresolved(stack.region) else stack.region
    return f"account {account}, region {region}"


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


def _check_code(props: SubscriberProps, findings: Findings) -> None:
    """The team's handler, a runtime the helper's layer serves, and no variable the construct owns."""
    errors = findings.errors
    if not Token.is_unresolved(props.handler) and not props.handler.strip():
        errors.append(f"handler={props.handler!r}: allowed a non-empty 'module.function', e.g. 'shipping.handler'")
    if props.runtime.name not in {runtime.name for runtime in LAYER_RUNTIMES}:
        errors.append(f"runtime={props.runtime.name}: allowed {LAYER_RUNTIME_NAMES} (the helper's layer is Python)")
    if props.architecture.name not in {architecture.name for architecture in ARCHITECTURES}:
        errors.append(
            f"architecture={props.architecture.name}: allowed {', '.join(a.name for a in ARCHITECTURES)} (the "
            "architectures Lambda and Powertools' layers offer)"
        )
    if props.service_name is not None and not Token.is_unresolved(props.service_name) and not props.service_name:
        errors.append("service_name='': allowed a non-empty name, or None for the default")
    reserved = (*config.VARIABLES, SERVICE_NAME_VARIABLE)
    owned = sorted(set(props.environment or {}) & set(reserved))
    if owned:
        errors.append(
            f"environment keys {owned}: set by the construct (the helper's, and service_name=); allowed any other "
            f"name (reserved: {', '.join(reserved)})"
        )
    if len(props.layers) > MAX_TEAM_LAYERS:
        errors.append(
            f"layers: {len(props.layers)} given, allowed at most {MAX_TEAM_LAYERS} (Lambda allows "
            f"{rules.MAX_LAYERS_PER_FUNCTION} layers per function; the helper's and Powertools' are two of them)"
        )


def _check_lease(props: SubscriberProps, findings: Findings) -> None:
    """The protocol's order of times: function timeout <= lease < visibility timeout."""
    errors = findings.errors
    timeout = seconds(props.function_timeout)
    if timeout is None or not 1 <= timeout <= rules.MAX_FUNCTION_TIMEOUT_SECONDS:
        return  # a token, or reported by rules.check_function
    lease = seconds(derived_lease(props))
    if props.lease is not None and lease is not None and lease < timeout:
        errors.append(
            f"lease={as_time(lease)}: must be at least function_timeout ({as_time(timeout)}), so a live invocation "
            "never loses its claim to another copy"
        )
    visibility = seconds(derived_visibility_timeout(props))
    if visibility is not None and lease is not None and visibility > 0 and visibility <= lease:
        errors.append(
            f"visibility_timeout={as_time(visibility)}: must be longer than the lease ({as_time(lease)}), so a "
            "copy redelivered after a crash finds the crashed claim expired"
        )
