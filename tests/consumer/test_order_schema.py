"""``order_schema`` in the consumer: a violation is parked at once, before any write, with its path and rule."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.order_schema import (
    VALIDATOR_MODULE,
    SchemaRuleError,
    SchemaRulesError,
)
from idempotent_order_pipeline.order_schema import validator_code
from tests.consumer.harness import World, sqs_record

ASSET_PACKAGE = "idempotent_order_pipeline._lambda_asset.order_consumer"

#: A realistic order: nested customer, items, a total, a country.
ORDER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["order_id", "amount", "customer", "items"],
    "properties": {
        "order_id": {"type": "string", "minLength": 1},
        "amount": {"type": "number", "minimum": 0},
        "country": {"type": "string", "enum": ["DE", "FR", "NL"]},
        "customer": {
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"type": "string"}, "tier": {"enum": ["gold", "silver"]}},
        },
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "quantity"],
                "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
            },
        },
    },
}


def good_order(order_id: str = "o-1", **changes: Any) -> dict[str, Any]:
    order = {
        "order_id": order_id,
        "amount": 12.5,
        "country": "DE",
        "customer": {"id": "c-1", "tier": "gold"},
        "items": [{"sku": "A", "quantity": 2}],
    }
    return {**order, **changes}


def install_validator(monkeypatch: pytest.MonkeyPatch, schema: Mapping[str, Any]) -> None:
    """The generated validator as the asset of a pipeline with this schema carries it (its module, importable)."""
    name = f"{ASSET_PACKAGE}.{VALIDATOR_MODULE}"
    module = types.ModuleType(name)
    module.__package__ = ASSET_PACKAGE
    exec(compile(validator_code(schema), name, "exec"), module.__dict__)  # noqa: S102 - generated from the test's schema
    monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture
def schema_world(make_world: Callable[..., World], monkeypatch: pytest.MonkeyPatch) -> World:
    install_validator(monkeypatch, ORDER_SCHEMA)
    return make_world()


def emitted_metrics(output: str) -> dict[str, float]:
    """The EMF metrics the handler printed (name -> value)."""
    values: dict[str, float] = {}
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            document = json.loads(line)
            for definition in document["_aws"]["CloudWatchMetrics"]:
                for metric in definition["Metrics"]:
                    value = document[metric["Name"]]
                    values[metric["Name"]] = sum(value) if isinstance(value, list) else value
    return values


@pytest.mark.parametrize(
    ("order", "path_and_rule"),
    [
        (good_order(amount=-5), "$.amount must be bigger than or equal to 0 (rule: minimum)"),
        (good_order(amount="12.50"), "$.amount must be number (rule: type)"),
        (good_order(customer={"tier": "gold"}), "$.customer must contain ['id'] properties (rule: required)"),
        (
            good_order(items=[{"sku": "A", "quantity": 1}, {"sku": "B", "quantity": 1.5}]),
            "$.items[1].quantity must be integer (rule: type)",
        ),
        (good_order(country="US"), "$.country must be one of ['DE', 'FR', 'NL'] (rule: enum)"),
    ],
)
def test_an_order_that_breaks_the_schema_is_parked_at_once_naming_the_path_and_rule(
    schema_world: World, capsys: pytest.CaptureFixture[str], order: dict[str, Any], path_and_rule: str
) -> None:
    # GIVEN a pipeline with an order schema, and an order that breaks it, on its first receive
    record = sqs_record(order)
    capsys.readouterr()
    # WHEN the consumer processes it
    response = schema_world.invoke([record])
    # THEN it is acknowledged (never retried) and parked with SCHEMA_VIOLATION, the path and the rule
    assert response == {"batchItemFailures": []}
    [parked] = schema_world.dead_letters()
    attributes = parked["MessageAttributes"]
    assert attributes["error_code"]["StringValue"] == "SCHEMA_VIOLATION"
    assert attributes["error_message"]["StringValue"] == f"the order does not match order_schema: {path_and_rule}"
    # AND nothing was written or announced: the check runs before any write
    assert schema_world.order_rows() == {}
    assert schema_world.event_records() == {}
    assert schema_world.board.calls["transact_write_items"] == 0
    assert schema_world.new_notifications() == []
    # AND it counts in SchemaViolations, not InvalidMessages
    metrics = emitted_metrics(capsys.readouterr().out)
    assert (metrics["SchemaViolations"], metrics["InvalidMessages"], metrics["OrdersRecorded"]) == (1, 0, 0)


def test_orders_that_match_the_schema_are_recorded_next_to_a_violation(schema_world: World) -> None:
    # GIVEN a batch with two good orders and one that breaks the schema
    records = [sqs_record(good_order("o-1")), sqs_record(good_order("o-2", amount=-1)), sqs_record(good_order("o-3"))]
    # WHEN it is processed
    response = schema_world.invoke(records)
    # THEN the good ones are recorded and notified, the bad one parked; none is retried
    assert response == {"batchItemFailures": []}
    assert set(schema_world.order_rows()) == {"o-1", "o-3"}
    assert sorted(json.loads(n["Message"])["order_id"] for n in schema_world.new_notifications()) == ["o-1", "o-3"]
    assert [p["MessageAttributes"]["error_code"]["StringValue"] for p in schema_world.dead_letters()] == [
        "SCHEMA_VIOLATION"
    ]


def test_the_message_contract_is_checked_before_the_schema(schema_world: World) -> None:
    # GIVEN an order that breaks both the message contract (no order_id) and the schema
    record = sqs_record({"amount": -1})
    # WHEN it is processed
    schema_world.invoke([record])
    # THEN it is parked for the contract (the producer, which checks in the same order, says the same)
    [parked] = schema_world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"


def test_without_a_schema_any_order_the_contract_accepts_is_recorded_as_before(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a pipeline without a schema (no validator in its asset) and an order the schema above refuses
    capsys.readouterr()
    # WHEN it is processed
    response = world.invoke([sqs_record(good_order(amount=-5))])
    # THEN it is recorded and announced, and no SchemaViolations metric is emitted
    assert response == {"batchItemFailures": []}
    assert set(world.order_rows()) == {"o-1"}
    assert len(world.new_notifications()) == 1
    assert world.dead_letters() == []
    metrics = emitted_metrics(capsys.readouterr().out)
    assert metrics["OrdersRecorded"] == 1
    assert "SchemaViolations" not in metrics


def test_several_broken_rules_are_one_error_naming_each() -> None:
    # GIVEN two rules an order breaks, as the generated code's collect-all mode reports them
    rules = [
        SchemaRuleError("$.amount must be number", rule="type"),
        SchemaRuleError("$.items must contain at least 1 items", rule="minItems"),
    ]
    # WHEN they make one error
    error = SchemaRulesError(rules)
    # THEN its message names each, in order, and it keeps them
    assert str(error) == error.message == "$.amount must be number; $.items must contain at least 1 items"
    assert error.errors == rules


#: Issue 31's repros, as the consumer's entry point sees them: a schema whose verdicts float, regexes
#: and annotations used to get wrong, and orders on each side of each rule.
TRUSTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "country": {"type": "string"},
        "currency": {"type": "string", "default": "EUR"},
        "gift": {"type": "object", "properties": {"wrap": {"default": True}}, "not": {"required": ["wrap"]}},
        "amount": {"type": "number", "maximum": 100},
        "quantity": {"type": "integer"},
        "share": {"exclusiveMaximum": 1},
        "postcode": {"pattern": "^\\d{5}$"},
        "email": {"format": "email"},
    },
    "if": {"properties": {"country": {"const": "US"}}, "required": ["country"]},
    "then": {"required": ["currency"]},
}


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"country": "US"}, "$ must contain ['currency'] properties (rule: required)"),
        ({"amount": "__100.0000000000000000001__"}, "$.amount must be smaller than or equal to 100 (rule: maximum)"),
        ({"quantity": "__1.0000000000000000001__"}, "$.quantity must be integer (rule: type)"),
        ({"postcode": "\u0661\u0662\u0663\u0664\u0665"}, "$.postcode must match pattern ^\\d{5}$ (rule: pattern)"),
        ({"postcode": "12345\n"}, "$.postcode must match pattern ^\\d{5}$ (rule: pattern)"),
        ({"email": "a@b.c\n"}, "$.email must be email (rule: format)"),
    ],
)
def test_the_consumer_parks_what_the_schema_refuses_whatever_defaults_floats_or_python_regexes_say(
    make_world: Callable[..., World], monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], rule: str
) -> None:
    # GIVEN a pipeline with the schema (its asset's validator), and an order that breaks one rule:
    # a default that must not count as present, a number past a bound only in its 20th digit, an
    # Arabic-Indic digit or a final newline that Python's regexes would let through
    install_validator(monkeypatch, TRUSTED_SCHEMA)
    world = make_world()
    text = json.dumps({"order_id": "o-1", **fields})
    for literal in ("100.0000000000000000001", "1.0000000000000000001"):
        text = text.replace(f'"__{literal}__"', literal)
    # WHEN the consumer processes it
    world.invoke([sqs_record(text)])
    # THEN it is parked with SCHEMA_VIOLATION naming that rule, and nothing is written
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "SCHEMA_VIOLATION"
    assert (
        parked["MessageAttributes"]["error_message"]["StringValue"] == f"the order does not match order_schema: {rule}"
    )
    assert world.order_rows() == {}


def test_the_consumer_records_what_the_schema_allows_and_stores_it_unchanged(
    make_world: Callable[..., World], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the same pipeline, and orders the schema allows: an empty gift (its default is no property),
    # a share of 0.99999999999999999999 (below 1, though a float rounds it to 1), a US order with a currency
    install_validator(monkeypatch, TRUSTED_SCHEMA)
    world = make_world()
    bodies = [
        json.dumps({"order_id": "o-1", "gift": {}}),
        '{"order_id": "o-2", "share": 0.99999999999999999999}',
        json.dumps({"order_id": "o-3", "country": "US", "currency": "USD", "amount": 100}),
    ]
    # WHEN the consumer processes them
    response = world.invoke([sqs_record(b) for b in bodies])
    # THEN all three are recorded, none parked, and no default was written into a row
    assert response == {"batchItemFailures": []}
    assert world.dead_letters() == []
    rows = world.order_rows()
    assert set(rows) == {"o-1", "o-2", "o-3"}
    assert "wrap" not in json.dumps(rows["o-1"], default=str)
    assert "currency" not in rows["o-1"]
