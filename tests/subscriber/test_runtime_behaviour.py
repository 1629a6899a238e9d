"""The subscriber helper's reading of a body where the interpreter's version decides what json does.

The layer runs on python3.14 (``aws_lambda.Runtime.PYTHON_3_14``); ``tools/runtime_python.py`` runs
these tests there, and the suite runs them on 3.11. Two limits of ``json.loads`` differ or can be
reached by a body that SQS carries (up to 256 KB): an integer of more digits than ``int()`` converts
(``sys.get_int_max_str_digits()``, 4,300 by default) raises ValueError, and nesting raises
RecursionError at about 1,000 levels on 3.11 but only past roughly 10,000 on 3.14 (it measures the C
stack, not a count). Either way the record is not a notification: it is left to the dead-letter
queue alone, and the rest of its batch is handled.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import NotANotification, parse
from tests.json_depth import parses_here
from tests.subscriber.harness import SubscriberWorld, notification_record

#: Python's default limit on the digits int() converts from a string (3.11+; PYTHONINTMAXSTRDIGITS).
DEFAULT_INT_MAX_STR_DIGITS = 4300


def _thin(extra: str) -> str:
    return '{"event_id": "event-x", "order_id": "order-x", "payload_sha256": "sha-x", "x": ' + extra + "}"


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


HOSTILE = [
    pytest.param(_thin("1" * 5000), id="integer-of-5000-digits"),
    pytest.param(_thin(_nested(5_000)), id="nested-5000-levels"),
    pytest.param(_thin(_nested(120_000)), id="nested-120000-levels"),
]


@pytest.fixture
def default_int_limit() -> Iterator[None]:
    """The Lambda runtime's limit on int() conversions (the default), whatever the test process set."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(DEFAULT_INT_MAX_STR_DIGITS)
    yield
    sys.set_int_max_str_digits(before)


@pytest.mark.usefixtures("default_int_limit")
def test_an_integer_past_the_int_conversion_limit_is_not_a_notification() -> None:
    # GIVEN a raw body whose one number has 5,000 digits, past int()'s 4,300
    record = {"messageId": "m-1", "body": _thin("1" * 5000), "messageAttributes": {}}
    # WHEN it is parsed
    # THEN it is not a notification, and the reason is the conversion limit (a ValueError), not a crash
    with pytest.raises(NotANotification, match="integer string conversion"):
        parse(record)


@pytest.mark.usefixtures("default_int_limit")
@pytest.mark.parametrize("raw", [True, False], ids=["raw-delivery", "sns-envelope"])
@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_body_json_cannot_parse_on_this_python_is_left_alone_to_the_dead_letter_queue(
    dynamodb: Any, hostile: str, raw: bool
) -> None:
    # GIVEN a batch: a good notification, a body with too many digits or nested thousands of levels
    # deep (json.loads refuses it, or on 3.14 reads the 5,000 levels), then a second good one
    world = SubscriberWorld(dynamodb, prefix="deep-")
    body = (
        hostile if raw else json.dumps({"Type": "Notification", "MessageId": "s", "TopicArn": "t", "Message": hostile})
    )
    records = [
        notification_record("event-0", "order-0"),
        {"messageId": "m-hostile", "body": body, "messageAttributes": {}},
        notification_record("event-1", "order-1"),
    ]
    readable = parses_here(hostile)
    # WHEN the batch is handled
    response = world.counting()({"Records": records})
    # THEN the others take effect once; the hostile record, when this json cannot read it, is the only
    # one redelivered (and so reaches the DLQ), else it is a notification like any other
    # (a RecursionError out of the handler would fail the whole batch, every time)
    if readable:
        assert response == {"batchItemFailures": []}
        assert world.counters() == Counter({"order-0": 1, "order-x": 1, "order-1": 1})
    else:
        assert response == {"batchItemFailures": [{"itemIdentifier": "m-hostile"}]}
        assert world.counters() == Counter({"order-0": 1, "order-1": 1})


def test_json_nesting_is_refused_at_some_depth_a_body_can_reach() -> None:
    # GIVEN a nesting of 120,000 levels (240,000 characters: under SQS's 256 KB)
    text = _nested(120_000)
    assert len(text) < 256 * 1024
    # WHEN this interpreter's json reads it
    # THEN it refuses it with RecursionError (3.11: the recursion limit; 3.14: the C stack), so the
    # refusal path the subscriber takes for it is the one tested above on every version
    with pytest.raises(RecursionError):
        json.loads(text)
