"""The core both constructs compose (idempotent_order_pipeline.core): one rule, one message, one builder.

Each shared prop rule is given the same bad value on an ``IdempotentOrderPipeline`` and on an
``IdempotentSubscriber``: both refuse it with the same line. The builders give both the same queue
settings, role, event source (metrics included) and standard alarms.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda, aws_sns
from aws_cdk.assertions import Annotations, Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber
from idempotent_order_pipeline.core import props as core_props
from idempotent_order_pipeline.core import sqs_function
from idempotent_order_pipeline.props import DEFAULTS as PIPELINE_DEFAULTS
from idempotent_order_pipeline.props import PipelineKwargs, PipelineProps
from idempotent_order_pipeline.subscriber.props import DEFAULTS as SUBSCRIBER_DEFAULTS
from idempotent_order_pipeline.subscriber.props import SubscriberKwargs, SubscriberProps

#: What the subscriber's TypedDict names under TYPE_CHECKING only.
_LAZY_NAMES = {"IdempotentOrderPipeline": IdempotentOrderPipeline}
CODE = aws_lambda.Code.from_inline("def handler(event, context):\n    return {}\n")
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:orders"

#: (prop, bad value, the line both constructs must give).
SHARED_RULES: list[tuple[str, Any, str]] = [
    ("batch_size", 0, "batch_size=0: allowed 1..10000 for a standard queue"),
    (
        "batch_size",
        11,
        "batch_size=11: above 10 Lambda requires max_batching_window of at least 1 second (got None)",
    ),
    ("max_batching_window", cdk.Duration.seconds(301), "max_batching_window=301s: allowed 0..300 seconds"),
    ("max_concurrency", 1, "max_concurrency=1: allowed None or 2..1000"),
    ("max_receive_count", 0, "max_receive_count=0: allowed 1..1000"),
    ("memory_size", 64, "memory_size=64: allowed 128..10240 MB"),
    ("function_timeout", cdk.Duration.seconds(901), "function_timeout=901s: allowed 1..900 seconds"),
    (
        "visibility_timeout",
        cdk.Duration.seconds(10),
        "visibility_timeout=10s: must be at least function_timeout (30s)",
    ),
    ("retention_period", cdk.Duration.days(14), "retention_period=14 days: allowed from 60 seconds to less than"),
    ("alarm_evaluation_periods", 0, "alarm_evaluation_periods=0: allowed 1 or more"),
    ("alarm_name_prefix", "", "alarm_name_prefix='': allowed 1..200 printable ASCII characters"),
    ("runbook_url", "wiki/orders", "runbook_url='wiki/orders': allowed an http(s):// URL of at most 512 characters"),
    ("removal_policy", cdk.RemovalPolicy.SNAPSHOT, "can be snapshotted by CloudFormation; allowed DESTROY, RETAIN"),
    ("memory_size", "1024", "memory_size='1024' (str): allowed an int (MB)"),
]


#: Rules whose line also names the construct's own default or resources (alarm names, what cannot be snapshotted).
CONSTRUCT_WORDED = {"alarm_name_prefix", "removal_policy"}


def _pipeline(**props: Any) -> IdempotentOrderPipeline:
    stack = cdk.Stack(cdk.App(), "Pipelines", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    return IdempotentOrderPipeline(stack, "Orders", **props)


def _subscriber(**props: Any) -> IdempotentSubscriber:
    stack = cdk.Stack(cdk.App(), "Subscribers", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    topic = aws_sns.Topic.from_topic_arn(stack, "Orders", TOPIC_ARN)
    return IdempotentSubscriber(stack, "Shipping", topic=topic, code=CODE, handler="shipping.handler", **props)


def _refusal(make: Any, **props: Any) -> list[str]:
    with pytest.raises(ValueError, match="invalid props") as raised:
        make(**props)
    return str(raised.value).splitlines()[1:]


@pytest.mark.parametrize(("name", "value", "line"), SHARED_RULES, ids=lambda item: str(item)[:24])
def test_a_shared_rule_refuses_the_same_value_with_the_same_line_on_both_constructs(
    name: str, value: Any, line: str
) -> None:
    # GIVEN a value one of the core's rules refuses
    # WHEN the pipeline and the subscriber are given it
    pipeline = _refusal(_pipeline, **{name: value})
    subscriber = _refusal(_subscriber, **{name: value})
    # THEN both name it with the same line, from the one rule (where the line names what the construct
    # creates, that part is the construct's own)
    found = [[problem for problem in problems if line in problem] for problems in (pipeline, subscriber)]
    assert [len(lines) for lines in found] == [1, 1], (pipeline, subscriber)
    if name not in CONSTRUCT_WORDED:
        assert found[0] == found[1]


def test_a_low_receive_count_warns_on_both_constructs() -> None:
    # GIVEN / WHEN each construct with max_receive_count=2
    warnings = [
        Annotations.from_stack(cdk.Stack.of(construct)).find_warning("*", Match.string_like_regexp("max_receive_count"))
        for construct in (_pipeline(max_receive_count=2), _subscriber(max_receive_count=2))
    ]
    # THEN both warn that a transient failure can park a valid message (the subscriber did not, before the core)
    assert [len(found) for found in warnings] == [1, 1]
    for found in warnings:
        assert "max-receive-count-low" in str(found[0].entry.data)


def test_both_mappings_have_the_event_count_metrics_and_both_can_turn_them_off() -> None:
    # GIVEN each construct with its defaults, and with event_source_metrics=False
    for make in (_pipeline, _subscriber):
        on = Template.from_stack(cdk.Stack.of(make()))
        off = Template.from_stack(cdk.Stack.of(make(event_source_metrics=False)))
        # THEN the default mapping reports EventCount, and the other has no metrics config
        on.has_resource_properties(
            "AWS::Lambda::EventSourceMapping",
            {"MetricsConfig": {"Metrics": ["EventCount"]}, "FunctionResponseTypes": ["ReportBatchItemFailures"]},
        )
        off.has_resource_properties("AWS::Lambda::EventSourceMapping", {"MetricsConfig": Match.absent()})


def test_both_have_the_standard_alarms_by_the_same_ids_and_the_role_writes_its_own_log_group_only() -> None:
    for construct in (_pipeline(), _subscriber()):
        # GIVEN each construct's template
        template = Template.from_stack(cdk.Stack.of(construct))
        # THEN the standard alarms are there, by the core's construct ids
        for key, construct_id in sqs_function.STANDARD_ALARMS.items():
            assert key in construct.alarms
            assert re.search(construct_id, construct.alarms[key].node.path)
        # AND the function's role may write its own log group's streams, and nothing else of Logs
        policies = template.find_resources("AWS::IAM::Policy")
        statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
        assert statements
        logs = [s for s in statements if any(str(a).startswith("logs:") for a in _as_list(s["Action"]))]
        assert logs
        assert all(s["Sid"] == "WriteOwnLogs" and _as_list(s["Action"]) == list(sqs_function.LOG_ACTIONS) for s in logs)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("props_class", [PipelineProps, SubscriberProps])
def test_every_prop_is_declared_with_its_doc_and_the_docstring_is_made_from_it(props_class: type) -> None:
    # GIVEN a props class and the construct it documents
    construct = {PipelineProps: IdempotentOrderPipeline, SubscriberProps: IdempotentSubscriber}[props_class]
    docstring = " ".join((construct.__doc__ or "").split())
    for prop_field in core_props.prop_fields(props_class):
        # THEN each field carries a doc, and the docstring has its :param line with the doc and default sentence
        doc = prop_field.metadata[core_props.DOC]
        assert doc.strip(), prop_field.name
        expected = f":param {prop_field.name}: {' '.join(doc.split())} {core_props.default_sentence(prop_field)}"
        assert expected in docstring, prop_field.name


def test_a_type_error_names_the_declared_allowed_text() -> None:
    # GIVEN a prop whose field declares how to state what is allowed
    [declared] = [f for f in core_props.prop_fields(SubscriberProps) if f.name == "function_timeout"]
    # WHEN it is given a number / THEN the message quotes the declaration
    lines = _refusal(_subscriber, function_timeout=30)
    assert f"  - function_timeout=30 (int): allowed {declared.metadata[core_props.ALLOWED]}" in lines


@pytest.mark.parametrize(
    ("props_class", "kwargs_class"), [(PipelineProps, PipelineKwargs), (SubscriberProps, SubscriberKwargs)]
)
def test_the_constructors_keyword_arguments_are_the_props_fields(props_class: type, kwargs_class: type) -> None:
    # GIVEN a props class and the TypedDict its constructor's **kwargs are typed with
    declared = {f.name: f.type for f in core_props.prop_fields(props_class)}
    keywords = dict(typing.get_type_hints(kwargs_class, include_extras=False, localns=_LAZY_NAMES))
    # THEN they have the same names and types (the subscriber's pipeline is typed Any in its field: the
    # construct class is imported lazily, and well_typed checks it by its own rule)
    assert list(keywords) == list(declared)
    hints = typing.get_type_hints(props_class)
    for name in declared:
        expected = (
            IdempotentOrderPipeline | None if (props_class, name) == (SubscriberProps, "pipeline") else hints[name]
        )
        assert keywords[name] == expected, name
    # AND the required ones are the fields without a default
    required = {f.name for f in core_props.prop_fields(props_class) if not core_props.has_default(f)}
    assert set(kwargs_class.__required_keys__) == required  # type: ignore[attr-defined]


def test_a_keyword_that_is_no_prop_names_the_closest() -> None:
    # GIVEN / WHEN a misspelt prop / THEN a TypeError names it and the prop meant
    with pytest.raises(
        TypeError,
        match=r"IdempotentSubscriber\(\) got an unexpected keyword argument 'batchsize'; "
        r"did you mean 'batch_size'\?",
    ):
        _subscriber(batchsize=5)
    with pytest.raises(TypeError, match=r"missing required keyword argument\(s\): code"):
        IdempotentSubscriber(cdk.Stack(cdk.App(), "S"), "S", handler="a.b", topic=None)  # type: ignore[call-arg]


def test_the_signature_shows_every_prop_with_its_default() -> None:
    # GIVEN the constructors' signatures as inspect and help() show them
    for construct, props_class, defaults in (
        (IdempotentOrderPipeline, PipelineProps, PIPELINE_DEFAULTS),
        (IdempotentSubscriber, SubscriberProps, SUBSCRIBER_DEFAULTS),
    ):
        parameters = inspect.signature(construct.__init__).parameters
        # THEN scope and construct_id come first, then one keyword-only parameter per prop with its default
        assert list(parameters)[:3] == ["self", "scope", "construct_id"]
        for prop_field in core_props.prop_fields(props_class):
            parameter = parameters[prop_field.name]
            assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
            expected = getattr(defaults, prop_field.name) if core_props.has_default(prop_field) else parameter.empty
            assert parameter.default is expected, prop_field.name
