"""The order schema at run time: the validator a pipeline's asset carries, and what a violation says.

With the construct's ``order_schema`` prop, the construct generates the schema's validator as Python
code at synth (``idempotent_order_pipeline.schema_codegen``, which speaks draft 2020-12 and draft-07
natively) and ships it in the function's asset as ``order_consumer/order_schema_validator.py``: no
size limit that matters (unlike the environment's 4 KB), no compilation at a cold start, and nothing
to import but this module and the standard library. Without the prop the file is not there and the
consumer validates nothing but its message contract.

The consumer checks the message body (the order as sent, ``event_id`` included when the producer set
it) after the message contract and before any write; the producer client and ``order-pipeline send``
run the same generated code on the same body before sending (``idempotent_order_pipeline.order_schema``),
so both say the same :func:`violation_message`, which names every broken rule (up to
:data:`MAX_LISTED_VIOLATIONS`) with its JSON path.

Numbers are checked as the store keeps them: the body's fractions are parsed as exact
:class:`~decimal.Decimal` (integers are exact Python ints), never as floats, and the schema's own
numbers are Decimal literals in the generated code, so ``100.0000000000000000001`` is above
``maximum: 100``.

Standard library only: the Lambda asset ships it, and the library imports it from the distribution.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .errors import SchemaViolationError
from .parked import MAX_ERROR_MESSAGE_CHARS

#: The generated validator's module, in the asset package of a pipeline with an ``order_schema``.
VALIDATOR_MODULE = "order_schema_validator"
#: The root of every path a violation names (``$.items[2].sku``).
ROOT_PATH = "$"
#: How many violations a message names at most (then ``... and N more``); the text is also cut to fit
#: the parked message's ``error_message`` attribute.
MAX_LISTED_VIOLATIONS = 10
#: The start of every violation message.
VIOLATION_PREFIX = "the order does not match order_schema: "

#: A broken rule as the generated code reports it: (JSON path, what is wrong, the keyword).
Violation = tuple[str, str, str]


class SchemaRuleError(ValueError):
    """The value at ``name`` (a JSON path) breaks the schema's ``rule``."""

    def __init__(self, message: str, name: str | None = None, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.rule = rule


class SchemaRulesError(ValueError):
    """Every rule an order breaks (``errors``, in the order the schema states them)."""

    def __init__(self, errors: list[SchemaRuleError]) -> None:
        self.message = "; ".join(error.message for error in errors)
        super().__init__(self.message)
        self.errors = errors


def violation_message(violations: Iterable[Violation]) -> str:
    """Every broken rule, where: ``... $.amount must be bigger than or equal to 0 (rule: minimum); ...``.

    At most :data:`MAX_LISTED_VIOLATIONS` are named (``; and 3 more``), and the text fits the parked
    message's ``error_message`` (:data:`MAX_ERROR_MESSAGE_CHARS`).
    """
    found = list(violations)
    room = MAX_ERROR_MESSAGE_CHARS - len(VIOLATION_PREFIX) - len(f"; and {len(found)} more")
    parts: list[str] = []
    for path, text, rule in found[:MAX_LISTED_VIOLATIONS]:
        part = f"{path} {text} (rule: {rule})"
        if parts and sum(len(p) + 2 for p in parts) + len(part) > room:
            break
        parts.append(part[:room])
    more = len(found) - len(parts)
    return VIOLATION_PREFIX + "; ".join(parts) + (f"; and {more} more" if more else "")


def parse_order(body: str) -> Any:
    """The body as the schema checks it: fractions as exact Decimal (as the store writes them), never float."""
    return json.loads(body, parse_float=Decimal)


@dataclass(frozen=True)
class OrderSchema:
    """A compiled order schema: ``validate(data, path)`` returns every :data:`Violation` (empty: valid)."""

    validate: Callable[[Any, str], list[Violation]]
    #: The schema's JSON text the validator was generated from (the one the template carries).
    text: str = ""

    def violations(self, body: str) -> list[Violation]:
        """Every rule the message body (valid JSON: the message contract was checked first) breaks."""
        return self.validate(parse_order(body), ROOT_PATH)

    def check(self, body: str) -> None:
        """Check a message body (valid JSON: the message contract was checked first).

        Raises:
            SchemaViolationError: the order breaks the schema (the message names each path and rule).
        """
        found = self.validate(parse_order(body), ROOT_PATH)
        if found:
            raise SchemaViolationError(violation_message(found))


def load_order_schema(package: str) -> OrderSchema | None:
    """The validator shipped in the asset package ``package``, None when the pipeline has no schema."""
    name = f"{package}.{VALIDATOR_MODULE}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None
    return OrderSchema(module.validate, getattr(module, "SCHEMA_JSON", ""))


# What the generated code calls: JSON's equality and numbers, exactly.


def json_key(value: Any) -> Any:
    """A hashable form of a JSON value, equal for values JSON Schema calls equal.

    ``1``, ``1.0`` and ``Decimal('1.00')`` are equal (Python hashes equal numbers alike); ``true`` is
    not ``1``, and objects are equal whatever their key order.
    """
    if value is True or value is False:
        return (bool, value)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | Decimal):
        return (Decimal, value)
    if value is None:
        return (None,)
    if isinstance(value, list):
        return (list, tuple(json_key(item) for item in value))
    if isinstance(value, dict):
        return (dict, frozenset((name, json_key(item)) for name, item in value.items()))
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def unique_items(items: list[Any]) -> bool:
    """Whether no two items of the array are equal (``uniqueItems``)."""
    keys = {json_key(item) for item in items}
    return len(keys) == len(items)


def is_number(value: Any) -> bool:
    """A JSON number (a bool is not one)."""
    return isinstance(value, int | Decimal | float) and value is not True and value is not False


def is_integer(value: Any) -> bool:
    """A JSON number with no fractional part (``1.0`` is an integer, ``1.0000000000000000001`` is not)."""
    if isinstance(value, int):
        return value is not True and value is not False
    if isinstance(value, Decimal):
        return bool(value.is_finite() and value == value.to_integral_value())
    if isinstance(value, float):
        return value.is_integer()
    return False


def _integer_and_exponent(value: int | Decimal) -> tuple[int, int]:
    """(n, e) with value == n * 10**e, exactly."""
    if isinstance(value, int):
        return value, 0
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite: the message contract refuses NaN and infinities
    number = int("".join(map(str, digits)) or "0")
    return (-number if sign else number), exponent


def is_multiple(value: int | Decimal | float, factor: int | Decimal) -> bool:
    """Whether ``value / factor`` is an integer, computed exactly (``multipleOf``), in bounded time.

    With ``value = a * 10**p`` and ``factor = b * 10**q``: ``b`` must divide ``a * 10**(p - q)``. Only
    the factors 2 and 5 of ``b`` can use the power of ten, at most ``b.bit_length()`` of each, so the
    power is capped there; a value of any exponent costs no more than its digits.
    """
    if isinstance(value, float):
        value = Decimal(repr(value))
    a, p = _integer_and_exponent(value)
    b, q = _integer_and_exponent(factor)
    if a == 0:
        return True
    shift = p - q
    if shift >= 0:
        return bool((a * 10 ** min(shift, abs(b).bit_length())) % b == 0)
    if -shift > len(str(abs(a))):
        return False  # |a| < 10**-shift <= |b| * 10**-shift: the quotient is between -1 and 1, not 0
    return bool(a % (b * 10**-shift) == 0)
