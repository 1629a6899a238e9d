"""The one chunking rule, message sizes, SQS text and the attribute conversion (``contract/batching.py``)."""

from __future__ import annotations

import base64
import binascii
import itertools
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ENTRIES,
    NOT_SQS_TEXT,
    batch_calls,
    constrained_batches,
    message_bytes,
    send_attribute,
    sqs_text,
)


def _sizes(batches: list[list[int]]) -> list[int]:
    return [sum(batch) for batch in batches]


# --- constrained_batches -----------------------------------------------------------------------------


def test_an_empty_input_gives_no_batch() -> None:
    # GIVEN no items / WHEN batched / THEN there is no batch at all (not one empty batch)
    assert list(constrained_batches([], 10, 3, get_len=int)) == []


def test_items_exactly_at_the_byte_limit_share_a_batch_and_one_byte_more_starts_the_next() -> None:
    # GIVEN items whose sizes sum to exactly the limit, then one more byte
    # WHEN batched by size
    batches = list(constrained_batches([4, 6, 1], 10, get_len=int))
    # THEN the first two fill one batch to the limit and the last starts a new one
    assert batches == [[4, 6], [1]]


def test_a_single_item_of_exactly_the_limit_is_allowed_even_when_strict() -> None:
    # GIVEN an item the size of the limit / WHEN batched strictly / THEN it is a batch of its own
    assert list(constrained_batches([10, 10], 10, get_len=int)) == [[10], [10]]


def test_an_item_over_the_byte_limit_goes_alone_when_not_strict() -> None:
    # GIVEN a small item, one over the limit, then another small one
    # WHEN batched with strict=False (the service decides about the large one)
    batches = list(constrained_batches([3, 11, 2], 10, get_len=int, strict=False))
    # THEN the large one is alone, and nothing is dropped or reordered
    assert batches == [[3], [11], [2]]


def test_an_item_over_the_byte_limit_raises_when_strict() -> None:
    # GIVEN an item over the limit / WHEN batched strictly / THEN the error names its size and the limit
    with pytest.raises(ValueError, match=r"size 11 is over max_size=10"):
        list(constrained_batches([3, 11], 10, get_len=int))


def test_the_count_limit_ends_a_batch_before_the_byte_limit() -> None:
    # GIVEN 25 one-byte items / WHEN batched by 10 entries and plenty of bytes / THEN batches of 10, 10, 5
    assert [len(batch) for batch in constrained_batches([1] * 25, 1000, 10, get_len=int)] == [10, 10, 5]


@pytest.mark.parametrize(("max_size", "max_count"), [(0, None), (-1, None), (10, 0)])
def test_limits_that_allow_nothing_are_refused(max_size: int, max_count: int | None) -> None:
    # GIVEN a limit no item could meet / WHEN batching starts / THEN the error names the limit
    with pytest.raises(ValueError, match="max_size" if max_size <= 0 else "max_count"):
        list(constrained_batches([1], max_size, max_count, get_len=int))


@given(
    items=st.lists(st.integers(min_value=0, max_value=40), max_size=60),
    max_size=st.integers(min_value=1, max_value=30),
    max_count=st.one_of(st.none(), st.integers(min_value=1, max_value=7)),
)
def test_batches_are_greedy_in_order_and_within_both_limits(
    items: list[int], max_size: int, max_count: int | None
) -> None:
    # GIVEN any sizes (some over the limit) and any limits
    # WHEN batched with strict=False
    batches = list(constrained_batches(items, max_size, max_count, get_len=int, strict=False))
    # THEN every item is there once, in order, and no batch is empty
    assert [item for batch in batches for item in batch] == items
    assert all(batches)
    for batch in batches:
        # AND each batch keeps both limits, except an oversized item alone
        assert max_count is None or len(batch) <= max_count
        assert sum(batch) <= max_size or len(batch) == 1
    for batch, following in itertools.pairwise(batches):
        # AND a batch ends only where the next item would break a limit (greedy)
        assert (max_count is not None and len(batch) == max_count) or sum(batch) + following[0] > max_size


# --- message sizes -----------------------------------------------------------------------------------


