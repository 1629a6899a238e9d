"""FIFO ids for SNS topics and SQS queues (the same rule): always valid, deduplication injective.

SNS's documented rule for ``MessageGroupId`` and ``MessageDeduplicationId`` (Publish and
PublishBatch), and SQS's for SendMessage: 1 to 128 characters, each alphanumeric (``a-z``,
``A-Z``, ``0-9``) or ASCII punctuation (``!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~``). moto does not
enforce it; :data:`FIFO_ID` is that rule, and the unit tests check every id against it.

* A notification's deduplication id (the FIFO topic): the SHA-256 hex of the UTF-8 event id,
  always. Never the raw id: a raw id could equal another event's hash, and SNS would then drop
  that event's notification as a duplicate while the consumer marks it ``sent``.
* An order's deduplication id (the FIFO queue, :func:`queue_deduplication_id`): the SHA-256 hex
  of the event id, the content fingerprint (``payload_sha256``) and the delivery. SQS drops an
  exact duplicate within its 5-minute interval (a producer's retry: same event, same content), but
  delivers a conflict (same event id, other content), which the consumer parks as
  ``IDEMPOTENCY_CONFLICT``; a deliberate second delivery (a redrive, a resend) names itself, so
  SQS never drops it as a duplicate of the first. The consumer never reads a deduplication id, so
  messages sent under another version's ids (0.2.0: the hash of the event id) stay valid.
* Group id: the order id itself when the rule accepts it (so groups stay readable and an id that
  is already a group id maps to itself), else ``sha256:`` + the SHA-256 hex of the order id
  (71 characters). Group ids only scope ordering: two orders sharing a group cannot lose a message.
"""

from __future__ import annotations

import hashlib
import json
import re

#: SNS's and SQS's rule for a FIFO group or deduplication id.
FIFO_ID = re.compile(r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}")
#: Marks a group id that is the hash of an order id the rule does not accept.
HASHED_GROUP_PREFIX = "sha256:"
#: Starts the text hashed into an order's queue deduplication id. It ends in a line break, which no
#: event id holds (``contract.unicode_text.check_identifier``), so the text is never an event id and
#: the id never equals a notification's (or 0.2.0's queue) id, the hash of an event id.
QUEUE_DEDUPLICATION_TAG = "order-pipeline queue deduplication v1\n"
#: The delivery of a producer's send (and of its retries): SQS drops an exact duplicate of it.
FIRST_DELIVERY = ""
#: The delivery of a redrive's copy: ``redrive:`` + the message id of the DLQ message it copies.
REDRIVE_DELIVERY = "redrive:"
#: The delivery of ``pending --resend``: ``resend:`` + a token new to each resend.
RESEND_DELIVERY = "resend:"


def _sha256_hex(value: str) -> str:
    # surrogatepass: total and still injective, should a caller pass text that is not valid Unicode.
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def is_valid_fifo_id(value: str) -> bool:
    """Whether SNS (and SQS) accept ``value`` as a group or deduplication id."""
    return FIFO_ID.fullmatch(value) is not None


def sns_deduplication_id(event_id: str) -> str:
    """The ``MessageDeduplicationId`` of an event: the SHA-256 hex of its UTF-8 id (64 characters)."""
    return _sha256_hex(event_id)


def queue_deduplication_id(event_id: str, payload_sha256: str, delivery: str = FIRST_DELIVERY) -> str:
    """An order's ``MessageDeduplicationId`` on a FIFO queue (64 hex characters).

    The SHA-256 hex of the event id, the fingerprint of the content (``payload_sha256``, see
    :mod:`.keys`) and ``delivery``, written as a JSON list (injective) after
    :data:`QUEUE_DEDUPLICATION_TAG`. Equal for an exact duplicate; different for a conflict (other
    content) and for another ``delivery``: :data:`FIRST_DELIVERY` for a producer's send, a token of
    its own for a deliberate second delivery (``redrive:<DLQ message id>``, ``resend:<uuid>``).
    """
    return _sha256_hex(QUEUE_DEDUPLICATION_TAG + json.dumps([event_id, payload_sha256, delivery]))


def sns_group_id(order_id: str) -> str:
    """The ``MessageGroupId`` of an order: the order id if valid as is, else ``sha256:`` + its SHA-256 hex."""
    return order_id if is_valid_fifo_id(order_id) else HASHED_GROUP_PREFIX + _sha256_hex(order_id)
