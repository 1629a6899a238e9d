"""Canonical JSON: one text for one content, whatever the key order, whitespace or number spelling.

Keys are sorted, there is no whitespace, and numbers are written by
:func:`~order_consumer.contract.dynamodb_numbers.number_text`, so ``10``, ``10.0``, ``1e1`` and
``1.000...0`` with 41 digits - one DynamoDB number - are one text, and any two numbers DynamoDB
tells apart are two. The text is what the payload fingerprint hashes and what producers send.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from .dynamodb_numbers import number_text
from .errors import InvalidMessageError, UnserializableValueError
from .unicode_text import check_text, is_valid_text

# DynamoDB allows 32 levels of nested maps and lists.
MAX_NESTING_DEPTH = 32


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


def canonical_json(value: Any, path: Sequence[str | int] = ()) -> str:
    """Serialize ``value`` with sorted keys, no whitespace and canonical numbers.

    ``path`` is where ``value`` stands in a larger value; error messages name it.

    Raises:
        InvalidNumberError: a number DynamoDB cannot store exactly (the message names its path).
        InvalidTextError: a string or field name that is not valid Unicode.
        UnserializableValueError: a value with no JSON form.
        InvalidMessageError: nesting deeper than DynamoDB's 32 levels.
    """
    out: list[str] = []
    _canonical(value, out, list(path))
    return "".join(out)
