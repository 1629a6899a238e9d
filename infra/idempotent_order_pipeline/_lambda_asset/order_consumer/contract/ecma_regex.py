"""JSON Schema's regular expressions (ECMA-262, with the ``u`` flag) as Python ``re`` patterns, or refused.

JSON Schema's ``pattern``, ``patternProperties`` and ``format: regex`` speak ECMA-262. Python's ``re``
differs where it matters for validation, so :func:`translate` rewrites what differs and refuses what
it cannot express:

=====================  =========================================  ===============================
ECMA-262               means                                      Python ``re``, as translated
=====================  =========================================  ===============================
``\\d`` ``\\w``          ASCII digits, ASCII word characters        ``[0-9]``, ``[A-Za-z0-9_]`` (``re``'s
                                                                  match Arabic-Indic digits, ...)
``\\s``                  ECMA's white space and line terminators    that exact set
``\\b``                  ASCII word boundary                        ``\\b`` under ``(?a)``
``$``                  the end of the input only                  ``\\Z`` (``re``'s ``$`` matches before
                                                                  a final newline)
``.``                  anything but ``\\n \\r \\u2028 \\u2029``      that class
``(?<name>...)``       a named group                              ``(?P<name>...)``, ``\\k<name>``
                                                                  as ``(?P=name)``
``\\u{1F600}``, ``\\cJ``  a code point, a control character          the character
``[^]``, ``[]``        anything, nothing                          ``(?s:.)``, ``(?!)``
=====================  =========================================  ===============================

Refused (:class:`UnsupportedRegex`): Unicode property escapes (``\\p{Letter}``: ``re`` has none, and
a table built here would follow this Python's Unicode version, not the function's), identity escapes
of letters (an error under ``u``), lone ``{``, ``}`` and ``]``, quantifiers ``re`` reads as possessive
(``a*+``), and anything ``re`` itself cannot compile (a lookbehind of varying width).

Standard library only: the generated validator uses it for ``format: regex`` at run time.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: ECMA-262's WhiteSpace and LineTerminator code points (what ``\s`` matches).
_SPACE_RANGES = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
_DIGIT_RANGES = ((0x30, 0x39),)
_WORD_RANGES = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_LINE_TERMINATORS = "\\n\\r\\u2028\\u2029"
_CONTROL_ESCAPES = {"t": "\\t", "n": "\\n", "v": "\\x0b", "f": "\\x0c", "r": "\\r"}
_SYNTAX_CHARACTERS = set("^$\\.*+?()[]{}|/")
_QUANTIFIER = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
_GROUP_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


class UnsupportedRegex(ValueError):
    """The pattern is not a valid ECMA-262 regular expression, or has no faithful Python form."""


def _char(code: int) -> str:
    """A code point as an escape ``re`` reads inside or outside a class."""
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _ranges(ranges: tuple[tuple[int, int], ...], negated: bool) -> str:
    """A class body (no brackets) for the ranges, or for their complement."""
    if negated:
        complement, start = [], 0
        for low, high in ranges:
            if low > start:
                complement.append((start, low - 1))
            start = high + 1
        if start <= 0x10FFFF:
            complement.append((start, 0x10FFFF))
        ranges = tuple(complement)
    return "".join(_char(low) if low == high else f"{_char(low)}-{_char(high)}" for low, high in ranges)


_CLASS_ESCAPES = {
    "d": (_DIGIT_RANGES, False),
    "D": (_DIGIT_RANGES, True),
    "w": (_WORD_RANGES, False),
    "W": (_WORD_RANGES, True),
    "s": (_SPACE_RANGES, False),
    "S": (_SPACE_RANGES, True),
}


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.at = 0
        self.out: list[str] = []
        self.groups = 0

    def fail(self, why: str) -> UnsupportedRegex:
        return UnsupportedRegex(f"pattern {self.pattern!r:.120}: {why} (at character {self.at})")

    def peek(self, offset: int = 0) -> str:
        index = self.at + offset
        return self.pattern[index] if index < len(self.pattern) else ""

    def run(self) -> str:
        quantifiable = False
        while self.at < len(self.pattern):
            char = self.peek()
            if char == "\\":
                self.out.append(self.escape(in_class=False))
                quantifiable = True
            elif char == "[":
                self.out.append(self.klass())
                quantifiable = True
            elif char == "(":
                self.out.append(self.group_open())
                quantifiable = False
            elif char == ")":
                self.out.append(")")
                self.at += 1
                quantifiable = True
            elif char in "*+?" or (char == "{" and _QUANTIFIER.match(self.pattern, self.at)):
                if not quantifiable:
                    raise self.fail("nothing to repeat")
                self.quantifier()
                quantifiable = False
            elif char in "{}]":
                raise self.fail(f"a lone {char!r} (escape it)")
            elif char == ".":
                self.out.append(f"[^{_LINE_TERMINATORS}]")
                self.at += 1
                quantifiable = True
            elif char == "$":
                self.out.append("\\Z")
                self.at += 1
                quantifiable = False
            elif char == "^":
                self.out.append("^")
                self.at += 1
                quantifiable = False
            elif char == "|":
                self.out.append("|")
                self.at += 1
                quantifiable = False
            else:
                self.out.append(re.escape(char))
                self.at += 1
                quantifiable = True
        return "(?a)" + "".join(self.out)

    def quantifier(self) -> None:
        match = _QUANTIFIER.match(self.pattern, self.at)
        if match:
            self.out.append(match.group())
            self.at = match.end()
        else:
            self.out.append(self.peek())
            self.at += 1
        if self.peek() == "?":
            self.out.append("?")
            self.at += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and _QUANTIFIER.match(self.pattern, self.at)):
            raise self.fail("a quantifier after a quantifier")

    def group_open(self) -> str:
        self.at += 1
        if self.peek() != "?":
            self.groups += 1
            return "("
        for prefix in (":", "=", "!", "<=", "<!"):
            if self.pattern.startswith(prefix, self.at + 1):
                self.at += 1 + len(prefix)
                return "(?" + prefix
        if self.peek(1) == "<":
            match = _GROUP_NAME.match(self.pattern, self.at + 2)
            if match and self.pattern.startswith(">", match.end()) and "$" not in match.group():
                self.at = match.end() + 1
                self.groups += 1
                return f"(?P<{match.group()}>"
        raise self.fail("an unknown group syntax")

    def escape(self, *, in_class: bool) -> str:
        self.at += 1
        char = self.peek()
        if not char:
            raise self.fail("a trailing backslash")
        self.at += 1
        if char in _CLASS_ESCAPES:
            ranges, negated = _CLASS_ESCAPES[char]
            body = _ranges(ranges, negated)
            return body if in_class else f"[{body}]"
        if char in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[char]
        if char == "b":
            return "\\x08" if in_class else "\\b"
        if char == "B" and not in_class:
            return "\\B"
        if char == "0" and not self.peek().isdigit():
            return "\\x00"
        if char.isdigit() and char != "0" and not in_class:
            digits = char
            while self.peek() and self.peek() in "0123456789":
                digits += self.peek()
                self.at += 1
            return f"(?:\\{digits})"
        if char == "c":
            letter = self.peek()
            if len(letter) == 1 and letter.isascii() and letter.isalpha():
                self.at += 1
                return _char(ord(letter) % 32)
            raise self.fail("\\c without a letter")
        if char == "x":
            hex_digits = self.pattern[self.at : self.at + 2]
            if len(hex_digits) == 2 and all(c in "0123456789abcdefABCDEF" for c in hex_digits):
                self.at += 2
                return _char(int(hex_digits, 16))
            raise self.fail("\\x without two hex digits")
        if char == "u":
            return _char(self.code_point())
        if char == "k" and not in_class:
            match = _GROUP_NAME.match(self.pattern, self.at + 1)
            if self.peek() == "<" and match and self.pattern.startswith(">", match.end()):
                self.at = match.end() + 1
                return f"(?P={match.group()})"
            raise self.fail("\\k without a group name")
        if char in ("p", "P"):
            raise self.fail("Unicode property escapes (\\p{...}) are not supported")
        if char in _SYNTAX_CHARACTERS or (char == "-" and in_class):
            return re.escape(char)
        raise self.fail(f"\\{char} is not an ECMA-262 escape")

    def code_point(self) -> int:
        """After ``\\u``: ``XXXX`` (a surrogate pair as one code point) or ``{X...}``."""
        hex_set = "0123456789abcdefABCDEF"
        if self.peek() == "{":
            end = self.pattern.find("}", self.at)
            digits = self.pattern[self.at + 1 : end] if end > 0 else ""
            if not digits or not all(c in hex_set for c in digits) or int(digits, 16) > 0x10FFFF:
                raise self.fail("a bad \\u{...} escape")
            self.at = end + 1
            return int(digits, 16)
        digits = self.pattern[self.at : self.at + 4]
        if len(digits) != 4 or not all(c in hex_set for c in digits):
            raise self.fail("\\u without four hex digits")
        self.at += 4
        code = int(digits, 16)
        low = self.pattern[self.at + 2 : self.at + 6]
        paired = 0xD800 <= code <= 0xDBFF and self.pattern.startswith("\\u", self.at) and len(low) == 4
        if paired and all(c in hex_set for c in low) and 0xDC00 <= int(low, 16) <= 0xDFFF:
            self.at += 6
            return 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
        if 0xD800 <= code <= 0xDFFF:
            raise self.fail("a lone surrogate")
        return code

    def klass(self) -> str:
        self.at += 1
        negated = self.peek() == "^"
        if negated:
            self.at += 1
        if self.peek() == "]":
            self.at += 1
            return "(?s:.)" if negated else "(?!)"
        body: list[str] = []
        previous_was_set = False
        while True:
            char = self.peek()
            if not char:
                raise self.fail("an unclosed character class")
            if char == "]":
                self.at += 1
                break
            if char == "\\":
                is_set = self.peek(1) in _CLASS_ESCAPES
                escaped = self.escape(in_class=True)
                if (is_set and self.peek() == "-" and self.peek(1) not in ("]", "")) or (
                    is_set and body and body[-1] == "-"
                ):
                    raise self.fail("a class escape in a range")
                body.append(escaped)
                previous_was_set = is_set
                continue
            if char == "-" and previous_was_set and self.peek(1) not in ("]", ""):
                raise self.fail("a class escape in a range")
            body.append("\\" + char if char in "[&~|^\\" else char)
            previous_was_set = False
            self.at += 1
        return "[" + ("^" if negated else "") + "".join(body) + "]"


@lru_cache(maxsize=256)
def translate(pattern: str) -> str:
    """The Python ``re`` pattern (``(?a)`` in front) matching what ``pattern`` matches in ECMA-262.

    Raises:
        UnsupportedRegex: ``pattern`` is not valid ECMA-262 (``u`` flag), or cannot be translated.
    """
    translated = _Translator(pattern).run()
    try:
        re.compile(translated)
    except (re.error, OverflowError, RecursionError) as exc:
        raise UnsupportedRegex(f"pattern {pattern!r:.120}: {exc}") from None
    return translated


def is_ecma_regex(text: str) -> bool:
    """``format: regex``: whether ``text`` is a regular expression :func:`translate` accepts."""
    try:
        translate(text)
    except UnsupportedRegex:
        return False
    return True
