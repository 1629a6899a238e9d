"""``order_schema``, ``notification_attributes``, ``notification_body`` and filter policies at synth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsonschema
import pytest
from aws_cdk import aws_sns_subscriptions, aws_sqs
from aws_cdk.assertions import Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline.discovery import pipelines_in
from idempotent_order_pipeline.errors import SchemaViolationError
from idempotent_order_pipeline.order_schema import compile_order_schema
from tests.consumer.test_order_schema import ORDER_SCHEMA
from tests.infra.synth import logical_id, resources_of_type


def pipeline(stack: cdk.Stack, **props: Any) -> IdempotentOrderPipeline:
    return IdempotentOrderPipeline(stack, "Pipeline", **props)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"amount": {"type": "numbr"}}}, r"\$\.properties\.amount\.type"),
        ({"properties": {"amount": {"minimum": "0"}}}, r"\$\.properties\.amount\.minimum: '0' is not of type 'number'"),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "required": "order_id"},
            r"\(draft-07\) at \$\.required",
        ),
        (
            {"properties": {"a": {"unevaluatedProperties": False}}},
            r"\$\.properties\.a\.unevaluatedProperties: .*not supported",
        ),
        ({"$ref": "https://example.com/order.json"}, r"\$\.\$ref: .*outside the schema"),
        ({"properties": {"name": {"pattern": "^\\p{Letter}+$"}}}, r"\$\.properties\.name\.pattern: pattern .*\\p"),
        ({"patternProperties": {"^\\p{L}": {}}}, r"\$\.patternProperties\.\^\\p\{L\}: pattern"),
        (
            {"properties": {"host": {"format": "idn-hostname"}}},
            r"\$\.properties\.host\.format: format 'idn-hostname' is not",
        ),
        ({"properties": {"x": {"format": "currency"}}}, r"\$\.properties\.x\.format: format 'currency' is not"),
        (
            {"dependencies": {"a": ["b"]}},
            r"\$\.dependencies: dependencies is not supported in draft 2020-12 \(use dependentRequired",
        ),
        (
            {"$defs": {"a": {"$id": "https://example.com/a"}}, "$ref": "#/$defs/a"},
            r"\$id inside the schema is not supported",
        ),
        ({"$defs": {"loop": {"$ref": "#/$defs/loop"}}, "$ref": "#/$defs/loop"}, r"a \$ref cycle that never reaches"),
        (
            {"properties": {"a": {"$ref": "#/$defs/missing"}}},
            r"\$\.properties\.a\.\$ref: '#/\$defs/missing' points at nothing",
        ),
        ({"$schema": "https://json-schema.org/draft/2019-09/schema"}, r"\$\.\$schema=.*allowed"),
        ("{}", r"='\{\}' \(str\): allowed a JSON Schema as a dict"),
    ],
)
def test_an_invalid_order_schema_is_a_value_error_naming_the_prop_and_the_schema_path(
    fresh_stack: cdk.Stack, schema: Any, message: str
) -> None:
    # GIVEN / WHEN a pipeline with a schema that is invalid, or one the compiled validator cannot enforce
    # THEN synth fails naming order_schema and where in the schema
    with pytest.raises(ValueError, match=r"order_schema.*" + message):
        pipeline(fresh_stack, order_schema=schema)


def test_every_schema_problem_is_named_at_once(fresh_stack: cdk.Stack) -> None:
    # GIVEN a schema with a regex Python cannot read as ECMA-262, a format not asserted and an outside $ref
    schema = {
        "properties": {
            "name": {"pattern": "(?<=a+)\\p{L}"},
            "host": {"format": "idn-hostname"},
            "ref": {"$ref": "other.json"},
        }
    }
    # WHEN / THEN the one ValueError names each, with its schema path
    with pytest.raises(ValueError, match="order_schema") as raised:
        pipeline(fresh_stack, order_schema=schema)
    message = str(raised.value)
    for where in ("$.properties.name.pattern", "$.properties.host.format", "$.properties.ref.$ref"):
        assert f"order_schema: {where}:" in message


#: (the schema of the order's field ``v``, values of ``v``); ``$defs`` are the root's.
DRAFT_2020_CASES: list[tuple[dict[str, Any], list[Any]]] = [
    (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
        [["a", 1], ["a", "b"], ["a", 1, 2], ["a"], []],
    ),
    ({"type": "array", "prefixItems": [{"type": "string"}]}, [["a", 1, None], [1]]),
    (
        {"type": "object", "dependentRequired": {"coupon": ["discount"]}},
        [{"coupon": "x"}, {"coupon": "x", "discount": 1}, {}],
    ),
    (
        {"dependentSchemas": {"coupon": {"required": ["discount"]}}, "properties": {"coupon": {"type": "string"}}},
        [{"coupon": "x"}, {"coupon": "x", "discount": 1}],
    ),
    (
        {"properties": {"sku": {"$ref": "#/$defs/sku", "maxLength": 2}}},
        [{"sku": "AB"}, {"sku": "ABC"}, {"sku": "ab"}, {"sku": 1}],
    ),
]


@pytest.mark.parametrize(("schema", "instances"), DRAFT_2020_CASES)
def test_a_2020_12_schema_is_enforced_with_2020_12_meaning(schema: dict[str, Any], instances: list[Any]) -> None:
    # GIVEN a 2020-12 schema using keywords draft-07 spells otherwise (prefixItems, dependent*, $ref beside others)
    root = {"type": "object", "properties": {"v": schema}, "$defs": {"sku": {"type": "string", "pattern": "^[A-Z]+$"}}}
    compiled = compile_order_schema(root)
    reference = jsonschema.Draft202012Validator(root)
    for instance in instances:
        # WHEN an order holding the instance is checked by the compiled validator and by jsonschema
        body = json.dumps({"v": instance})
        try:
            compiled.check(body)
            accepted = True
        except SchemaViolationError:
            accepted = False
        # THEN both agree
        assert accepted == reference.is_valid({"v": instance}), (schema, instance)


def function_of(stack: cdk.Stack, pipeline: IdempotentOrderPipeline) -> dict[str, Any]:
    resource: dict[str, Any] = Template.from_stack(stack).to_json()["Resources"][logical_id(stack, pipeline.function)]
    return resource


def test_the_schema_ships_in_the_function_asset_and_in_its_discovery_mark(tmp_path: Path) -> None:
    # GIVEN an app with a pipeline that has an order schema and one that has none
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Shop", env=cdk.Environment(account="111111111111", region="eu-west-1"))
    with_schema = IdempotentOrderPipeline(stack, "Orders", order_schema=ORDER_SCHEMA)
    without = IdempotentOrderPipeline(stack, "Returns")
    # WHEN it is synthesized
    assembly = app.synth()
    template = assembly.get_stack_artifact(stack.artifact_id).template
    assets = {
        entry["path"]: tmp_path / entry["path"]
        for entry in json.loads((tmp_path / "Shop.assets.json").read_text())["files"].values()
        if entry["source"]["packaging"] == "zip"
        for entry in [entry["source"] | {"path": entry["source"]["path"]}]
    }
    # THEN the schema's function has its own asset, with the generated validator (stdlib and the asset's contract only)
    code = {
        name: function_of(stack, p)["Properties"]["Code"]["S3Key"]
        for name, p in (("with", with_schema), ("without", without))
    }
    assert code["with"] != code["without"]
    validators = [path / "order_consumer" / "order_schema_validator.py" for path in assets.values()]
    shipped = [path for path in validators if path.exists()]
    assert len(shipped) == 1
    text = shipped[0].read_text()
    assert "def validate(" in text
    imports = {line for line in text.splitlines() if line.startswith(("import ", "from "))}
    assert imports == {
        "import re",
        "from decimal import Decimal",
        "from .contract.order_schema import is_integer, is_multiple, json_key, unique_items",
        "from .contract.schema_formats import FORMATS",
    }
    # AND the schema is in the function's discovery mark, where the CLI finds it; the other pipeline has none
    found = {p.path: p.order_schema for p in pipelines_in(template, {})}
    assert found == {"Orders": ORDER_SCHEMA, "Returns": None}
    # AND only the schema's pipeline has the schema_violations alarm, on its SchemaViolations metric
    assert "schema_violations" in with_schema.alarms
    assert "schema_violations" not in without.alarms
    alarm = template["Resources"][logical_id(stack, with_schema.alarms["schema_violations"])]["Properties"]
    assert (alarm["MetricName"], alarm["Threshold"], alarm["EvaluationPeriods"]) == ("SchemaViolations", 1, 1)


def test_notification_props_reach_both_functions_and_the_reconciler_reads_only_those_fields(
    fresh_stack: cdk.Stack,
) -> None:
    # GIVEN a pipeline sending three attributes (one dotted)
    orders = pipeline(fresh_stack, notification_attributes=["country", "total", "customer.tier"])
    template = Template.from_stack(fresh_stack)
    # WHEN its functions' environments and the reconciler's order-row read are read
    variables = {"NOTIFICATION_ATTRIBUTES": '["country", "total", "customer.tier"]'}
    # THEN both functions get the paths, and the reconciler may read the identity part plus the top-level fields
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "order_consumer.handler.handler", "Environment": {"Variables": Match.object_like(variables)}},
    )
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": "order_consumer.reconciler.handler", "Environment": {"Variables": Match.object_like(variables)}},
    )
    policies = json.dumps(resources_of_type(template.to_json(), "AWS::IAM::Policy"))
    assert '"ReadOrderRows"' in policies
    assert '["order_id", "event_id", "payload_sha256", "country", "total", "customer"]' in policies
    assert orders.notification_format.attributes == ("country", "total", "customer.tier")


def test_the_order_body_lets_the_reconciler_read_the_whole_row(fresh_stack: cdk.Stack) -> None:
    # GIVEN notification_body="order"
    pipeline(fresh_stack, notification_body="order")
    # WHEN the reconciler's policy is read
    statements = [
        s
        for p in resources_of_type(Template.from_stack(fresh_stack).to_json(), "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "ReadOrderRows"
    ]
    # THEN it reads order rows without an attribute condition (the notification is the whole row)
    assert statements
    assert all("Condition" not in s for s in statements)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"notification_attributes": [f"f{i}" for i in range(9)]}, r"9 paths; allowed at most 8"),
        ({"notification_attributes": "country"}, r"allowed a sequence of field paths, e\.g\. .*, not a string"),
        ({"notification_attributes": ["AWS.region"]}, r"'AWS\.region' is not an SNS attribute name"),
        ({"notification_attributes": ["order_id"]}, r"'order_id' is always sent"),
        ({"notification_body": "full"}, r"notification_body='full': allowed 'thin', 'order'"),
        (
            {"order_schema": {"properties": {"customer": {"type": "object"}}}, "notification_attributes": ["customer"]},
            r"'customer' is of type 'object' in the order_schema",
        ),
        (
            {
                "order_schema": {"additionalProperties": False, "properties": {"a": {}}},
                "notification_attributes": ["b"],
            },
            r"'b': 'b' is not a property the order_schema allows",
        ),
        (
            {
                "order_schema": {"properties": {f"f{i}": {"type": "string", "maxLength": 20_000} for i in range(4)}},
                "notification_attributes": [f"f{i}" for i in range(4)],
            },
            r"over SNS's 262144",
        ),
    ],
)
def test_notification_props_sns_cannot_carry_are_value_errors(
    fresh_stack: cdk.Stack, props: dict[str, Any], message: str
) -> None:
    # GIVEN / WHEN notification props SNS (or the schema) rules out / THEN synth names the prop and what is allowed
    with pytest.raises(ValueError, match=message):
        pipeline(fresh_stack, **props)


def test_add_subscription_takes_a_filter_policy_on_attributes_or_body(fresh_stack: cdk.Stack) -> None:
    # GIVEN a pipeline sending country and total, with the whole order as the body
    orders = pipeline(fresh_stack, notification_attributes=["country", "total"], notification_body="order")
    fulfilment, loyalty = aws_sqs.Queue(fresh_stack, "Fulfilment"), aws_sqs.Queue(fresh_stack, "Loyalty")
    # WHEN subscriptions are added with filter policies
    orders.add_subscription(aws_sns_subscriptions.SqsSubscription(fulfilment), filter_policy={"country": ["DE"]})
    orders.add_subscription(
        aws_sns_subscriptions.SqsSubscription(loyalty),
        filter_policy={"customer": {"tier": ["gold"]}},
        filter_policy_scope="MessageBody",
    )
    # THEN each subscription carries its policy and scope
    template = Template.from_stack(fresh_stack)
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"FilterPolicy": {"country": ["DE"]}, "FilterPolicyScope": "MessageAttributes"}
    )
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"FilterPolicy": {"customer": {"tier": ["gold"]}}, "FilterPolicyScope": "MessageBody"}
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"filter_policy": {"tier": ["gold"]}},
            r"filter_policy on \['tier'\]: no notification carries such an attribute",
        ),
        (
            {"filter_policy": {"customer": {"tier": ["gold"]}}, "filter_policy_scope": "MessageBody"},
            r"the thin body has only",
        ),
        ({"filter_policy": {"country": ["DE"]}, "filter_policy_scope": "Body"}, r"filter_policy_scope='Body': allowed"),
        (
            {"filter_policy": {"$or": [{"a": [1]}, {"b": [1]}], "c": [1], "d": [1], "e": [1], "f": [1]}},
            r"names 6 fields",
        ),
    ],
)
def test_a_filter_policy_on_what_no_notification_carries_is_refused(
    fresh_stack: cdk.Stack, kwargs: dict[str, Any], message: str
) -> None:
    # GIVEN a pipeline sending country only, with the thin body
    orders = pipeline(fresh_stack, notification_attributes=["country"])
    # WHEN / THEN a policy that could never match (or SNS would refuse) is a ValueError saying why
    with pytest.raises(ValueError, match=message):
        orders.add_subscription(aws_sns_subscriptions.SqsSubscription(aws_sqs.Queue(fresh_stack, "Q")), **kwargs)
