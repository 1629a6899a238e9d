"""How values are shown: terminal-safe text, UTC timestamps, ages, exact JSON (DynamoDB numbers stay exact)."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import Binary

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import from_attribute_value
from idempotent_order_pipeline.keys import canonical_json

#: Characters never written raw: C0 (tab, newline and carriage return included: one value stays on
#: one line), DEL, C1 (U+0080-U+009F: ``\x9b`` is a CSI on many terminals), lone surrogates, the line
#: and paragraph separators, and the bidirectional controls (they reorder what the operator reads).
#: Any producer can put them into an order id, a body key or value, an attribute.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    """``text`` with every unsafe character written as ``\\uXXXX``: the one escape of everything printed.

    The escape is JSON's own, so a ``--json`` line stays valid JSON that decodes to the exact value
    read from AWS, and a table cell shows the character instead of obeying it. Idempotent: the
    result is printable ASCII wherever the input was unsafe.
    """
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def timestamp(epoch_seconds: Any) -> str | None:
    """``2026-11-30T09:15:00Z`` for epoch seconds (int, float, Decimal or text); None for None."""
    if epoch_seconds is None:
        return None
    return datetime.fromtimestamp(float(epoch_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def age(seconds: float) -> str:
    """A short human duration: ``45s``, ``17m``, ``3h05m``, ``4d``."""
    whole = int(seconds)
    if whole < 120:
        return f"{whole}s"
    if whole < 7200:
        return f"{whole // 60}m"
    if whole < 172800:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d"


def short(value: str | None, width: int) -> str:
    """``value`` cut to ``width`` characters with an ellipsis; ``-`` for nothing."""
    if not value:
        return "-"
    value = safe(value)  # escaped first, so the cut counts the characters shown
    return value if len(value) <= width else value[: width - 1] + "…"


def plain(value: Any) -> Any:
    """A deserialized DynamoDB value with sets and binaries made JSON-friendly (numbers stay Decimal)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=str)
    if isinstance(value, Binary):
        value = getattr(value, "value", b"")  # Binary.value: not in the type stubs
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    return value


def item(raw: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A DynamoDB item (attribute values) as plain values; None for no item."""
    if not raw:
        return None
    return {name: plain(from_attribute_value(value)) for name, value in raw.items()}


def to_json(value: Any) -> str:
    """One line of JSON, keys sorted, numbers written exactly (Decimal included)."""
    return canonical_json(plain(value))
