"""Idempotency keys, payload fingerprints and exact numbers: the one place producer and consumer derive them.

The idempotency key (stored as ``event_id``) is never the SQS message id. It is resolved in order:

1. the body field ``event_id``;
2. the message attribute ``idempotency_key``;
3. the SHA-256 hex digest of the values of the identity fields, in order, each escaped
   (``\\`` -> ``\\\\``, then ``|`` -> ``\\|``) and joined with ``|``. A value without ``|`` or ``\\``
   is unchanged by the escaping, so its key is the same as before escaping existed; distinct
   tuples of values can no longer give one joined text (``("o|1", "c")`` vs ``("o", "1|c")``).

Numbers follow DynamoDB's number type exactly. A number is valid when, after its leading and
trailing zeros are trimmed, it has at most 38 significant digits and a magnitude from 1E-130 to
9.9999999999999999999999999999999999999E+125, or is zero. Its canonical text
(:func:`number_text`) is positional, without exponent or trailing zeros (``0`` for zero), computed
from the digits and the exponent as integers - never through a decimal context, so nothing is
ever rounded, and the range is checked before any digit is written out.

``payload_sha256`` fingerprints the order's content (every body field except ``event_id``) in a
canonical JSON form: equal for equal content whatever the key order, whitespace or number spelling
(``10``, ``10.0``, ``1e1`` and ``1.000...0`` with 41 digits are one DynamoDB number, so one
content), and different for any two numbers DynamoDB tells apart.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from .errors import (
    IdempotencyKeyMismatchError,
    InvalidMessageError,
    InvalidNumberError,
    InvalidTextError,
    MissingIdentityFieldError,
    UnserializableValueError,
)

EVENT_ID_FIELD = "event_id"
IDEMPOTENCY_KEY_ATTRIBUTE = "idempotency_key"
DEFAULT_IDENTITY_FIELDS: tuple[str, ...] = ("order_id",)
IDENTITY_SEPARATOR = "|"
#: Escapes a separator or itself inside an identity value.
IDENTITY_ESCAPE = "\\"
# DynamoDB's limit for a partition key value.
MAX_EVENT_ID_BYTES = 2048
# DynamoDB allows 32 levels of nested maps and lists.
MAX_NESTING_DEPTH = 32

#: DynamoDB's number type: significant digits, and the range of the adjusted exponent (the
#: exponent of the first significant digit): 1E-130 .. 9.9999999999999999999999999999999999999E+125.
MAX_SIGNIFICANT_DIGITS = 38
MIN_ADJUSTED_EXPONENT = -130
MAX_ADJUSTED_EXPONENT = 125
# An exponent with more digits than this is out of range whatever the mantissa (a text of 10**18
# characters cannot exist), so it is never converted to an int.
_MAX_EXPONENT_DIGITS = 18
# A JSON number literal (RFC 8259), the text json's scanner hands to parse_int / parse_float.
_JSON_NUMBER = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")
# UTF-16 surrogates: a str holding one outside a pair (json.loads turns "\ud800" into one) has no UTF-8 form.
_SURROGATE = re.compile("[\ud800-\udfff]")
_OUT_OF_RANGE = (
    f"out of range: DynamoDB cannot store it (magnitude 1E{MIN_ADJUSTED_EXPONENT} to "
    f"9.9999999999999999999999999999999999999E+{MAX_ADJUSTED_EXPONENT}, or 0)"
)


def parse_identity_fields(value: str | None) -> tuple[str, ...]:
    """Parse the comma-separated ``IDENTITY_FIELDS`` setting; empty or unset means the default."""
    if value is None or not value.strip():
        return DEFAULT_IDENTITY_FIELDS
    fields = tuple(part.strip() for part in value.split(","))
    if any(not field for field in fields):
        raise ValueError(f"IDENTITY_FIELDS={value!r} has an empty field name; expected e.g. 'order_id,customer_id'")
    return fields


# --- text -------------------------------------------------------------------------------------------


def is_valid_text(text: str) -> bool:
    """Whether ``text`` is valid Unicode, i.e. has a UTF-8 form (no lone surrogate)."""
    return text.isascii() or _SURROGATE.search(text) is None


def check_text(text: str, what: str) -> str:
    """``text`` itself, or :class:`InvalidTextError` naming ``what`` when it is not valid Unicode."""
    if not is_valid_text(text):
        match = _SURROGATE.search(text)
        position = match.start() if match else 0
        raise InvalidTextError(
            f"{what} is not valid Unicode: lone surrogate {text[position]!a} at character {position}"
        )
    return text


#: Characters SNS and SQS refuse in a message attribute value (their documented set is #x9, #xA,
#: #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF). ``event_id`` and ``order_id`` travel as SNS
#: message attributes, so an id with one of these could be recorded but never notified.
_NOT_ATTRIBUTE_TEXT = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def check_identifier(text: str, what: str) -> str:
    """``text``, or :class:`InvalidTextError` when it could not travel as an SNS attribute value."""
    check_text(text, what)
    match = _NOT_ATTRIBUTE_TEXT.search(text)
    if match is not None:
        raise InvalidTextError(
            f"{what} has the character {match.group()!a} at position {match.start()}, which SNS and SQS "
            "refuse in a message attribute (the id is one): allowed tab, newline, carriage return and "
            "U+0020 upwards"
        )
    return text


# --- numbers ----------------------------------------------------------------------------------------


def _canonical_number(negative: bool, digits: str, exponent: int) -> str:
    """The positional text of ``(-1)**negative * int(digits) * 10**exponent`` (``digits`` trimmed, non-empty).

    The caller has checked the range, so at most 38 + 131 characters are ever written.
    """
    if exponent >= 0:
        text = digits + "0" * exponent
    else:
        point = len(digits) + exponent
        text = digits[:point] + "." + digits[point:] if point > 0 else "0." + "0" * -point + digits
    return "-" + text if negative else text


def _checked_number(
    negative: bool, digits: str, exponent: int, spelled: Callable[[], str]
) -> tuple[bool, str, int] | None:
    """Trim ``digits`` (a digit string, value ``int(digits) * 10**exponent``) and check DynamoDB's limits.

    Returns ``(negative, significant digits, exponent)``, or None for zero.

    Raises:
        InvalidNumberError: more than 38 significant digits, or a magnitude out of range.
    """
    significant = digits.lstrip("0")
    if not significant:
        return None
    trimmed = significant.rstrip("0")
    exponent += len(significant) - len(trimmed)
    adjusted = exponent + len(trimmed) - 1
    if len(trimmed) > MAX_SIGNIFICANT_DIGITS:
        raise InvalidNumberError(
            f"{spelled()} has {len(trimmed)} significant digits: DynamoDB cannot store it "
            f"(at most {MAX_SIGNIFICANT_DIGITS})"
        )
    if not MIN_ADJUSTED_EXPONENT <= adjusted <= MAX_ADJUSTED_EXPONENT:
        raise InvalidNumberError(f"{spelled()} is {_OUT_OF_RANGE}")
    return negative, trimmed, exponent


def _spelled(text: str) -> str:
    """A short, printable rendering of a number's text for an error message."""
    return text if len(text) <= 40 else f"{text[:20]}...{text[-12:]} ({len(text)} characters)"


