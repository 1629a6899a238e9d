"""The ``notification_attributes`` and ``notification_body`` props: checked at synth, passed to the functions.

What a notification carries is built by :mod:`order_consumer.contract.notification` (every path that
publishes imports it); this module checks the props against SNS's rules and, where an ``order_schema``
says what a field is, against the schema: a path the schema does not declare (under
``additionalProperties: false``), a field whose type SNS cannot carry, or attributes that could not
fit next to the thin body are errors at synth. Where the schema says nothing (no schema, a ``$ref``,
an open object), the consumer leaves out at run time what SNS cannot carry, never failing a record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_MESSAGE_BYTES
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import MAX_EVENT_ID_BYTES
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import MAX_ORDER_ID_LENGTH
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.notification import (
    BODIES,
    BODY_THIN,
    BUILT_IN_ATTRIBUTES,
    MAX_CONFIGURED_ATTRIBUTES,
    THIN_BODY_FIELDS,
    NotificationFormat,
    attribute_name_problem,
)

#: JSON Schema types SNS can carry as an attribute (String, Number, Number, String.Array).
CARRIED_TYPES = ("string", "number", "integer", "array")
#: The most bytes a Number attribute's text takes (38 digits, sign, point, exponent).
_NUMBER_BYTES = 48
#: The most bytes the thin body and the two built-in attributes take.
_THIN_BYTES = 2 * (MAX_EVENT_ID_BYTES + 4 * MAX_ORDER_ID_LENGTH) + 200


def _declared(schema: Mapping[str, Any], path: str) -> tuple[Mapping[str, Any] | None, str | None]:
    """The subschema the schema declares at ``path`` (None when it cannot tell), or why the path is not there."""
    node: Any = schema
    for name in path.split("."):
        properties = node.get("properties") if isinstance(node, Mapping) else None
        if isinstance(properties, Mapping) and name in properties:
            node = properties[name]
        elif isinstance(node, Mapping) and node.get("additionalProperties") is False:
            return None, f"{name!r} is not a property the order_schema allows there"
        else:
            return None, None  # an open object, a $ref, a combinator: the schema does not say
    return (node if isinstance(node, Mapping) else None), None


def _max_bytes(node: Mapping[str, Any]) -> int | None:
    """The most bytes a value of ``node`` takes as an attribute value, None when unbounded or unknown."""
    kind = node.get("type")
    if kind in ("number", "integer"):
        return _NUMBER_BYTES
    if kind == "string" and isinstance(node.get("maxLength"), int):
        return 4 * int(node["maxLength"]) + 2
    if "enum" in node and all(isinstance(value, str | int | float) for value in node["enum"]):
        return max(4 * len(str(value)) + 2 for value in node["enum"])
    return None


def attribute_problems(attributes: object, body: object, schema: Mapping[str, Any] | None) -> list[str]:
    """Every problem with the two props (empty: none), each naming its prop, the value and what is allowed."""
    problems: list[str] = []
    if body not in BODIES:
        problems.append(f"notification_body={body!r}: allowed {', '.join(repr(b) for b in BODIES)}")
    if isinstance(attributes, str) or not isinstance(attributes, Sequence):
        return [*problems, f"notification_attributes={attributes!r}: allowed a sequence of field paths, not a string"]
    paths = list(attributes)
    if len(paths) > MAX_CONFIGURED_ATTRIBUTES:
        problems.append(
            f"notification_attributes: {len(paths)} paths; allowed at most {MAX_CONFIGURED_ATTRIBUTES} (SNS delivers "
            "10 attributes to an SQS subscription, event_id and order_id among them)"
        )
    if len(set(map(str, paths))) != len(paths):
        problems.append(f"notification_attributes={tuple(paths)!r}: allowed distinct paths")
    problems.extend(f"notification_attributes: {problem}" for p in paths if (problem := attribute_name_problem(p)))
    if problems or schema is None:
        return problems
    bounds: list[int | None] = []
    for path in paths:
        node, missing = _declared(schema, path)
        if missing:
            problems.append(f"notification_attributes: {path!r}: {missing}")
        kind = node.get("type") if node is not None else None
        kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
        if kinds and not set(kinds) & set(CARRIED_TYPES):
            problems.append(
                f"notification_attributes: {path!r} is of type {kind!r} in the order_schema; SNS carries only "
                f"{', '.join(CARRIED_TYPES)} (String, Number, String.Array)"
            )
        bounds.append(_max_bytes(node) if node is not None else None)
    if bounds and all(bound is not None for bound in bounds):
        most = _THIN_BYTES + sum(len(p) + 12 + (b or 0) for p, b in zip(paths, bounds, strict=True))
        if most > MAX_MESSAGE_BYTES:
            problems.append(
                f"notification_attributes: up to {most} bytes with the thin body, over SNS's {MAX_MESSAGE_BYTES}; "
                "allowed fields whose order_schema bounds (maxLength) keep them within it"
            )
    return problems


#: ``add_subscription``'s filter policy scopes (SNS's ``FilterPolicyScope``).
ATTRIBUTES_SCOPE = "MessageAttributes"
BODY_SCOPE = "MessageBody"
FILTER_POLICY_SCOPES = (ATTRIBUTES_SCOPE, BODY_SCOPE)
#: SNS: a filter policy names at most 5 attributes (or body properties).
MAX_FILTER_POLICY_KEYS = 5
#: SNS's logical operator key in a filter policy (its value lists alternative policies).
_OR = "$or"


def _policy_keys(policy: Mapping[str, Any]) -> set[str]:
    """The top-level names a policy matches on, through ``$or``."""
    keys: set[str] = set()
    for key, value in policy.items():
        if key == _OR and isinstance(value, list):
            for alternative in value:
                if isinstance(alternative, Mapping):
                    keys |= _policy_keys(alternative)
        else:
            keys.add(key)
    return keys


def filter_policy_problems(policy: object, scope: object, fmt: NotificationFormat) -> list[str]:
    """Why ``add_subscription`` cannot take this filter policy (empty: it can)."""
    if scope not in FILTER_POLICY_SCOPES:
        return [f"filter_policy_scope={scope!r}: allowed {', '.join(repr(s) for s in FILTER_POLICY_SCOPES)}"]
    if policy is None:
        return []
    if not isinstance(policy, Mapping) or not policy:
        return [f"filter_policy={policy!r:.120}: allowed a non-empty SNS filter policy as a dict, or None"]
    keys = _policy_keys(policy)
    problems = []
    if len(keys) > MAX_FILTER_POLICY_KEYS:
        problems.append(f"filter_policy names {len(keys)} fields; SNS allows {MAX_FILTER_POLICY_KEYS}")
    if scope == ATTRIBUTES_SCOPE:
        sent = {*BUILT_IN_ATTRIBUTES, *fmt.attributes}
        unknown = sorted(keys - sent)
        if unknown:
            problems.append(
                f"filter_policy on {unknown}: no notification carries such an attribute (allowed {sorted(sent)}; "
                "add the field to notification_attributes)"
            )
    elif fmt.body == BODY_THIN:
        unknown = sorted(keys - set(THIN_BODY_FIELDS))
        if unknown:
            problems.append(
                f"filter_policy on the body's {unknown}: the thin body has only {list(THIN_BODY_FIELDS)} "
                "(notification_body='order' sends the order's fields)"
            )
    return problems
