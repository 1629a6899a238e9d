"""Unicode checks: text that has a UTF-8 form, and ids SNS and SQS can carry as attribute values."""

from __future__ import annotations

import re

from .batching import NOT_SQS_TEXT
from .errors import InvalidTextError

# UTF-16 surrogates: a str holding one outside a pair (json.loads turns "\ud800" into one) has no UTF-8 form.
_SURROGATE = re.compile("[\ud800-\udfff]")


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


def check_identifier(text: str, what: str) -> str:
    """``text``, or :class:`InvalidTextError` when it could not travel as an SNS attribute value."""
    check_text(text, what)
    # ``event_id`` and ``order_id`` travel as SNS message attributes, so an id with a character SNS
    # refuses could be recorded but never notified.
    match = NOT_SQS_TEXT.search(text)
    if match is not None:
        raise InvalidTextError(
            f"{what} has the character {match.group()!a} at position {match.start()}, which SNS and SQS "
            "refuse in a message attribute (the id is one): allowed tab, newline, carriage return and "
            "U+0020 upwards"
        )
    return text
