"""Exact numbers, as DynamoDB's number type holds them: validity and the canonical text.

A number is valid when, after its leading and trailing zeros are trimmed, it has at most 38
significant digits and a magnitude from 1E-130 to 9.9999999999999999999999999999999999999E+125, or
is zero. Its canonical text (:func:`number_text`) is positional, without exponent or trailing zeros
(``0`` for zero), computed from the digits and the exponent as integers - never through a decimal
context, so nothing is ever rounded, and the range is checked before any digit is written out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal

from .errors import InvalidNumberError, UnserializableValueError

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
_OUT_OF_RANGE = (
    f"out of range: DynamoDB cannot store it (magnitude 1E{MIN_ADJUSTED_EXPONENT} to "
    f"9.9999999999999999999999999999999999999E+{MAX_ADJUSTED_EXPONENT}, or 0)"
)


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
