"""Fuzzed input: whatever arrives, the handler never raises out of the batch and never loses a record.

Each generated message is either recorded (its order row exists with its content) or parked in the
DLQ with a reason. Bodies only use the characters SQS can carry (anything else never reaches us);
JSON escapes carry the rest (lone surrogates included).

Then the properties of the shared mechanisms, asserted directly: exact numbers (validity,
spelling-independence, exactness, injectivity of the canonical text, across all magnitudes and
precisions up to DynamoDB's limits and beyond), unambiguous identity keys, Unicode checks.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import NOT_SQS_TEXT
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.dynamodb_numbers import (
    number_from_literal,
    number_text,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import (
    InvalidMessageError,
    InvalidNumberError,
    InvalidTextError,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import (
    IDENTITY_SEPARATOR,
    derive_event_id,
    identity_text,
    payload_sha256,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_body, parse_order_message
from idempotent_order_pipeline._lambda_asset.order_consumer.pipeline import Outcome
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from tests.consumer.harness import FakeContext, World, sqs_record

# Fuzzing: thousands of generated inputs through the real handler.
pytestmark = pytest.mark.slow

settings.register_profile("fuzz-ci", max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
settings.register_profile(
    "fuzz-reliability", max_examples=5_000, deadline=None, suppress_health_check=list(HealthCheck)
)
FUZZ_PROFILE = "fuzz-reliability" if os.environ.get("HYPOTHESIS_PROFILE") == "reliability" else "fuzz-ci"

# What SQS accepts in a message body: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF.
sqs_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"])).map(lambda s: NOT_SQS_TEXT.sub("", s))

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.decimals(allow_nan=False, allow_infinity=False).map(lambda d: float(d) if abs(d) < 1e300 else 0.0)
    | sqs_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(sqs_text, children, max_size=4),
    max_leaves=20,
)
# --- numbers -----------------------------------------------------------------------------------------


@st.composite
def dynamo_numbers(draw: st.DrawFn) -> tuple[int, int]:
    """A nonzero number as (coefficient, exponent): 1 to 45 significant digits, adjusted exponent -200 .. 200.

    Covers DynamoDB's limits (38 digits, 1E-130 .. 9.99...E+125) and beyond, with the edges over-represented.
    """
    digits = draw(st.integers(1, 45) | st.sampled_from([1, 37, 38, 39]))
    coefficient = draw(st.integers(10 ** (digits - 1), 10**digits - 1) | st.just(10**digits - 1))
    adjusted = draw(st.integers(-200, 200) | st.sampled_from([-131, -130, -129, 124, 125, 126]))
    sign = draw(st.sampled_from([1, -1]))
    return sign * coefficient, adjusted - (digits - 1)


def storable(coefficient: int, exponent: int) -> bool:
    """DynamoDB's rule, from the integers: trailing zeros trimmed, <= 38 digits, 1E-130 <= |x| < 1E+126."""
    digits = str(abs(coefficient)).rstrip("0")
    exponent += len(str(abs(coefficient))) - len(digits)
    return len(digits) <= 38 and -130 <= exponent + len(digits) - 1 <= 125


@st.composite
def spellings(draw: st.DrawFn, number: tuple[int, int]) -> str:
    """One JSON literal of exactly ``coefficient * 10**exponent``: point anywhere, padding zeros, any exponent."""
    coefficient, exponent = number
    digits = str(abs(coefficient)) + "0" * draw(st.integers(0, 5))  # trailing zeros in the mantissa
    exponent -= len(digits) - len(str(abs(coefficient)))
    point = draw(st.integers(0, len(digits)))  # digits after the decimal point
    exponent += point
    integer, fraction = digits[: len(digits) - point] or "0", digits[len(digits) - point :]
    if integer != "0":
        integer = integer.lstrip("0") or "0"
    if integer == "0" and fraction and draw(st.booleans()):
        fraction = "0" * draw(st.integers(0, 3)) + fraction  # leading zeros after "0."
        exponent += len(fraction) - point
    mantissa = integer + ("." + fraction if fraction else "")
    sign = "-" if coefficient < 0 else ""
    if exponent == 0 and draw(st.booleans()):
        return sign + mantissa
    marker = draw(st.sampled_from(["e", "E"]))
    plus = "+" if exponent >= 0 and draw(st.booleans()) else ""
    padding = "0" * draw(st.integers(0, 2))
    return f"{sign}{mantissa}{marker}{plus}{'-' if exponent < 0 else ''}{padding}{abs(exponent)}"