def test_message_bytes_counts_the_body_and_each_attributes_name_type_and_value_in_utf8() -> None:
    # GIVEN a body and a string attribute with multi-byte characters, and a binary attribute
    attributes = {
        "clé": {"DataType": "String", "StringValue": "€"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\x02"},
    }
    # WHEN sized / THEN every part counts in bytes: 5 + (4 + 6 + 3) + (4 + 6 + 3)
    assert message_bytes("héll", attributes) == 5 + 13 + 13


def test_message_bytes_counts_a_lone_surrogate_as_three_bytes_instead_of_failing() -> None:
    # GIVEN a body with a lone surrogate (a hand-built event can hold one)
    # WHEN sized / THEN it counts as the three bytes of its surrogatepass encoding
    assert message_bytes("a\ud800") == 4


def test_the_limits_are_the_services_documented_ones() -> None:
    # GIVEN SQS's and SNS's batch limits / THEN 10 entries and 256 KiB per call
    assert (MAX_BATCH_ENTRIES, MAX_BATCH_BYTES) == (10, 262_144)


# --- SQS text and the attribute conversion ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain \t\n\r text", "plain \t\n\r text"),
        ("bell\x07", "bell\\u0007"),
        ("lone\ud800", "lone\\ud800"),
        ("nonchar\uffff", "nonchar\\uffff"),
        ("emoji \U0001f600", "emoji \U0001f600"),
    ],
)
def test_sqs_text_escapes_exactly_the_characters_sqs_refuses(text: str, expected: str) -> None:
    # GIVEN text with and without characters outside SQS's allowed set / WHEN made SQS text
    # THEN only the refused ones become \\u escapes, and doing it twice changes nothing more
    assert sqs_text(text) == expected
    assert sqs_text(sqs_text(text)) == expected


def test_send_attribute_converts_the_lambda_event_shape_to_send_messages() -> None:
    # GIVEN attributes as a Lambda event carries them (camelCase, base64 binary)
    string = {"dataType": "String.custom", "stringValue": "x\x00"}
    binary = {"dataType": "Binary", "binaryValue": base64.b64encode(b"\xff\x00").decode()}
    # WHEN converted / THEN they are in SendMessage's shape, the string made SQS text, the binary decoded
    assert send_attribute(string) == {"DataType": "String.custom", "StringValue": "x\\u0000"}
    assert send_attribute(binary) == {"DataType": "Binary", "BinaryValue": b"\xff\x00"}


def test_send_attribute_refuses_a_binary_value_that_is_not_base64() -> None:
    # GIVEN a hand-built binary attribute that is not base64 / WHEN converted / THEN binascii's error
    with pytest.raises(binascii.Error):
        send_attribute({"dataType": "Binary", "binaryValue": "not base64!"})


def test_batch_calls_applies_the_services_limits_and_sends_an_oversized_message_alone() -> None:
    # GIVEN small messages, one over 256 KiB among them, and two that fill a call's bytes exactly
    sizes = [1] * 5 + [MAX_BATCH_BYTES + 1] + [1] * 10 + [MAX_BATCH_BYTES // 2] * 2
    # WHEN chunked for batch calls
    batches = list(batch_calls(sizes, get_len=int))
    # THEN calls hold at most 10 entries and 256 KiB, and the oversized message goes alone, in order
    assert batches == [[1] * 5, [MAX_BATCH_BYTES + 1], [1] * 10, [MAX_BATCH_BYTES // 2] * 2]


def _sqs_allows(code_point: int) -> bool:
    """SQS's and SNS's documented set of allowed characters, range by range."""
    return (
        code_point in (0x9, 0xA, 0xD)
        or 0x20 <= code_point <= 0xD7FF
        or 0xE000 <= code_point <= 0xFFFD
        or 0x10000 <= code_point <= 0x10FFFF
    )


def test_not_sqs_text_matches_exactly_the_characters_outside_the_documented_set() -> None:
    # GIVEN every Unicode code point
    # WHEN the pattern (written as the set's complement, so that it compiles fast) is tried on each
    refused = [code_point for code_point in range(sys.maxunicode + 1) if NOT_SQS_TEXT.match(chr(code_point))]
    # THEN it matches those and only those the documented allowed set leaves out
    assert refused == [code_point for code_point in range(sys.maxunicode + 1) if not _sqs_allows(code_point)]
    assert 0xD800 in refused  # a lone surrogate, the case JSON can spell in ASCII
