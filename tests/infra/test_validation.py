"""Props validation: errors name the prop, the value and what is allowed; tokens pass; warnings annotate."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from enum import Enum
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline.core.props import describe_default
from idempotent_order_pipeline.props import DEFAULTS, PROP_NAMES, PipelineProps
from tests.infra.synth import REPO, Synthesized

seconds = cdk.Duration.seconds
days = cdk.Duration.days

INVALID_PROPS: list[tuple[dict[str, Any], str]] = [
    ({"max_receive_count": 0}, r"max_receive_count=0: allowed 1\.\.1000"),
    ({"max_receive_count": 1001}, r"max_receive_count=1001: allowed 1\.\.1000"),
    ({"batch_size": 0}, r"batch_size=0: allowed 1\.\.10000 for a standard queue"),
    ({"batch_size": 11, "fifo": True}, r"batch_size=11: allowed 1\.\.10 for a FIFO queue"),
    ({"batch_size": 20}, r"batch_size=20: above 10 Lambda requires max_batching_window of at least 1 second"),
    ({"max_batching_window": seconds(5), "fifo": True}, r"max_batching_window=5s: not supported for a FIFO queue"),
    ({"max_batching_window": seconds(301)}, r"max_batching_window=301s: allowed 0\.\.300 seconds"),
    ({"max_concurrency": 1}, r"max_concurrency=1: allowed None or 2\.\.1000"),
    ({"memory_size": 64}, r"memory_size=64: allowed 128\.\.10240 MB"),
    ({"function_timeout": seconds(901)}, r"function_timeout=901s: allowed 1\.\.900 seconds"),
    (
        {"visibility_timeout": seconds(10)},
        r"visibility_timeout=10s: must be at least function_timeout \(30s\)",
    ),
    ({"visibility_timeout": seconds(43_201)}, r"visibility_timeout=43201s: allowed 0\.\.43200 seconds"),
    (
        {"retention_period": days(14)},
        r"retention_period=14 days: allowed from 60 seconds to less than the dead-letter queue's 14 days",
    ),
    (
        {"record_retention": days(18)},
        r"record_retention=18 days: must be longer than retention_period \+ dead-letter retention \(18 days\)",
    ),
    ({"identity_fields": ()}, r"identity_fields=\(\): allowed one or more distinct, non-empty field names"),
    ({"identity_fields": ("order_id", "order_id")}, r"identity_fields=\('order_id', 'order_id'\): allowed"),
    ({"identity_fields": ("order_id,customer_id",)}, r"identity_fields=\('order_id,customer_id',\): allowed"),
    ({"identity_fields": (" order_id",)}, r"identity_fields=\(' order_id',\): allowed"),
    ({"identity_fields": "order_id"}, r"identity_fields='order_id' \(str\): allowed a sequence of field names"),
    ({"service_name": ""}, r"service_name='': allowed a non-empty name"),
    ({"metrics_namespace": "AWS/Lambda"}, r"metrics_namespace='AWS/Lambda': allowed a non-empty namespace"),
    ({"oldest_message_age_threshold": seconds(0)}, r"oldest_message_age_threshold=0s: allowed more than 0"),
    (
        {"oldest_message_age_threshold": days(4)},
        r"oldest_message_age_threshold=4 days: must be less than retention_period \(4 days\)",
    ),
    ({"alarm_evaluation_periods": 0}, r"alarm_evaluation_periods=0: allowed 1 or more"),
]


@pytest.mark.parametrize(("props", "message"), INVALID_PROPS, ids=[message for _, message in INVALID_PROPS])
def test_invalid_prop_raises_value_error_naming_prop_value_and_allowed(
    fresh_stack: cdk.Stack, props: dict[str, Any], message: str
) -> None:
    # GIVEN a prop outside what is allowed
    # WHEN the construct is created
    # THEN it raises ValueError naming the prop, the value received and what is allowed
    with pytest.raises(ValueError, match=message):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)


def test_every_problem_is_reported_at_once(fresh_stack: cdk.Stack) -> None:
    # GIVEN three bad props
    # WHEN the construct is created
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(fresh_stack, "Pipeline", max_receive_count=0, memory_size=1, batch_size=0)
    # THEN one error lists all three, with the construct's path
    message = str(raised.value)
    assert "TestStack/Pipeline" in message
    for prop in ("max_receive_count=0", "memory_size=1", "batch_size=0"):
        assert prop in message


def test_visibility_timeout_cannot_be_derived_from_a_token_timeout(fresh_stack: cdk.Stack) -> None:
    # GIVEN a function timeout that is a token and no visibility timeout
    timeout = cdk.CfnParameter(fresh_stack, "Timeout", type="Number").value_as_number
    # WHEN the construct is created
    # THEN it asks for visibility_timeout explicitly instead of guessing
    with pytest.raises(ValueError, match=r"visibility_timeout=None: cannot be derived .* give visibility_timeout"):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", function_timeout=seconds(timeout))


def test_tokens_are_not_validated(fresh_stack: cdk.Stack) -> None:
    # GIVEN numbers and durations that are only known at deploy time (CloudFormation parameters)
    def number(name: str) -> float:
        return cdk.CfnParameter(fresh_stack, name, type="Number").value_as_number

    # WHEN the construct is created with them
    IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        batch_size=int(number("BatchSize")),
        max_receive_count=int(number("MaxReceiveCount")),
        max_concurrency=int(number("MaxConcurrency")),
        memory_size=int(number("MemorySize")),
        function_timeout=seconds(number("FunctionTimeout")),
        visibility_timeout=seconds(number("VisibilityTimeout")),
        retention_period=seconds(number("RetentionPeriod")),
        record_retention=seconds(number("RecordRetention")),
        oldest_message_age_threshold=seconds(number("AgeThreshold")),
        alarm_evaluation_periods=int(number("EvaluationPeriods")),
        metrics_namespace=cdk.CfnParameter(fresh_stack, "Namespace").value_as_string,
    )
    template = Template.from_stack(fresh_stack)
    # THEN nothing is checked at synth, and the parameters reach the resources
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "VisibilityTimeout": {"Ref": "VisibilityTimeout"},
            "MessageRetentionPeriod": {"Ref": "RetentionPeriod"},
            "RedrivePolicy": {"deadLetterTargetArn": Match.any_value(), "maxReceiveCount": {"Ref": "MaxReceiveCount"}},
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "MemorySize": {"Ref": "MemorySize"},
            "Timeout": {"Ref": "FunctionTimeout"},
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "RECORD_TTL_SECONDS": {"Ref": "RecordRetention"},
                        "POWERTOOLS_METRICS_NAMESPACE": {"Ref": "Namespace"},
                    }
                )
            },
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"BatchSize": {"Ref": "BatchSize"}, "ScalingConfig": {"MaximumConcurrency": {"Ref": "MaxConcurrency"}}},
    )


@pytest.fixture(scope="module")
def warned_stack() -> cdk.Stack:
    """A pipeline with props that are allowed but risky."""
    stack = cdk.Stack(cdk.App(), "WarnedStack")
    IdempotentOrderPipeline(stack, "Pipeline", max_receive_count=3, visibility_timeout=seconds(60))
    return stack


def test_low_max_receive_count_adds_a_warning(warned_stack: cdk.Stack) -> None:
    # GIVEN max_receive_count=3 (allowed, below the recommended 5)
    # WHEN the stack's annotations are read
    # THEN the construct carries a warning naming the prop, the value and the risk
    Annotations.from_stack(warned_stack).has_warning(
        "/WarnedStack/Pipeline",
        Match.string_like_regexp(r"max_receive_count=3 is below 5: a transient failure .* dead-letter queue"),
    )


def test_visibility_timeout_below_six_times_the_function_timeout_adds_a_warning(warned_stack: cdk.Stack) -> None:
    # GIVEN visibility_timeout=60s with a 30-second function timeout (allowed, below 6x = 180s)
    # WHEN the stack's annotations are read
    # THEN the construct carries a warning naming both values
    Annotations.from_stack(warned_stack).has_warning(
        "/WarnedStack/Pipeline",
        Match.string_like_regexp(r"visibility_timeout=1 minute is below 6x function_timeout \(3 minutes\)"),
    )


def test_defaults_add_no_warning(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    # WHEN its annotations are read
    # THEN there is no warning (and no error)
    annotations = Annotations.from_stack(default_pipeline.stack)
    annotations.has_no_warning("*", Match.any_value())
    annotations.has_no_error("*", Match.any_value())


def _keyword_props() -> dict[str, inspect.Parameter]:
    parameters = inspect.signature(IdempotentOrderPipeline.__init__).parameters
    return {name: p for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def _code_default(value: object) -> str:
    """A default as the props table writes it: ``Duration.days(4)``, ``RemovalPolicy.RETAIN``, ``("order_id",)``."""
    if isinstance(value, cdk.Duration):
        total = int(value.to_seconds())
        unit, size = next(
            (u, s) for u, s in (("days", 86_400), ("hours", 3600), ("minutes", 60), ("seconds", 1)) if not total % s
        )
        return f"Duration.{unit}({total // size})"
    if isinstance(value, Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value).replace("'", '"')


def test_the_signature_takes_every_default_from_the_props_dataclass() -> None:
    # GIVEN the constructor's keyword-only parameters and PipelineProps' fields
    props = _keyword_props()
    dataclass_fields = {field.name: field for field in fields(PipelineProps)}
    # WHEN they are compared, the deprecated alarm_action aside
    assert props.pop("alarm_action").default is None
    # THEN the names, their order, the type annotations and the default values are the same
    assert list(props) == list(dataclass_fields) == list(PROP_NAMES)
    for name, parameter in props.items():
        assert parameter.annotation == dataclass_fields[name].type, name
        assert parameter.default is getattr(DEFAULTS, name), name


def test_every_prop_states_its_default_in_the_docstring() -> None:
    # GIVEN the class docstring and the props' defaults (Durations and enums included)
    docstring = inspect.getdoc(IdempotentOrderPipeline) or ""
    documented = dict(re.findall(r":param (\w+): (.*?)(?=\n:param |\Z)", docstring, flags=re.DOTALL))
    # WHEN each prop's documentation is read
    # THEN every prop is documented, and its "Default:" starts with the default value (``30 seconds``, ...)
    assert set(_keyword_props()) <= set(documented)
    for name in PROP_NAMES:
        text = " ".join(documented[name].split())
        assert "Default:" in text, name
        stated = text.split("Default:", 1)[1].strip()
        assert stated.startswith(describe_default(getattr(DEFAULTS, name))), (name, stated)
        assert re.match(r"[\s.,(]|$", stated.removeprefix(describe_default(getattr(DEFAULTS, name)))), (name, stated)


def test_docs_props_tables_are_the_props_declarations() -> None:
    # GIVEN the props tables of docs/construct.md and docs/subscriber.md
    from tools import props_docs

    for path, props_class in props_docs.pages().items():
        page = path.read_text()
        # WHEN each is made anew from its props class
        made = props_docs.with_table(page, props_class)
        # THEN the page already holds it (make docs writes it), one row per prop starting with its default
        assert made == page, f"{path.name}: run make docs"
        rows = dict(
            re.findall(
                r"^\| `(\w+)` \| (.+?) \|",
                page.split(props_docs.BEGIN.format(name=props_class.__name__))[1].split(props_docs.END)[0],
                flags=re.MULTILINE,
            )
        )
        assert set(rows) == {field.name for field in fields(props_class)}
    section = (REPO / "docs" / "construct.md").read_text().split("\n## Props\n", 1)[1]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+?) \|", section, flags=re.MULTILINE))
    for name in PROP_NAMES:
        assert rows[name].startswith(f"`{_code_default(getattr(DEFAULTS, name))}`"), (name, rows[name])


def test_a_stale_props_table_is_found() -> None:
    # GIVEN a page whose table lacks a prop
    from tools import props_docs

    begin = props_docs.BEGIN.format(name=PipelineProps.__name__)
    page = f"intro\n{begin}\n| Prop | Default | What it does |\n{props_docs.END}\nrest\n"
    # WHEN it is made anew / THEN the table changes, and what is around it stays
    made = props_docs.with_table(page, PipelineProps)
    assert made != page
    assert made.startswith(f"intro\n{begin}\n")
    assert made.endswith(f"{props_docs.END}\nrest\n")
    assert "| `fifo` | `False` (standard) |" in made


@pytest.mark.parametrize("size", [1023, 262_145, 1_048_576])
def test_max_message_size_outside_what_the_consumer_handles_is_refused(fresh_stack: cdk.Stack, size: int) -> None:
    # GIVEN / WHEN a max_message_size SQS or the consumer cannot take / THEN synth names it and the range
    with pytest.raises(ValueError, match=r"max_message_size=.*: allowed a whole number of bytes from 1024 to 262144"):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", max_message_size=size)


def test_max_message_size_that_is_not_a_whole_number_is_refused_by_type(fresh_stack: cdk.Stack) -> None:
    # GIVEN / WHEN a fractional max_message_size / THEN synth names the prop, the value and its type
    with pytest.raises(ValueError, match=r"max_message_size=2048\.5 \(float\): allowed int"):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", max_message_size=2048.5)  # type: ignore[arg-type]
