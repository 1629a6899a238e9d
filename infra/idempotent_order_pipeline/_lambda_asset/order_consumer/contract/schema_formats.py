"""The ``format`` values an order schema asserts, each checked to its RFC's grammar (or not asserted at all).

Every checker takes a string and says whether it is of the format; the generated validator calls it
on strings only (any other type passes ``format``, as JSON Schema says). The grammars are the RFCs'
ABNF written as regular expressions over ASCII character classes (never ``\\d`` or ``\\w``, which
match other scripts' digits and letters), matched whole (``fullmatch``: no ``$`` before a final
newline), then the ranges a grammar cannot say (days per month, leap seconds).

What is not here is refused at synth (the construct's ``order_schema`` check): ``idn-hostname`` and
``idn-email`` (IDNA2008's tables and contextual rules), and any format name not in :data:`FORMATS`.
Where a grammar has a part this module cannot check, that part is refused (a false refusal, never a
false accept): a ``hostname`` label in IDNA's reserved form (``xn--...``, any ``??--``), and SMTP's
general address literals in ``email``.

Standard library only: the Lambda asset ships it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from .ecma_regex import is_ecma_regex


class _Grammar:
    """A whole-string matcher compiled at its first use: a cold start pays only for the formats used
    (the IRI grammar, with its Unicode ranges, takes a second to compile)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._fullmatch: Callable[[str], re.Match[str] | None] | None = None

    def __call__(self, text: str) -> re.Match[str] | None:
        if self._fullmatch is None:
            self._fullmatch = re.compile(self.pattern).fullmatch
        return self._fullmatch(text)


# RFC 3986 (URI) and RFC 3987 (IRI), appendix A.
_HEX = "0-9A-Fa-f"
_UNRESERVED = "A-Za-z0-9\\-._~"
_SUB_DELIMS = "!$&'()*+,;="
_PCT = f"%[{_HEX}]{{2}}"
_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])"
_IPV4 = rf"{_DEC_OCTET}\.{_DEC_OCTET}\.{_DEC_OCTET}\.{_DEC_OCTET}"
_H16 = f"[{_HEX}]{{1,4}}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"


def _h16s(count: int) -> str:
    """``count`` times ``h16 ":"``."""
    return f"(?:{_H16}:){{{count}}}" if count else ""


def _upto(count: int) -> str:
    """``[ *count( h16 ":" ) h16 ]``."""
    return f"(?:(?:{_H16}:){{0,{count}}}{_H16})?" if count else f"(?:{_H16})?"


_IPV6 = (
    "(?:"
    + "|".join(
        (
            f"{_h16s(6)}{_LS32}",
            f"::{_h16s(5)}{_LS32}",
            f"(?:{_H16})?::{_h16s(4)}{_LS32}",
            f"{_upto(1)}::{_h16s(3)}{_LS32}",
            f"{_upto(2)}::{_h16s(2)}{_LS32}",
            f"{_upto(3)}::{_H16}:{_LS32}",
            f"{_upto(4)}::{_LS32}",
            f"{_upto(5)}::{_H16}",
            f"{_upto(6)}::",
        )
    )
    + ")"
)
# ucschar and iprivate (RFC 3987 2.2), as class ranges.
_UCSCHAR = (
    "\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef\U00010000-\U0001fffd\U00020000-\U0002fffd\U00030000-\U0003fffd"
    "\U00040000-\U0004fffd\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd\U00080000-\U0008fffd"
    "\U00090000-\U0009fffd\U000a0000-\U000afffd\U000b0000-\U000bfffd\U000c0000-\U000cfffd\U000d0000-\U000dfffd"
    "\U000e1000-\U000efffd"
)
_IPRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"


def _uri_grammar(unreserved: str, private: str) -> tuple[str, str]:
    """(absolute URI, URI reference) patterns, for RFC 3986 (``unreserved``) or RFC 3987 (with ucschar)."""
    pchar = f"(?:[{unreserved}{_SUB_DELIMS}:@]|{_PCT})"
    ipvfuture = rf"[vV][{_HEX}]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
    host = rf"(?:\[(?:{_IPV6}|{ipvfuture})\]|{_IPV4}|(?:[{unreserved}{_SUB_DELIMS}]|{_PCT})*)"
    authority = rf"(?:(?:[{unreserved}{_SUB_DELIMS}:]|{_PCT})*@)?{host}(?::[0-9]*)?"
    segment = f"{pchar}*"
    path_abempty = f"(?:/{segment})*"
    path_absolute = f"/(?:{pchar}+(?:/{segment})*)?"
    path_noscheme = f"(?:[{unreserved}{_SUB_DELIMS}@]|{_PCT})+(?:/{segment})*"
    path_rootless = f"{pchar}+(?:/{segment})*"
    query = rf"(?:{pchar}|[/?{private}])*"
    fragment = rf"(?:{pchar}|[/?])*"
    tail = rf"(?:\?{query})?(?:#{fragment})?"
    scheme = r"[A-Za-z][A-Za-z0-9+\-.]*"
    absolute = f"{scheme}:(?://{authority}{path_abempty}|{path_absolute}|{path_rootless}|){tail}"
    relative = f"(?://{authority}{path_abempty}|{path_absolute}|{path_noscheme}|){tail}"
    return absolute, f"(?:{absolute}|{relative})"


