"""SNS (and SQS) FIFO ids, checked against the rule AWS documents, since moto does not enforce it.

SNS Publish / PublishBatchRequestEntry, ``MessageGroupId`` and ``MessageDeduplicationId``: "can
contain up to 128 alphanumeric characters (a-z, A-Z, 0-9) and punctuation
(!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~)"; SQS SendMessage says the same of its FIFO ids. The rule is
written out here on its own, not taken from the module under test.
"""

from __future__ import annotations

import hashlib
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import InvalidTextError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import (
    FIRST_DELIVERY,
    HASHED_GROUP_PREFIX,
    QUEUE_DEDUPLICATION_TAG,
    REDRIVE_DELIVERY,
    RESEND_DELIVERY,
    is_valid_fifo_id,
    queue_deduplication_id,
    sns_deduplication_id,
    sns_group_id,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.unicode_text import check_identifier

DOCUMENTED_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
DOCUMENTED_ALPHABET = frozenset(
    string.ascii_lowercase + string.ascii_uppercase + string.digits + DOCUMENTED_PUNCTUATION
)


def documented_valid(value: str) -> bool:
    """SNS's documented rule: 1 to 128 characters, each alphanumeric or the listed punctuation."""
    return 1 <= len(value) <= 128 and all(character in DOCUMENTED_ALPHABET for character in value)


# Any text at all: every code point, lone surrogates included, with the id alphabet over-represented.
any_text = st.text(st.characters(exclude_categories=[])) | st.text(
    st.sampled_from([*sorted(DOCUMENTED_ALPHABET), " ", "é", "\ud800", "\x00"]), max_size=200
)


def test_documented_punctuation_is_all_of_ascii_punctuation() -> None:
    assert set(DOCUMENTED_PUNCTUATION) == set(string.punctuation)
    assert len(DOCUMENTED_PUNCTUATION) == 32


@pytest.mark.parametrize(
    ("order_id", "kept"),
    [
        pytest.param("o-1", True, id="plain"),
        pytest.param("x" * 128, True, id="128-characters"),
        pytest.param("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", True, id="all-punctuation"),
        pytest.param("x" * 129, False, id="129-characters"),
        pytest.param("an order", False, id="space"),
        pytest.param("ordre-é", False, id="non-ascii"),
        pytest.param("o\t1", False, id="tab"),
        pytest.param("", False, id="empty"),
        pytest.param("o-\ud800", False, id="lone-surrogate"),
    ],
)
def test_group_id_is_the_order_id_when_sns_accepts_it_else_a_prefixed_hash(order_id: str, kept: bool) -> None:
    # GIVEN an order id / WHEN mapped to a group id
    group = sns_group_id(order_id)
    # THEN SNS's documented rule accepts it, and it is the order id itself exactly when that is valid
    assert documented_valid(group)
    assert documented_valid(order_id) is kept
    expected = HASHED_GROUP_PREFIX + hashlib.sha256(order_id.encode("utf-8", "surrogatepass")).hexdigest()
    assert group == (order_id if kept else expected)
    assert len(expected) == 71


@pytest.mark.parametrize("event_id", ["evt-1", "x" * 128, "an event", "é" * 300, "a" * 64, "\ud800"])
def test_deduplication_id_is_always_the_sha256_hex_of_the_event_id(event_id: str) -> None:
    # GIVEN any event id, even one SNS would accept as it is / WHEN mapped / THEN its SHA-256 hex
    dedup = sns_deduplication_id(event_id)
    assert dedup == hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).hexdigest()
    assert documented_valid(dedup)


def test_an_event_id_equal_to_another_events_hash_gets_its_own_deduplication_id() -> None:
    # GIVEN an event id that is the SHA-256 hex of another (a raw id SNS accepts)
    other = "event with spaces"
    raw = hashlib.sha256(other.encode()).hexdigest()
    # WHEN both are mapped / THEN they differ (the old "raw if valid" mapping gave both one id)
    assert sns_deduplication_id(raw) != sns_deduplication_id(other)