def number_from_literal(text: str) -> Decimal:
    """The exact value of a JSON number literal, checked against DynamoDB's number type.

    The exponent's size is checked before it is converted and no digit is ever expanded, so a
    literal such as ``1e1000000000`` costs no more than its own length.

    Raises:
        InvalidNumberError: not a JSON number literal, or a number DynamoDB cannot store exactly.
    """
    match = _JSON_NUMBER.fullmatch(text)
    if match is None:
        raise InvalidNumberError(f"{_spelled(ascii(text))} is not a JSON number")
    sign, integer, fraction, exponent_sign, exponent_digits = match.groups()
    fraction = fraction or ""
    digits = integer + fraction
    if not digits.strip("0"):
        return Decimal(0)
    exponent = 0
    if exponent_digits:
        exponent_digits = exponent_digits.lstrip("0")
        if len(exponent_digits) > _MAX_EXPONENT_DIGITS:
            raise InvalidNumberError(f"{_spelled(text)} is {_OUT_OF_RANGE}")
        exponent = int(exponent_digits or "0") * (-1 if exponent_sign == "-" else 1)
    checked = _checked_number(sign == "-", digits, exponent - len(fraction), lambda: _spelled(text))
    if checked is None:
        return Decimal(0)
    negative, significant, exponent = checked
    return Decimal(f"{'-' if negative else ''}{significant}E{exponent}")


