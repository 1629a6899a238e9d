"""The subscriber examples' CDK stack: two IdempotentSubscribers of the shipped construct, no copied helper."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from tests.examples.conftest import SUBSCRIBER_EXAMPLE


@pytest.fixture(scope="module")
def stack() -> Any:
    spec = importlib.util.spec_from_file_location("subscriber_example_stack", SUBSCRIBER_EXAMPLE / "stack.py")
    assert spec is not None
    assert spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SubscriberStack(cdk.App(), "OrderSubscriberExample")


def test_the_examples_do_not_copy_the_helper() -> None:
    # GIVEN the examples' directory / WHEN its Python files are listed
    files = sorted(path.name for path in SUBSCRIBER_EXAMPLE.rglob("*.py"))
    # THEN only the stack, the app and the two handlers are there: the helper comes from the layer
    assert files == ["app.py", "payments.py", "shipping.py", "stack.py"]


def test_both_handlers_are_subscribed_with_the_layer(stack: Any) -> None:
    # GIVEN / WHEN the example stack is synthesized
    template = Template.from_stack(stack)
    # THEN two functions with the examples' handlers share the stack's one helper layer, and its Powertools layer
    layer = {"Ref": Match.string_like_regexp("IdempotentSubscriberRuntimeLayer")}
    powertools = {"Ref": "PowertoolsLayerArn"}
    for handler in ("shipping.handler", "payments.handler"):
        template.has_resource_properties(
            "AWS::Lambda::Function", {"Handler": handler, "Layers": Match.array_with([layer, powertools])}
        )
    template.resource_count_is("AWS::Lambda::LayerVersion", 1)
    template.resource_count_is("AWS::SNS::Subscription", 2)


def test_the_counter_table_is_granted_to_the_shipping_function_only(stack: Any) -> None:
    # GIVEN the synthesized stack
    template = Template.from_stack(stack)
    counters = stack.resolve(stack.counters.table_arn)
    # WHEN the functions' policies are read
    policies = template.find_resources("AWS::IAM::Policy")
    granted = {
        name
        for name, policy in policies.items()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if counters in (statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]])
    }
    # THEN only the shipping function's role may write the counters
    assert granted
    assert all(name.startswith("ShippingFunctionRole") for name in granted)


@pytest.mark.parametrize("example", ["shipping.py", "payments.py"])
def test_the_docs_show_each_examples_handler_as_written(example: str) -> None:
    # GIVEN an example's handler (from its decorator to the end of the file)
    source = (SUBSCRIBER_EXAMPLE / "subscriber_lambda" / example).read_text()
    handler = source[source.index("@once_per_event") :].strip()
    # WHEN docs/subscriber.md is read / THEN it shows that handler verbatim
    assert handler in (SUBSCRIBER_EXAMPLE.parents[1] / "docs" / "subscriber.md").read_text()
