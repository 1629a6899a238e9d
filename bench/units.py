"""Billed units: DynamoDB request units by the rules of on-demand tables, SNS and SQS requests.

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
* global secondary index writes ("Global secondary indexes: provisioned throughput considerations",
  "Write capacity units" in the same guide): a table write that puts an item into an index (the
  item gains every key attribute of the index) costs one index write, one that takes it out (the
  item loses one) costs one, one that changes an index key's value costs two (delete and put), one
  that changes only attributes the index projects costs one, and one that leaves the index entry as
  it was costs nothing. Each index write is billed like a standard write of the index entry (the
  table's key, the index's keys and the projected attributes): 1 WRU per started KB. The entry is
  written by DynamoDB after the table write, not in the caller's transaction, so a transactional
  table write does not double it (the bench's reading: the guide states the transactional factor
  for the items of the transaction only);
* reads: per started 4 KB, 0.5 read request unit (RRU) eventually consistent (GetItem's default), 1
  strongly consistent, 2 transactional; a read of a missing item still costs the minimum;
* ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` adds no read (the item comes back with the failed
  write that was billed anyway);
* ``Query``: the sizes of the items it returns, summed and rounded up to the next 4 KB (at least one
  unit); an index ``Query`` is eventually consistent; ``BatchGetItem``: each item as its own
  ``GetItem``;
* ``BatchWriteItem``: each put or delete in it is billed as the single ``PutItem`` or ``DeleteItem``
  would be (1 WRU per started KB of the item; the larger of the old and new item for a put, the
  deleted item for a delete); the batch itself adds nothing and is not transactional;
* PartiQL (``ExecuteStatement``, ``BatchExecuteStatement``): each write statement as the single write
  it stands for. An ``UPDATE`` of one item that the sandbox's PartiQL reader reads (its key in the
  ``WHERE``) is sized and index-metered as the ``UpdateItem`` it stands for (the item before and
  after it, :mod:`bench.standin`); any other statement is assumed under 1 KB (1 WRU per write
  statement, 0.5 RRU per eventually consistent read): every item of this benchmark is under 1 KB
  (:mod:`bench.orders`).

SNS and SQS (Amazon SNS and Amazon SQS pricing pages; "each 64 KB chunk of payload is billed as one
request"): a ``Publish`` or ``SendMessage`` is one request per started 64 KB of its payload; a
``PublishBatch`` or ``SendMessageBatch`` of up to 10 messages is billed as one request per started
64 KB of the payload of all its messages together (so a batch of ten 1 KB notifications is one
request, not ten). The payload is the message body plus its message attributes (names, types and
values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

#: Bytes per write request unit.
WRITE_UNIT_BYTES = 1024
#: Bytes per read request unit.
READ_UNIT_BYTES = 4096
#: Multiplier of transactional writes and reads.
TRANSACTION_FACTOR = 2
#: Bytes of payload billed as one SNS or SQS request.
PAYLOAD_CHUNK_BYTES = 64 * 1024
#: Messages allowed in one PublishBatch or SendMessageBatch.
MAX_BATCH_ENTRIES = 10
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


@dataclass(frozen=True)
class IndexShape:
    """What decides an index's writes: its key attributes, the table's and what it projects."""

    name: str
    keys: tuple[str, ...]
    table_keys: tuple[str, ...]
    #: "KEYS_ONLY", "INCLUDE" or "ALL".
    projection: str = "KEYS_ONLY"
    non_key_attributes: tuple[str, ...] = ()

    def entry(self, item: Item | None) -> dict[str, AttributeValue] | None:
        """The index entry of ``item`` (None when the item lacks an index key: not in the index)."""
        if not item or any(key not in item for key in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        names = {*self.table_keys, *self.keys}
        if self.projection == "INCLUDE":
            names |= set(self.non_key_attributes)
        return {name: value for name, value in item.items() if name in names}


def index_write_units(index: IndexShape, before: Item | None, after: Item | None) -> float:
    """WRU one table write costs in ``index``, from the item before and after it."""
    old, new = index.entry(before), index.entry(after)
    if old is None and new is None:
        return 0.0
    if old is None:
        return write_units(item_size(new))
    if new is None:
        return write_units(item_size(old))
    if any(old[key] != new[key] for key in index.keys):
        return write_units(item_size(old)) + write_units(item_size(new))
    if old != new:
        return write_units(max(item_size(old), item_size(new)))
    return 0.0


def payload_requests(payload_bytes: int) -> int:
    """Billed SNS or SQS requests of one API call whose messages carry ``payload_bytes`` in all (at least 1)."""
    return max(1, math.ceil(payload_bytes / PAYLOAD_CHUNK_BYTES))


def batch_requests(message_bytes: list[int]) -> int:
    """Billed requests of one ``PublishBatch`` or ``SendMessageBatch`` with messages of these sizes."""
    if not 1 <= len(message_bytes) <= MAX_BATCH_ENTRIES:
        raise ValueError(f"a batch holds 1..{MAX_BATCH_ENTRIES} messages, got {len(message_bytes)}")
    return payload_requests(sum(message_bytes))


def batch_write_units(puts_and_deletes: list[int]) -> float:
    """WRU of one ``BatchWriteItem`` whose puts and deletes touch items of these sizes (each billed alone)."""
    return sum(write_units(size) for size in puts_and_deletes)