def number_text(value: int | float | Decimal) -> str:
    """The canonical text of a number: positional, exact, no trailing zeros, ``0`` for zero.

    Raises:
        InvalidNumberError: not finite, more than 38 significant digits, or out of DynamoDB's range.
        UnserializableValueError: not a number (a bool is not one either).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise UnserializableValueError(f"{type(value).__name__} is not a number")
    if isinstance(value, int):
        # Bound the size before writing digits: an int of more than 420 bits has more than 126 digits.
        if value.bit_length() > 420:
            raise InvalidNumberError(
                f"an integer of {value.bit_length()} bits is out of DynamoDB's range (below 1E+126)"
            )
        checked = _checked_number(value < 0, str(abs(value)), 0, lambda: _spelled(str(value)))
    else:
        if isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidNumberError(f"{value!r} is not a JSON number")
            value = Decimal(repr(value))
        if not value.is_finite():
            raise InvalidNumberError(f"{value!r} is not a JSON number")
        if value.is_zero():
            return "0"
        # adjusted() is the exponent of the first digit: the magnitude, checked before any digit is read.
        if not MIN_ADJUSTED_EXPONENT <= value.adjusted() <= MAX_ADJUSTED_EXPONENT:
            raise InvalidNumberError(f"{_spelled(f'{value:E}')} is {_OUT_OF_RANGE}")
        sign, digit_tuple, exponent = value.as_tuple()
        assert isinstance(exponent, int)  # a finite Decimal
        number = value
        checked = _checked_number(bool(sign), "".join(map(str, digit_tuple)), exponent, lambda: _spelled(str(number)))
    return "0" if checked is None else _canonical_number(*checked)


# --- canonical JSON and the fingerprint -------------------------------------------------------------


def path_text(path: Sequence[str | int]) -> str:
    """``items[2].price`` for the path ``["items", 2, "price"]`` (odd names quoted: ``a["x.y"]``)."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.isidentifier() and part.isascii():
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)[:80]}]"
    return text or "the value"


def _canonical(value: Any, out: list[str], path: list[str | int]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        if not is_valid_text(value):
            check_text(value, path_text(path))
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int | float | Decimal):
        try:
            out.append(number_text(value))
        except InvalidMessageError as exc:
            raise type(exc)(f"{path_text(path)}: {exc}") from None
    elif isinstance(value, Mapping | list | tuple):
        if len(path) >= MAX_NESTING_DEPTH + 1:
            raise InvalidMessageError(f"{path_text(path)} is nested deeper than DynamoDB's {MAX_NESTING_DEPTH} levels")
        if isinstance(value, Mapping):
            names = list(value)
            for name in names:
                if not isinstance(name, str):
                    raise UnserializableValueError(
                        f"{path_text(path)} has a field name of type {type(name).__name__}; names must be strings"
                    )
                if not is_valid_text(name):
                    check_text(name, f"a field name in {path_text(path)}")
            out.append("{")
            for position, name in enumerate(sorted(names)):
                if position:
                    out.append(",")
                out.append(json.dumps(name, ensure_ascii=False))
                out.append(":")
                path.append(name)
                _canonical(value[name], out, path)
                path.pop()
            out.append("}")
        else:
            out.append("[")
            for position, child in enumerate(value):
                if position:
                    out.append(",")
                path.append(position)
                _canonical(child, out, path)
                path.pop()
            out.append("]")
    else:
        raise UnserializableValueError(f"{path_text(path)}: cannot serialize {type(value).__name__} as JSON")


