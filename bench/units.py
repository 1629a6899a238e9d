"""DynamoDB item sizes and request units, by the rules DynamoDB bills on-demand tables with.

Rules (Amazon DynamoDB Developer Guide, "Read and write operations" and "Transactions: capacity
management"):

* item size: for every attribute, the UTF-8 length of its name plus the size of its value (strings:
  UTF-8 bytes; numbers: about one byte per two significant digits plus one; binary: bytes; booleans
  and null: 1; maps and lists: 3 bytes plus each element, plus 1 byte per element, plus the names of
  a map's keys);
* writes: 1 write request unit (WRU) per started KB (1,024 bytes) of the item; for PutItem and
  UpdateItem the larger of the item before and after the write counts, for DeleteItem the item
  deleted; a conditional write whose condition fails still consumes, sized by the larger of the
  existing and the new item (minimum 1);
* transactional writes: 2 WRU per started KB per item; a cancelled transaction is counted as if it
  had run (the issue's rule, "conditional failures still consume": an upper bound for the redelivery
  path of the transactional consumers, never in their favour);
* reads: per started 4 KB, 0.5 read request unit (RRU) eventually consistent (GetItem's default), 1
  strongly consistent, 2 transactional; a read of a missing item still costs the minimum;
* ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` adds no read (the item comes back with the failed
  write that was billed anyway).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

#: Bytes per write request unit.
WRITE_UNIT_BYTES = 1024
#: Bytes per read request unit.
READ_UNIT_BYTES = 4096
#: Multiplier of transactional writes and reads.
TRANSACTION_FACTOR = 2
#: Read units per 4 KB by consistency.
EVENTUALLY_CONSISTENT_READ = 0.5
STRONGLY_CONSISTENT_READ = 1.0

AttributeValue = Mapping[str, Any]
Item = Mapping[str, AttributeValue]


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number: one per two significant digits, plus one."""
    digits = str(Decimal(text).normalize()).lstrip("-").split("E")[0].replace(".", "").lstrip("0")
    return (max(len(digits), 1) + 1) // 2 + 1


def value_size(value: AttributeValue) -> int:
    """Bytes of one attribute value in DynamoDB's wire format (``{"S": "..."}`` and so on)."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS",):
        return sum(len(v.encode("utf-8")) for v in inner)
    if kind in ("NS",):
        return sum(number_size(v) for v in inner)
    if kind in ("BS",):
        return sum(len(v) for v in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: Item | None) -> int:
    """Bytes of an item (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(size_bytes: int, *, transactional: bool = False) -> float:
    """WRU of one item write of this size (at least one unit)."""
    units = max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))
    return float(units * (TRANSACTION_FACTOR if transactional else 1))


def read_units(size_bytes: int, *, consistent: bool = False, transactional: bool = False) -> float:
    """RRU of one item read of this size (at least the minimum, even for a missing item)."""
    chunks = max(1, math.ceil(size_bytes / READ_UNIT_BYTES))
    if transactional:
        return float(chunks * TRANSACTION_FACTOR)
    return chunks * (STRONGLY_CONSISTENT_READ if consistent else EVENTUALLY_CONSISTENT_READ)