_URI, _URI_REFERENCE = _uri_grammar(_UNRESERVED, "")
_IRI, _IRI_REFERENCE = _uri_grammar(_UNRESERVED + _UCSCHAR, _IPRIVATE)

# RFC 6570 (URI Template) 2.
_VARCHAR = f"(?:[A-Za-z0-9_]|{_PCT})"
_VARSPEC = rf"{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_EXPRESSION = rf"\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}}"
_LITERALS = f"(?:[\\x21\\x23-\\x24\\x26-\\x3b\\x3d\\x3f-\\x5b\\x5d\\x5f\\x61-\\x7a\\x7e{_UCSCHAR}{_IPRIVATE}]|{_PCT})"
_URI_TEMPLATE = f"(?:{_LITERALS}|{_EXPRESSION})*"

# RFC 3339 5.6 and appendix A (duration). The ranges a regex can say are in it (month 01-12, hour
# 00-23, ...); the days of the month and the leap second are checked after a match.
_DATE = "([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(?:\.[0-9]+)?(?:[Zz]|([+-])([01][0-9]|2[0-3]):([0-5][0-9]))"
_DUR_TIME = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = "(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_DURATION = f"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)"

# RFC 1123 2.1 host names (a label with "--" at its third and fourth character is IDNA's reserved
# form: refused), at most 253 characters; RFC 5321 4.1.2 mailboxes.
_LABEL = "(?![A-Za-z0-9]{2}--)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = rf"(?=[^\n]{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*"
_ATEXT = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]+"
_LOCAL_PART = f'(?:{_ATEXT}(?:\\.{_ATEXT})*|"(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e])*")'
_MAILBOX = _Grammar(rf"({_LOCAL_PART})@{_HOSTNAME}")
# An address literal's grammar (IPv6's is the costly one to compile) only when the domain is one.
_MAILBOX_LITERAL = _Grammar(rf"({_LOCAL_PART})@\[(?:{_IPV4}|IPv6:{_IPV6})\]")
_MAX_LOCAL_PART = 64


def _compiled(pattern: str) -> Callable[[str], bool]:
    grammar = _Grammar(pattern)
    return lambda text: grammar(text) is not None


_DATE_MATCH = _Grammar(_DATE)
_TIME_MATCH = _Grammar(_TIME)
_DATE_TIME_MATCH = _Grammar(f"{_DATE}[Tt]{_TIME}")


def _day_exists(year: str, month: str, day: str) -> bool:
    if day <= "28":
        return True
    if month == "02":
        number = int(year)
        return day == "29" and number % 4 == 0 and (number % 100 != 0 or number % 400 == 0)
    return day != "31" or month in ("01", "03", "05", "07", "08", "10", "12")


def _leap_second_ok(
    hour: str, minute: str, second: str, sign: str | None, off_hour: str | None, off_minute: str | None
) -> bool:
    """A leap second is the last second of a UTC day: 23:59:60 once the offset is taken off."""
    if second != "60":
        return True
    offset = int(off_hour or 0) * 60 + int(off_minute or 0)
    return (int(hour) * 60 + int(minute) - (-offset if sign == "-" else offset)) % 1440 == 23 * 60 + 59


def is_date(text: str) -> bool:
    """RFC 3339 ``full-date``, a day that exists."""
    match = _DATE_MATCH(text)
    return match is not None and _day_exists(*match.groups())


def is_time(text: str) -> bool:
    """RFC 3339 ``full-time`` (the offset required), a leap second only at 23:59 UTC."""
    match = _TIME_MATCH(text)
    return match is not None and _leap_second_ok(*match.groups())


def is_date_time(text: str) -> bool:
    """RFC 3339 ``date-time``."""
    match = _DATE_TIME_MATCH(text)
    if match is None:
        return False
    year, month, day, hour, minute, second, sign, off_hour, off_minute = match.groups()
    return _day_exists(year, month, day) and _leap_second_ok(hour, minute, second, sign, off_hour, off_minute)


def is_email(text: str) -> bool:
    """RFC 5321 ``Mailbox``: a dot-string or quoted local part, ``@``, a host name or an IPv4/IPv6 literal."""
    match = _MAILBOX_LITERAL(text) if text.endswith("]") else _MAILBOX(text)
    return match is not None and len(match.group(1)) <= _MAX_LOCAL_PART


#: The asserted formats: name -> checker (of a string).
FORMATS: Mapping[str, Callable[[str], bool]] = {
    "date-time": is_date_time,
    "date": is_date,
    "time": is_time,
    "duration": _compiled(_DURATION),
    "email": is_email,
    "hostname": _compiled(_HOSTNAME),
    "ipv4": _compiled(_IPV4),
    "ipv6": _compiled(_IPV6),
    "uri": _compiled(_URI),
    "uri-reference": _compiled(_URI_REFERENCE),
    "iri": _compiled(_IRI),
    "iri-reference": _compiled(_IRI_REFERENCE),
    "uri-template": _compiled(_URI_TEMPLATE),
    "uuid": _compiled(f"[{_HEX}]{{8}}-[{_HEX}]{{4}}-[{_HEX}]{{4}}-[{_HEX}]{{4}}-[{_HEX}]{{12}}"),
    "json-pointer": _compiled("(?:/(?:[^~/]|~[01])*)*"),
    "relative-json-pointer": _compiled("(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)"),
    "regex": is_ecma_regex,
}