def canonical_json(value: Any) -> str:
    """Serialize ``value`` with sorted keys, no whitespace and canonical numbers.

    Raises:
        InvalidNumberError: a number DynamoDB cannot store exactly (the message names its path).
        InvalidTextError: a string or field name that is not valid Unicode.
        UnserializableValueError: a value with no JSON form.
        InvalidMessageError: nesting deeper than DynamoDB's 32 levels.
    """
    return _canonical_text(value, [])


def _canonical_text(value: Any, path: list[str | int]) -> str:
    out: list[str] = []
    _canonical(value, out, path)
    return "".join(out)


def payload_sha256(body: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the canonical JSON of ``body`` without its ``event_id`` field."""
    content = {key: value for key, value in body.items() if key != EVENT_ID_FIELD}
    return hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()


# --- keys -------------------------------------------------------------------------------------------


def escape_identity_value(text: str) -> str:
    """``text`` with ``\\`` doubled and ``|`` escaped, so that joined values split back unambiguously."""
    return text.replace(IDENTITY_ESCAPE, IDENTITY_ESCAPE * 2).replace(
        IDENTITY_SEPARATOR, IDENTITY_ESCAPE + IDENTITY_SEPARATOR
    )


def identity_text(values: Sequence[str]) -> str:
    """The text hashed into a derived key: the escaped values joined with ``|``."""
    return IDENTITY_SEPARATOR.join(escape_identity_value(value) for value in values)


def _identity_value(field: str, value: Any) -> str:
    if isinstance(value, str):
        return check_text(value, f"identity field {field!r}")
    return _canonical_text(value, [field])


def derive_event_id(order: Mapping[str, Any], identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS) -> str:
    """SHA-256 hex of the identity field values, in order, escaped and joined with ``|``.

    A string value is used as is, any other value as its canonical JSON.

    Raises:
        MissingIdentityFieldError: an identity field is missing, null or empty.
        InvalidMessageError: a value is not valid Unicode or has no canonical JSON.
    """
    values = []
    for field in identity_fields:
        value = order.get(field)
        if value is None or value == "":
            raise MissingIdentityFieldError(
                f"identity field {field!r} is missing or empty; IDENTITY_FIELDS is {','.join(identity_fields)!r}"
            )
        values.append(_identity_value(field, value))
    return hashlib.sha256(identity_text(values).encode("utf-8")).hexdigest()


def _check_key(name: str, key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidMessageError(f"{name} must be a non-empty string, got {key!r:.80}")
    check_identifier(key, name)
    if len(key.encode("utf-8")) > MAX_EVENT_ID_BYTES:
        raise InvalidMessageError(f"{name} is longer than {MAX_EVENT_ID_BYTES} bytes")
    return key


def resolve_event_id(
    body: Mapping[str, Any],
    attribute_key: str | None,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
) -> str:
    """Resolve the idempotency key of an order message (see the module docstring for the order).

    Raises:
        IdempotencyKeyMismatchError: the body ``event_id`` and the attribute both exist and differ.
        MissingIdentityFieldError: neither exists and an identity field is missing.
        InvalidMessageError: a given key is empty, not a string, not valid Unicode or too long.
    """
    body_key = None if EVENT_ID_FIELD not in body else _check_key("body field 'event_id'", body[EVENT_ID_FIELD])
    attr_key = (
        None if attribute_key is None else _check_key(f"message attribute {IDEMPOTENCY_KEY_ATTRIBUTE!r}", attribute_key)
    )
    if body_key is not None and attr_key is not None and body_key != attr_key:
        raise IdempotencyKeyMismatchError(
            f"body event_id {body_key!r:.80} differs from the {IDEMPOTENCY_KEY_ATTRIBUTE} attribute {attr_key!r:.80}"
        )
    return body_key or attr_key or derive_event_id(body, identity_fields)