@settings(max_examples=400, deadline=None)
@given(data=st.data(), number=dynamo_numbers())
def test_a_number_is_valid_exactly_when_dynamodb_stores_it_whatever_its_spelling(
    data: st.DataObject, number: tuple[int, int]
) -> None:
    # GIVEN a number of any magnitude and precision, and two of its JSON spellings
    coefficient, exponent = number
    first, second = data.draw(spellings(number)), data.draw(spellings(number))
    exact = Decimal(f"{coefficient}E{exponent}")
    assert Decimal(first) == exact == Decimal(second)  # the spellings are right (exact comparison)
    if not storable(coefficient, exponent):
        # THEN a number DynamoDB cannot store is refused, whatever the spelling
        for spelling in (first, second):
            with pytest.raises(InvalidNumberError):
                number_from_literal(spelling)
        with pytest.raises(InvalidNumberError):
            number_text(exact)
        return
    # THEN a storable one is parsed exactly, to one canonical text, whatever the spelling
    value = number_from_literal(first)
    assert value == exact
    text = number_text(value)
    assert text == number_text(number_from_literal(second)) == number_text(exact)
    # AND the text is the exact value, positional, and a fixed point
    assert Decimal(text) == exact
    assert "e" not in text.lower()
    assert number_text(number_from_literal(text)) == text
    # AND two bodies spelling it differently have one fingerprint
    left, right = (parse_body('{"order_id": "o", "n": ' + s + "}") for s in (first, second))
    assert payload_sha256(left) == payload_sha256(right)


@st.composite
def storable_numbers(draw: st.DrawFn) -> tuple[int, int]:
    """A number DynamoDB stores: 1 to 38 significant digits, adjusted exponent -130 .. 125."""
    digits = draw(st.integers(1, 38))
    coefficient = draw(st.integers(10 ** (digits - 1), 10**digits - 1))
    adjusted = draw(st.integers(-130, 125))
    return draw(st.sampled_from([1, -1])) * coefficient, adjusted - (digits - 1)


@st.composite
def number_pairs(draw: st.DrawFn) -> tuple[tuple[int, int], tuple[int, int]]:
    """Two storable numbers: independent, one digit apart (the 28-digit bug), or one value spelled twice."""
    left = draw(storable_numbers())
    coefficient, exponent = left
    kind = draw(st.sampled_from(["independent", "last-digit", "same-value"]))
    if kind == "independent":
        right = draw(storable_numbers())
    elif kind == "last-digit":
        right = (coefficient + draw(st.sampled_from([1, -1])), exponent)
        assume(right[0] != 0 and storable(*right))
    else:
        shift = draw(st.integers(0, 3))
        right = (coefficient * 10**shift, exponent - shift)
    return left, right


@settings(max_examples=400, deadline=None)
@given(pair=number_pairs())
def test_numbers_dynamodb_tells_apart_have_different_texts_and_fingerprints(
    pair: tuple[tuple[int, int], tuple[int, int]],
) -> None:
    # GIVEN two storable numbers
    (left, right) = pair
    a, b = Decimal(f"{left[0]}E{left[1]}"), Decimal(f"{right[0]}E{right[1]}")
    # WHEN they are written canonically / THEN the texts (and fingerprints) are equal exactly when the numbers are
    assert (number_text(a) == number_text(b)) is (a == b)
    assert (payload_sha256({"n": a}) == payload_sha256({"n": b})) is (a == b)


@settings(max_examples=200, deadline=None)
@given(digits=st.integers(1, 60), zeros=st.integers(0, 300), exponent=st.integers(-(10**30), 10**30))
def test_numbers_past_the_limits_are_refused_without_expanding_them(digits: int, zeros: int, exponent: int) -> None:
    # GIVEN a literal with many digits, padding zeros and any exponent (up to 31 digits of it)
    literal = "9" * digits + "0" * zeros + "e" + str(exponent)
    adjusted = exponent + digits + zeros - 1
    # WHEN parsed / THEN it is accepted exactly when DynamoDB would store it
    if digits <= 38 and -130 <= adjusted <= 125:
        assert number_from_literal(literal) == Decimal(literal)
    else:
        with pytest.raises(InvalidNumberError):
            number_from_literal(literal)


