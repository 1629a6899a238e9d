"""Unicode checks: text that has a UTF-8 form, and ids without control characters that SNS and SQS can carry."""

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


#: Control characters: C0 (tab, newline and carriage return too), DEL, C1 U+0080-U+009F.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def check_identifier(text: str, what: str) -> str:
    """``text``, or :class:`InvalidTextError` when it holds a control character or one SNS refuses."""
    check_text(text, what)
    # ``event_id`` and ``order_id`` travel as SNS message attributes, so an id with a character SNS
    # refuses could be recorded but never notified; and operators read ids in tables and terminals,
    # where a control character moves the cursor, rewrites a line or starts a sequence (\x9b is a CSI).
    match = _CONTROL.search(text) or NOT_SQS_TEXT.search(text)
    if match is not None:
        raise InvalidTextError(
            f"{what} has the character {match.group()!a} at position {match.start()}, which an id may not "
            "hold (a control character, or one SNS and SQS refuse in the message attribute the id travels "
            "as): allowed U+0020-U+007E and U+00A0 upwards, without U+FFFE, U+FFFF and surrogates"
        )
    return text
