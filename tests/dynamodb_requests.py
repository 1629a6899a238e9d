"""What a DynamoDB write request names, and whether an IAM statement's conditions allow it.

IAM authorizes an ``UpdateItem`` (and each ``Update`` inside a ``TransactWriteItems``) as
``dynamodb:UpdateItem``, with ``dynamodb:Attributes`` holding every top-level attribute the request
names: its key, the attributes its update expression sets or removes, those its condition reads
(the DynamoDB developer guide, "Using IAM policy conditions for fine-grained access control"); each
PartiQL ``UPDATE`` of a ``BatchExecuteStatement`` as ``dynamodb:PartiQLUpdate``, whose condition keys
include the same ``dynamodb:Attributes`` (the Service Authorization Reference): here the names its
SET, REMOVE and WHERE clauses name, read by the stand-in's own PartiQL reader.
:func:`named_attributes` reads them from a request as boto3 sends it; :func:`condition_allows`
evaluates the conditions the construct writes, and refuses any it does not know, so a new kind
of condition needs a reading here before a test can pass with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from idempotent_order_pipeline.sandbox.partiql import parse_partiql_update

#: Words of the expression grammar that are not attribute names (the grammar's keywords are
#: case-insensitive; function names are recognized by the parenthesis that follows them).
_KEYWORDS = frozenset({"set", "remove", "add", "delete", "and", "or", "not", "in", "between"})
#: A name at the top of a document path: not preceded by ``.`` (a nested name), ``]`` or a word character.
_NAME = re.compile(r"(?<![\w.\]#:])([#:]?[A-Za-z_]\w*)(\s*\()?")
_EXPRESSIONS = ("UpdateExpression", "ConditionExpression", "ProjectionExpression")


def named_attributes(request: Mapping[str, Any]) -> set[str]:
    """The top-level attribute names an UpdateItem-like request names: key, expressions (placeholders
    resolved); for a PartiQL statement (``Statement``), the names its SET, REMOVE and WHERE clauses name."""
    if "Statement" in request:
        update = parse_partiql_update(request["Statement"], list(request.get("Parameters", [])))
        return {name for name, _ in update.where} | {name for name, _ in update.assignments} | set(update.removals)
    placeholders: Mapping[str, str] = request.get("ExpressionAttributeNames", {})
    names = set(request.get("Key", {})) | set(request.get("Item", {}))
    for field in _EXPRESSIONS:
        for token, call in _NAME.findall(request.get(field, "")):
            if token.startswith(":") or call or token.lower() in _KEYWORDS:
                continue  # a value, a function, a keyword
            names.add(placeholders[token] if token.startswith("#") else token)
    return names


def updates(operation: str, request: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The requests IAM authorizes as ``dynamodb:UpdateItem`` in one client call (``update_item`` or a
    transaction's ``Update`` items), each with its ``TableName``, and those it authorizes as
    ``dynamodb:PartiQLUpdate`` (each statement of a ``batch_execute_statement``, with ``Statement``)."""
    if operation == "update_item":
        yield dict(request)
    elif operation == "transact_write_items":
        for item in request["TransactItems"]:
            if "Update" in item:
                yield dict(item["Update"])
    elif operation == "batch_execute_statement":
        for statement in request["Statements"]:
            update = parse_partiql_update(statement["Statement"], list(statement.get("Parameters", [])))
            yield {"TableName": update.table, **statement}


def action_of(update: Mapping[str, Any]) -> str:
    """The IAM action that authorizes one of :func:`updates`' requests."""
    return "dynamodb:PartiQLUpdate" if "Statement" in update else "dynamodb:UpdateItem"


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def condition_allows(condition: Mapping[str, Mapping[str, Any]], request: Mapping[str, Any]) -> bool:
    """Whether an UpdateItem statement's ``Condition`` holds for ``request``.

    ``dynamodb:ReturnValues`` is checked against the request's ``ReturnValues`` (``NONE`` when absent)
    and against its ``ReturnValuesOnConditionCheckFailure`` too: the IAM documentation does not say
    which of the two the key carries, and the statement must hold whichever it is.
    """
    context = {
        "dynamodb:Attributes": sorted(named_attributes(request)),
        "dynamodb:ReturnValues": [request.get("ReturnValues", "NONE")],
        # the partition key's value of a GetItem or PutItem (the table's key is event_id or order_id)
        "dynamodb:LeadingKeys": [
            value["S"]
            for item in (request.get("Key", {}), request.get("Item", {}))
            for name, value in item.items()
            if name in ("event_id", "order_id")
        ][:1],
    }
    if "ProjectionExpression" in request or "Select" in request:
        context["dynamodb:Select"] = [request.get("Select", "SPECIFIC_ATTRIBUTES")]
    if "ReturnValuesOnConditionCheckFailure" in request:
        context["dynamodb:ReturnValues"].append(request["ReturnValuesOnConditionCheckFailure"])
    for operator, keys in condition.items():
        for key, allowed in keys.items():
            if key not in context and operator == "StringEqualsIfExists" and key == "dynamodb:Select":
                continue  # a request without a Select or projection (a write): the key is absent
            if key not in context:
                raise AssertionError(f"no reading of the condition key {key} for an UpdateItem")
            present, accepted = context[key], set(_values(allowed))
            if operator == "ForAllValues:StringEquals" and not set(present) <= accepted:
                return False
            if operator in ("StringEquals", "StringEqualsIfExists") and not all(v in accepted for v in present):
                return False
            if operator not in ("ForAllValues:StringEquals", "StringEquals", "StringEqualsIfExists"):
                raise AssertionError(f"no reading of the condition operator {operator}")
    return True