def test_zero_is_valid_in_any_spelling() -> None:
    for spelling in ["0", "-0", "0.000", "0e999999999999999999999999", "-0.0E-200", "0E+" + "9" * 10_000]:
        assert number_text(number_from_literal(spelling)) == "0"


# --- keys --------------------------------------------------------------------------------------------

identity_values = st.text(st.sampled_from(["|", "\\", "a", "b"]), min_size=1, max_size=8) | st.text(
    min_size=1, max_size=8
)
identity_tuples = st.lists(identity_values, min_size=1, max_size=4)


def split_identity(text: str) -> list[str]:
    """The inverse of the escaping, written independently: unescape, split on unescaped "|"."""
    values, current, escaped = [], "", False
    for character in text:
        if escaped:
            current += character
            escaped = False
        elif character == "\\":
            escaped = True
        elif character == IDENTITY_SEPARATOR:
            values.append(current)
            current = ""
        else:
            current += character
    assert not escaped
    return [*values, current]


@settings(max_examples=400, deadline=None)
@given(values=identity_tuples, others=identity_tuples)
def test_distinct_identity_tuples_never_share_a_key(values: list[str], others: list[str]) -> None:
    # GIVEN two tuples of identity values, separators and escapes included
    fields = [f"f{n}" for n in range(len(values))]
    other_fields = [f"f{n}" for n in range(len(others))]
    # WHEN joined and hashed / THEN the text splits back into the tuple (so it is injective)
    assert split_identity(identity_text(values)) == values
    # AND the keys are equal exactly when the tuples are
    key = derive_event_id(dict(zip(fields, values, strict=True)), fields)
    other_key = derive_event_id(dict(zip(other_fields, others, strict=True)), other_fields)
    assert (key == other_key) is (values == others)
    # AND values without "|" or "\\" keep the key of the plain join (keys already stored stay valid)
    if not any(IDENTITY_SEPARATOR in v or "\\" in v for v in values):
        assert key == hashlib.sha256(IDENTITY_SEPARATOR.join(values).encode()).hexdigest()


# --- Unicode -----------------------------------------------------------------------------------------

any_text = st.text(st.characters(exclude_categories=[]), max_size=20)


def _refused_in_ids(character: str) -> bool:
    """SNS/SQS's documented attribute characters (#x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000+), written
    out, without the control characters (C0, DEL, C1), which no id may hold."""
    code = ord(character)
    allowed = 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or code >= 0x10000
    return not allowed


@settings(max_examples=300, deadline=None)
@given(text=any_text, where=st.sampled_from(["value", "name", "nested", "event_id", "order_id", "attribute"]))
def test_text_that_is_not_valid_unicode_is_refused_anywhere_and_everything_else_kept(text: str, where: str) -> None:
    # GIVEN any text, lone surrogates included, escaped into an ASCII body (as SQS would carry it)
    order: dict[str, Any] = {"order_id": "o"}
    attributes: dict[str, Any] = {}
    if where == "value":
        order["s"] = text
    elif where == "name":
        order["k" + text] = 1
    elif where == "nested":
        order["items"] = [{"sku": text}]
    elif where == "event_id":
        order["event_id"] = "e" + text
    elif where == "order_id":
        order["order_id"] = "o" + text
    else:
        attributes["trace"] = {"dataType": "String", "stringValue": text}
    body = json.dumps(order)  # ensure_ascii: surrogates travel as \\u escapes
    received = json.loads(body)  # what the parser sees: escaped pairs are joined into one character
    seen = json.dumps(received, ensure_ascii=False) + (text if where == "attribute" else "")
    has_lone_surrogate = any("\ud800" <= character <= "\udfff" for character in seen)
    # WHEN parsed as a message
    error: InvalidMessageError | None = None
    try:
        message = parse_order_message(body, attributes)
    except InvalidMessageError as exc:
        error = exc
    # THEN it is refused as invalid text (INVALID_MESSAGE, parked at once) exactly when it has a lone
    # surrogate, or an id has a control character or one SNS and SQS refuse in attributes (ids travel as one)
    ids = str(received.get("order_id", "")) + str(received.get("event_id", ""))
    bad_id = any(_refused_in_ids(character) for character in ids)
    assert isinstance(error, InvalidTextError) is (has_lone_surrogate or bad_id)
    if error is None:
        # AND otherwise the row keeps the text exactly
        assert message.order_item["order_id"] == {"S": received["order_id"]}
        assert message.order_item.get("s", {"S": text})["S"] == received.get("s", text)
    else:
        assert error.error_code == "INVALID_MESSAGE"


