"""SNS FIFO message ids: the group of an order and the deduplication id of an event.

SNS accepts a ``MessageGroupId`` or ``MessageDeduplicationId`` of 1 to 128 characters of
``A-Za-z0-9`` and ASCII punctuation. The deduplication id is always the SHA-256 hex of the event id,
so distinct events never share one; the group id is the order id when SNS accepts it as is.
"""

from __future__ import annotations

import hashlib
import re

#: SNS's rule for FIFO message group and deduplication ids.
SNS_FIFO_ID = re.compile(r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}")
#: Marks a hashed group id (two orders sharing a group only share its ordering, never lose a message).
HASHED_GROUP_PREFIX = "h:"


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sns_deduplication_id(event_id: str) -> str:
    """The SHA-256 hex of the UTF-8 event id, always (injective, 64 characters)."""
    return _sha256_hex(event_id)


def sns_group_id(order_id: str) -> str:
    """The order id if SNS accepts it as a group id, else ``"h:"`` + its SHA-256 hex."""
    return order_id if SNS_FIFO_ID.fullmatch(order_id) else HASHED_GROUP_PREFIX + _sha256_hex(order_id)
