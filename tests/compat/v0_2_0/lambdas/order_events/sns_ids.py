"""FIFO ids for SNS topics (and SQS queues, whose rule is the same): always valid, deduplication injective.

SNS's documented rule for ``MessageGroupId`` and ``MessageDeduplicationId`` (Publish and
PublishBatch), and SQS's for SendMessage: 1 to 128 characters, each alphanumeric (``a-z``,
``A-Z``, ``0-9``) or ASCII punctuation (``!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~``). moto does not
enforce it; :data:`FIFO_ID` is that rule, and the unit tests check every id against it.

* Deduplication id: the SHA-256 hex of the UTF-8 event id, always. Never the raw id: a raw id
  could equal another event's hash, and SNS would then drop that event's notification as a
  duplicate while the consumer marks it ``sent``.
* Group id: the order id itself when the rule accepts it (so groups stay readable and an id that
  is already a group id maps to itself), else ``sha256:`` + the SHA-256 hex of the order id
  (71 characters). Group ids only scope ordering: two orders sharing a group cannot lose a message.
"""

from __future__ import annotations

import hashlib
import re

#: SNS's and SQS's rule for a FIFO group or deduplication id.
FIFO_ID = re.compile(r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}")
#: Marks a group id that is the hash of an order id the rule does not accept.
HASHED_GROUP_PREFIX = "sha256:"


def _sha256_hex(value: str) -> str:
    # surrogatepass: total and still injective, should a caller pass text that is not valid Unicode.
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def is_valid_fifo_id(value: str) -> bool:
    """Whether SNS (and SQS) accept ``value`` as a group or deduplication id."""
    return FIFO_ID.fullmatch(value) is not None


def sns_deduplication_id(event_id: str) -> str:
    """The ``MessageDeduplicationId`` of an event: the SHA-256 hex of its UTF-8 id (64 characters)."""
    return _sha256_hex(event_id)


def sns_group_id(order_id: str) -> str:
    """The ``MessageGroupId`` of an order: the order id if valid as is, else ``sha256:`` + its SHA-256 hex."""
    return order_id if is_valid_fifo_id(order_id) else HASHED_GROUP_PREFIX + _sha256_hex(order_id)