order_ids = st.one_of(sqs_text, st.sampled_from(["o-1", "o-2", "", "x" * 256, "x" * 257]), st.integers())


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


bodies = st.one_of(
    json_values.map(_dump),
    st.builds(lambda oid, rest: _dump({**rest, "order_id": oid}), order_ids, st.dictionaries(sqs_text, json_values)),
    st.binary(max_size=200).map(lambda b: NOT_SQS_TEXT.sub("", b.decode("utf-8", errors="replace"))),
    st.integers(300_000, 500_000).map(lambda n: _dump({"order_id": "big", "blob": "x" * n})),
    st.integers(30, 5_000).map(lambda n: '{"order_id": "deep", "x": ' + "[" * n + "]" * n + "}"),
    st.sampled_from(["1e400", "-1e-400", "123456789012345678901234567890123456789012", "NaN", "-Infinity"]).map(
        lambda number: '{"order_id": "num", "n": ' + number + "}"
    ),
    dynamo_numbers().flatmap(spellings).map(lambda number: '{"order_id": "num-' + number + '", "n": ' + number + "}"),
    any_text.map(lambda text: json.dumps({"order_id": "text", "s": text, "k" + text: [text]})),
    sqs_text,
)
attribute_sets = st.dictionaries(
    st.sampled_from(["idempotency_key", "trace", "blob"]),
    st.one_of(
        sqs_text.map(lambda s: {"dataType": "String", "stringValue": s}),
        st.binary(max_size=64).map(lambda b: {"dataType": "Binary", "binaryValue": base64.b64encode(b).decode()}),
        st.integers().map(lambda n: {"dataType": "Number", "stringValue": str(n)}),
    ),
    max_size=3,
)


@pytest.fixture(scope="module")
def fuzz_world() -> Iterator[World]:
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        world = World(aws=aws, prefix="fuzz-")
        yield world
    handler_module.configure()


@settings(settings.get_profile(FUZZ_PROFILE))
@given(body=bodies, attributes=attribute_sets)
def test_any_input_is_recorded_or_parked_never_lost(fuzz_world: World, body: str, attributes: dict[str, Any]) -> None:
    # GIVEN any message SQS could deliver
    if not body:
        body = " "  # SQS rejects empty bodies
    record = sqs_record(body, attributes=attributes)
    pipeline = handler_module._get_pipeline()
    # WHEN the handler's pipeline processes it (the handler itself must not raise either)
    [result] = pipeline.process_batch([record])
    # THEN it was handled, not left for retry: no fault was injected, so nothing is transient
    assert result.outcome is not Outcome.RETRY, result.error
    parked = [
        m
        for m in fuzz_world.dead_letters()
        if m["MessageAttributes"]["source_message_id"]["StringValue"] == record["messageId"]
    ]
    if result.outcome in (Outcome.INVALID, Outcome.CONFLICT):
        # parked with its reason and its exact body
        [message] = parked
        assert message["Body"] == body
        assert message["MessageAttributes"]["error_code"]["StringValue"] in {
            "INVALID_MESSAGE",
            "ITEM_TOO_LARGE",
            "VALIDATION_FAILED",
            "IDEMPOTENCY_CONFLICT",
        }
    else:
        # recorded: the order row holds exactly this content
        assert parked == []
        order = parse_body(body)
        row = fuzz_world.dynamodb.get_item(
            TableName=fuzz_world.orders_table, Key={"order_id": {"S": order["order_id"]}}, ConsistentRead=True
        )["Item"]
        assert row["payload_sha256"]["S"] == payload_sha256(order)


def test_handler_survives_a_fuzzed_batch(fuzz_world: World) -> None:
    # GIVEN a batch of hostile records
    records = [
        sqs_record("\ufffd" * 10),
        sqs_record("[" * 100_000),
        sqs_record('{"order_id": "ok-batch"}'),
        sqs_record('{"order_id": "o", "n": 1e400}'),
    ]
    # WHEN the handler runs
    response = handler_module.handler({"Records": records}, FakeContext())
    # THEN it returns normally with nothing left for retry
    assert response == {"batchItemFailures": []}
