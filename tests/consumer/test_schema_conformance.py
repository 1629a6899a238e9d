"""``order_schema``'s verdicts, keyword by keyword: what JSON Schema says, checked by the code the consumer runs.

Each case is a schema for the order's field ``v`` (draft 2020-12 unless it says ``$schema``), with
instances it allows and instances it refuses. Every instance is checked by the generated validator
(``compile_order_schema``: the code the construct ships in the asset, run on the message body), so a
wrong verdict in either direction fails. The edge cases of issue 31 are here: annotations that must
not decide, exact numbers at DynamoDB's 38 digits, ECMA-262 regexes, formats checked to their RFC.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.order_schema import (
    MAX_LISTED_VIOLATIONS,
    VIOLATION_PREFIX,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import MAX_ERROR_MESSAGE_CHARS
from idempotent_order_pipeline.errors import SchemaViolationError
from idempotent_order_pipeline.order_schema import compile_order_schema

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def order_schema(field_schema: Any, dialect: str | None = None, **root: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"v": field_schema}, **root}
    return {"$schema": dialect, **schema} if dialect else schema


def body(value: Any) -> str:
    """An order whose field ``v`` is ``value``; a number given as text is written as that literal."""
    text = json.dumps({"order_id": "o-1", "v": "__V__"})
    literal = value.literal if isinstance(value, Literal) else json.dumps(value)
    return text.replace('"__V__"', literal)


class Literal:
    """A JSON number written exactly as given (more digits than a float has)."""

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def __repr__(self) -> str:
        return self.literal


#: (case name, schema of ``v``, root keywords, allowed values, refused values)
CASES: list[tuple[str, Any, dict[str, Any], list[Any], list[Any]]] = [
    ("type string", {"type": "string"}, {}, ["", "a"], [1, None, True, [], {}]),
    ("type integer: 1.0 is one", {"type": "integer"}, {}, [1, 1.0, -5, 2**70], [1.5, "1", True, None]),
    ("type number", {"type": "number"}, {}, [0, 1.5, -1e-5], ["1", True, None, []]),
    ("type boolean", {"type": "boolean"}, {}, [True, False], [0, 1, "true", None]),
    ("type null", {"type": "null"}, {}, [None], [0, False, ""]),
    ("type list", {"type": ["string", "null"]}, {}, ["a", None], [1, {}]),
    (
        "enum: JSON equality",
        {"enum": [1, "a", None, {"k": [1]}]},
        {},
        [1, 1.0, "a", None, {"k": [1.0]}],
        [True, "b", 2, {"k": [2]}],
    ),
    ("enum: false is not 0", {"enum": [False]}, {}, [False], [0, 0.0, None]),
    (
        "enum: members are values, never references",
        {"enum": [{"$ref": "#/$defs/a"}]},
        {"$defs": {"a": {}}},
        [{"$ref": "#/$defs/a"}],
        ["x"],
    ),
    ("const null", {"const": None}, {}, [None], [0, False, ""]),
    ("const object", {"const": {"a": 1, "b": [True]}}, {}, [{"b": [True], "a": 1.0}], [{"a": 1}, {"a": 1, "b": [1]}]),
    ("minimum / maximum", {"minimum": 0, "maximum": 100}, {}, [0, 100, 50.5, "x"], [-1, 100.5, -0.0001]),
    ("exclusive bounds", {"exclusiveMinimum": 0, "exclusiveMaximum": 1}, {}, [0.5], [0, 1]),
    ("multipleOf decimal", {"multipleOf": 0.01}, {}, [0.07, 1, 19.99], [0.075, 1.001]),
    ("multipleOf integer", {"multipleOf": 3}, {}, [0, 9, -3], [10, 1.5]),
    (
        "minLength / maxLength count code points",
        {"minLength": 2, "maxLength": 3},
        {},
        ["ab", "\U0001f600\U0001f600", 1],
        ["a", "abcd"],
    ),
    ("pattern is searched, not anchored", {"pattern": "b+"}, {}, ["abbc", 1], ["ac"]),
    (
        "minItems / maxItems / uniqueItems",
        {"minItems": 1, "maxItems": 3, "uniqueItems": True},
        {},
        [[1], [1, "1", True]],
        [[], [1, 2, 3, 4], [1, 1.0], [{"a": 1}, {"a": 1}]],
    ),
    ("items", {"items": {"type": "integer"}}, {}, [[], [1, 2]], [[1, "a"]]),
    (
        "prefixItems with items false",
        {"prefixItems": [{"type": "string"}, {"type": "number"}], "items": False},
        {},
        [["a", 1], ["a"], []],
        [["a", "b"], ["a", 1, 2]],
    ),
    ("contains", {"contains": {"type": "string"}}, {}, [["a", 1], "x"], [[1, 2], []]),
    (
        "minContains / maxContains",
        {"contains": {"const": 1}, "minContains": 2, "maxContains": 3},
        {},
        [[1, 1], [1, 1, 1, 2]],
        [[1], [1, 1, 1, 1]],
    ),
    ("minContains 0", {"contains": {"const": 1}, "minContains": 0}, {}, [[], [2]], []),
    ("required", {"required": ["a", "b"]}, {}, [{"a": 1, "b": 2}, "x"], [{"a": 1}, {}]),
    ("properties", {"properties": {"a": {"type": "string"}}}, {}, [{"a": "x"}, {"b": 1}], [{"a": 1}]),
    (
        "patternProperties",
        {"patternProperties": {"^x-": {"type": "integer"}}},
        {},
        [{"x-a": 1, "y": "s"}],
        [{"x-a": "s"}],
    ),
    (
        "additionalProperties beside properties and patterns",
        {"properties": {"a": {}}, "patternProperties": {"^x": {}}, "additionalProperties": False},
        {},
        [{"a": 1, "xy": 2}],
        [{"b": 1}],
    ),
    ("propertyNames", {"propertyNames": {"maxLength": 3}}, {}, [{"abc": 1}], [{"abcd": 1}]),
    ("min / maxProperties", {"minProperties": 1, "maxProperties": 2}, {}, [{"a": 1}], [{}, {"a": 1, "b": 2, "c": 3}]),
    (
        "dependentRequired",
        {"dependentRequired": {"coupon": ["discount"]}},
        {},
        [{}, {"coupon": 1, "discount": 1}],
        [{"coupon": 1}],
    ),
    (
        "dependentSchemas",
        {"dependentSchemas": {"coupon": {"required": ["discount"]}}},
        {},
        [{"discount": 1}, {}],
        [{"coupon": 1}],
    ),
    ("allOf", {"allOf": [{"minimum": 1}, {"maximum": 2}]}, {}, [1, 2], [0, 3]),
    ("anyOf", {"anyOf": [{"type": "string"}, {"minimum": 10}]}, {}, ["a", 10], [1]),
    ("oneOf", {"oneOf": [{"minimum": 1}, {"maximum": 5}]}, {}, [0, 6], [3]),
    ("not", {"not": {"type": "string"}}, {}, [1], ["a"]),
    (
        "if / then / else",
        {"if": {"minimum": 10}, "then": {"multipleOf": 10}, "else": {"maximum": 5}},
        {},
        [20, 3],
        [15, 7],
    ),
    ("boolean schemas", {"properties": {"t": True, "f": False}}, {}, [{"t": 1}], [{"f": 1}]),
    (
        "$ref beside other keywords (2020-12)",
        {"$ref": "#/$defs/s", "maxLength": 2},
        {"$defs": {"s": {"type": "string"}}},
        ["ab"],
        ["abc", 1],
    ),
    (
        "$ref recursive",
        {"$ref": "#/$defs/tree"},
        {
            "$defs": {
                "tree": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
                    "required": ["n"],
                }
            }
        },
        [{"n": 1, "kids": [{"n": 2, "kids": []}]}],
        [{"n": 1, "kids": [{"kids": []}]}],
    ),
    ("$ref to an $anchor", {"$ref": "#sku"}, {"$defs": {"s": {"$anchor": "sku", "pattern": "^S"}}}, ["S1"], ["X1"]),
    (
        "$ref into prefixItems",
        {"prefixItems": [{"type": "string"}], "items": {"$ref": "#/properties/v/prefixItems/0"}},
        {},
        [["a", "b"]],
        [["a", 1]],
    ),
    # Annotations never decide, and the data is never changed.
    (
        "default is not injected",
        {
            "properties": {"country": {"type": "string"}, "currency": {"type": "string", "default": "EUR"}},
            "if": {"properties": {"country": {"const": "US"}}, "required": ["country"]},
            "then": {"required": ["currency"]},
        },
        {},
        [{"country": "US", "currency": "USD"}, {"country": "DE"}],
        [{"country": "US"}],
    ),
    (
        "a default inside a refusing subschema changes nothing",
        {
            "properties": {
                "gift": {"type": "object", "properties": {"wrap": {"default": True}}, "not": {"required": ["wrap"]}}
            }
        },
        {},
        [{"gift": {}}],
        [{"gift": {"wrap": False}}],
    ),
    (
        "annotations",
        {"title": "t", "description": "d", "examples": [1], "deprecated": True, "readOnly": True, "$comment": "c"},
        {},
        ["anything", 1],
        [],
    ),
    (
        "content* are annotations in 2020-12",
        {"contentMediaType": "application/json", "contentEncoding": "base64"},
        {},
        ["{not json", "%%%"],
        [],
    ),
    # Exact numbers (DynamoDB keeps 38 digits).
    (
        "maximum, exactly",
        {"maximum": 100},
        {},
        [Literal("100.00000000000000000000000000000000000")],
        [Literal("100.0000000000000000001")],
    ),
    (
        "integer, exactly",
        {"type": "integer"},
        {},
        [Literal("1.0000000000000000000000000000000000000")],
        [Literal("1.0000000000000000001")],
    ),
    (
        "exclusiveMaximum, exactly",
        {"exclusiveMaximum": 1},
        {},
        [Literal("0.99999999999999999999999999999999999999")],
        [Literal("1.0")],
    ),
    (
        "38 significant digits",
        {"minimum": Literal("12345678901234567890123456789012345678")},
        {},
        [Literal("12345678901234567890123456789012345678")],
        [Literal("12345678901234567890123456789012345677")],
    ),
    (
        "multipleOf, exactly",
        {"multipleOf": 0.1},
        {},
        [Literal("0.3"), Literal("1E+2")],
        [Literal("0.30000000000000000000000000000000000001")],
    ),
    # ECMA-262 regexes.
    ("\\d is ASCII", {"pattern": "^\\d+$"}, {}, ["123"], ["\u0661\u0662", "12\n"]),
    ("\\w is ASCII", {"pattern": "^\\w+$"}, {}, ["a_1"], ["\u00e9"]),
    ("$ is the end of the input", {"pattern": "^[a-z]+$"}, {}, ["abc"], ["abc\n"]),
    ("\\s is ECMA's white space", {"pattern": "^\\s$"}, {}, ["\ufeff", "\u2028", " "], ["\x1c"]),
    ("dot excludes line terminators", {"pattern": "^.$"}, {}, ["a", "\U0001f600"], ["\n", "\r", "\u2028"]),
    ("named groups and back references", {"pattern": "^(?<x>a)\\k<x>$"}, {}, ["aa"], ["ab"]),
    # format, asserted.
    (
        "format email",
        {"format": "email"},
        {},
        ["a@b.c", '"a b"@example.com', "x@[127.0.0.1]", 1],
        ["a@b.c\n", "a..b@c.d", "@b.c"],
    ),
    (
        "format date-time",
        {"format": "date-time"},
        {},
        ["1998-12-31T23:59:60Z", "2020-02-29T10:00:00+01:00"],
        ["1998-12-31T22:59:60Z", "2021-02-29T10:00:00Z", "2020-01-01T10:00:00"],
    ),
    ("format time", {"format": "time"}, {}, ["23:59:60Z", "15:59:60-08:00"], ["22:59:60+00:00", "12:00:00"]),
    ("format date", {"format": "date"}, {}, ["2020-02-29"], ["2100-02-29", "2020-1-01"]),
    (
        "format duration",
        {"format": "duration"},
        {},
        ["P1Y2M3DT4H5M6S", "P2W", "PT36H"],
        ["P1YT", "PT", "P1Y2W", "PT1H2S"],
    ),
    (
        "format uuid",
        {"format": "uuid"},
        {},
        ["2EB8AA08-AA98-11EA-B4AA-73B441D16380"],
        ["2eb8aa08aa9811eab4aa73b441d16380", "\u09e8eb8aa08-aa98-11ea-b4aa-73b441d16380"],
    ),
    (
        "format hostname",
        {"format": "hostname"},
        {},
        ["www.example.com", "a--b.com"],
        ["-a.com", "example.", "xn--X", "a_b"],
    ),
    (
        "format ipv4 / ipv6",
        {"anyOf": [{"format": "ipv4"}, {"format": "ipv6"}], "type": "string"},
        {},
        ["192.168.0.1", "::1", "1::d6:192.168.0.1"],
        ["192.168.0.01", "fe80::a%eth1", "1::d6::42"],
    ),
    (
        "format uri",
        {"format": "uri"},
        {},
        ["http://foo.bar/?baz=qux#quux", "urn:a:b"],
        ["//foo.bar/", "http://example.com/%6G", "https://example.org/foo bar"],
    ),
    ("format uri-reference", {"format": "uri-reference"}, {}, ["/abc", "#frag", ""], ["\\\\WINDOWS\\share", "/%zz"]),
    ("format json-pointer", {"format": "json-pointer"}, {}, ["/a~1b", ""], ["/~2", "a"]),
    ("format relative-json-pointer", {"format": "relative-json-pointer"}, {}, ["0#", "1/a"], ["-1/a", "01#"]),
    ("format regex", {"format": "regex"}, {}, ["^a+$", "(?<n>x)"], ["^(abc]", "\\p{Letter}"]),
    ("format uri-template", {"format": "uri-template"}, {}, ["http://e.com/{term:1}/{term}"], ["{v:0}", "{a,}"]),
    # draft-07: its own meaning.
    (
        "draft-07 items array + additionalItems",
        {"items": [{"type": "string"}], "additionalItems": False},
        {"$schema": DRAFT_07},
        [["a"]],
        [["a", 1], [1]],
    ),
    (
        "draft-07 dependencies",
        {"dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
        {"$schema": DRAFT_07},
        [{"a": 1, "b": 1}, {}],
        [{"a": 1}, {"c": 1}],
    ),
    (
        "draft-07 $ref replaces its siblings",
        {"$ref": "#/definitions/s", "maxLength": 1},
        {"$schema": DRAFT_07, "definitions": {"s": {"type": "string"}}},
        ["abc"],
        [1],
    ),
]


def _schema_json(value: Any) -> Any:
    """The case's schema as a dict (a :class:`Literal` in a schema becomes the int it spells)."""
    if isinstance(value, Literal):
        return int(value.literal)
    if isinstance(value, dict):
        return {name: _schema_json(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_schema_json(item) for item in value]
    return value


@pytest.mark.parametrize(("name", "field_schema", "root", "allowed", "refused"), CASES, ids=[case[0] for case in CASES])
def test_each_keyword_gives_json_schemas_verdict(
    name: str, field_schema: Any, root: dict[str, Any], allowed: list[Any], refused: list[Any]
) -> None:
    # GIVEN a pipeline's order schema whose field v has the case's schema
    compiled = compile_order_schema(order_schema(_schema_json(field_schema), **root))
    # WHEN orders holding each instance are checked by the code the consumer runs
    verdicts = {repr(value): not compiled.violations(body(value)) for value in (*allowed, *refused)}
    # THEN the allowed ones pass and the refused ones do not
    assert verdicts == {**{repr(v): True for v in allowed}, **{repr(v): False for v in refused}}


def test_a_violation_names_every_broken_rule_within_the_parked_messages_limit() -> None:
    # GIVEN a schema with three rules, and one with a rule per field of many fields
    few = compile_order_schema({"properties": {"a": {"type": "string"}, "b": {"minimum": 0}}, "required": ["c"]})
    many = compile_order_schema({"additionalProperties": {"type": "string", "maxLength": 1}})
    # WHEN an order breaks all three, and one breaks 30 rules with long names
    with pytest.raises(SchemaViolationError) as three:
        few.check(json.dumps({"order_id": "o", "a": 1, "b": -1}))
    with pytest.raises(SchemaViolationError) as thirty:
        many.check(json.dumps({"order_id": "o", **{f"field_{i:02d}_" + "x" * 80: 1 for i in range(30)}}))
    # THEN the first message names each rule with its path
    assert str(three.value) == (
        VIOLATION_PREFIX + "$ must contain ['c'] properties (rule: required); $.a must be string (rule: type); "
        "$.b must be bigger than or equal to 0 (rule: minimum)"
    )
    # AND the second names at most MAX_LISTED_VIOLATIONS, says how many more, and fits error_message
    message = str(thirty.value)
    assert len(message) <= MAX_ERROR_MESSAGE_CHARS
    listed = message.count("(rule: ")
    assert 1 <= listed <= MAX_LISTED_VIOLATIONS
    assert message.endswith(f"; and {30 - listed} more")  # one type rule per field