@settings(max_examples=300, deadline=None)
@given(value=any_text)
def test_every_id_is_valid_by_the_documented_rule(value: str) -> None:
    # GIVEN any text / WHEN mapped / THEN both ids pass SNS's rule, and the module's rule agrees with the docs
    assert documented_valid(sns_group_id(value))
    assert documented_valid(sns_deduplication_id(value))
    assert is_valid_fifo_id(value) is documented_valid(value)
    # AND a valid group id maps to itself (a redriven message keeps its group)
    assert sns_group_id(sns_group_id(value)) == sns_group_id(value)


@settings(max_examples=300, deadline=None)
@given(left=any_text, right=any_text)
def test_deduplication_ids_are_injective(left: str, right: str) -> None:
    # GIVEN two event ids / WHEN mapped / THEN equal ids exactly when the event ids are equal
    assert (sns_deduplication_id(left) == sns_deduplication_id(right)) is (left == right)
    # AND two order ids share a group only when one of them is literally the other's "sha256:..." group id
    if left != right and sns_group_id(left) == sns_group_id(right):
        assert sns_group_id(left) in (left, right)


# --- the queue's deduplication id of an order: event, content, delivery ---------------------------

fingerprints = st.text("0123456789abcdef", min_size=64, max_size=64)
deliveries = st.sampled_from([FIRST_DELIVERY, REDRIVE_DELIVERY + "m-1", RESEND_DELIVERY + "r-1"]) | any_text


@settings(max_examples=300, deadline=None)
@given(event_id=any_text, fingerprint=fingerprints, delivery=deliveries)
def test_a_queue_deduplication_id_is_always_valid(event_id: str, fingerprint: str, delivery: str) -> None:
    # GIVEN any event id, fingerprint and delivery / WHEN mapped / THEN SQS's documented rule accepts it
    dedup = queue_deduplication_id(event_id, fingerprint, delivery)
    assert documented_valid(dedup)
    assert len(dedup) == 64


@settings(max_examples=300, deadline=None)
@given(left=st.tuples(any_text, fingerprints, deliveries), right=st.tuples(any_text, fingerprints, deliveries))
def test_queue_deduplication_ids_are_equal_exactly_for_the_same_event_content_and_delivery(
    left: tuple[str, str, str], right: tuple[str, str, str]
) -> None:
    # GIVEN two (event id, fingerprint, delivery) / WHEN mapped / THEN equal ids exactly when all three are equal
    assert (queue_deduplication_id(*left) == queue_deduplication_id(*right)) is (left == right)


def test_a_conflict_and_a_redelivery_get_ids_of_their_own() -> None:
    # GIVEN an event with two contents / WHEN mapped / THEN each content has its id, and so has each delivery
    first, other = "a" * 64, "b" * 64
    ids = {
        queue_deduplication_id("evt-1", first),
        queue_deduplication_id("evt-1", other),
        queue_deduplication_id("evt-1", first, REDRIVE_DELIVERY + "m-1"),
        queue_deduplication_id("evt-1", first, REDRIVE_DELIVERY + "m-2"),
        queue_deduplication_id("evt-1", first, RESEND_DELIVERY + "r-1"),
    }
    assert len(ids) == 5
    # AND a delivery that is not named is the producer's first
    assert queue_deduplication_id("evt-1", first) == queue_deduplication_id("evt-1", first, FIRST_DELIVERY)


@settings(max_examples=300, deadline=None)
@given(event_id=any_text, other=any_text, fingerprint=fingerprints, delivery=deliveries)
def test_no_queue_deduplication_id_is_the_hash_of_an_event_id(
    event_id: str, other: str, fingerprint: str, delivery: str
) -> None:
    # GIVEN the text hashed into a queue deduplication id: it holds a line break, which no event id may
    text = QUEUE_DEDUPLICATION_TAG + repr(event_id)
    with pytest.raises(InvalidTextError):
        check_identifier(text, "event_id")
    # THEN no such id equals 0.2.0's queue id (and the notification's id) of an event (SHA-256 collisions aside)
    assert queue_deduplication_id(event_id, fingerprint, delivery) != sns_deduplication_id(other)
