"""What the consumer and the reconciler rely on that a Python version could change, pinned on every version.

The functions run on python3.14 (``aws_lambda.Runtime.PYTHON_3_14``); the suite runs on 3.11, and
``tools/runtime_python.py`` (``make test-runtime``, and ``make test`` through ``--fast``) runs this
module on the runtime's own interpreter. Each test fixes an outcome as literal text or digests, so a
version that writes one byte differently, reads one body otherwise or formats one status otherwise
fails here before it deploys:

* json: the bytes of the canonical JSON (what the fingerprint and the derived keys hash); a body
  whose integer has more digits than ``int()`` converts, whatever ``sys.set_int_max_str_digits``
  says; nesting that 3.11's json refuses (RecursionError) and 3.14's reads (it measures the C stack);
* decimal: the canonical text of DynamoDB's edge numbers, which never consults a decimal context;
* enum: the statuses (``StrEnum``) format, compare and serialize as their values;
* threads: what the batch's pool and the reconciler's worker rely on from ``concurrent.futures``
  and ``threading``.

Docstrings and ``assert`` under ``-O``/``-OO`` are in ``tests/test_function_source.py`` and
``tests/consumer/test_optimized_python.py``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from decimal import ROUND_FLOOR, Clamped, Context, Decimal, Inexact, InvalidOperation, Overflow, Rounded, localcontext
from decimal import Underflow as DecimalUnderflow

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import sns_ids
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.canonical_json import canonical_json
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.dynamodb_numbers import number_text
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import (
    from_attribute_value,
    parse_body,
    parse_order_message,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import STATUS_PENDING, STATUS_SENT, Status
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.order_schema import is_integer, is_multiple
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import pending_shard
from idempotent_order_pipeline._lambda_asset.order_consumer.pipeline import Outcome
from tests.consumer.harness import Crash, World, sqs_record
from tests.json_depth import parses_here

# --- json: the canonical bytes ------------------------------------------------------------------------

#: Every kind of value a body holds: escapes, non-ASCII, U+2028, an astral character spelled as a
#: surrogate pair, NUL, -0.0, DynamoDB's smallest and largest magnitudes, 38 digits, exponents.
GOLDEN_BODY = (
    '{"order_id": "o-\\u00e9-1", "customer": {"name": "J\\u00fcrgen \\"J\\" O\'Neil", "tier": "gold"}, '
    '"amounts": [1, 1.50, -0.0, 1e-130, 9.9999999999999999999999999999999999999e125, '
    "12345678901234567890123456789012345678, 0.1, 1E+3], "
    '"note": "tab\\tline\\u2028sep </script> \\ud83d\\ude00 \\u0000", "flags": [true, false, null], "e": {}}'
)
GOLDEN_CANONICAL = (
    '{"amounts":[1,1.5,0,0.'
    + "0" * 129
    + "1,"
    + "9" * 38
    + "0" * 88
    + ",12345678901234567890123456789012345678,0.1,1000],"
    '"customer":{"name":"J\u00fcrgen \\"J\\" O\'Neil","tier":"gold"},"e":{},"flags":[true,false,null],'
    '"note":"tab\\tline\u2028sep </script> \U0001f600 \\u0000","order_id":"o-\u00e9-1"}'
)
GOLDEN_FINGERPRINT = "1863c64efe3d5bb8297a92b27fc5b8f8fc4eab9364ab3e357b59438d104eff36"
#: derive_event_id of GOLDEN_BODY with the identity fields order_id, customer, amounts.
GOLDEN_DERIVED_KEY = "fe90a2284898e644def35305229217e607e2019f4f98c5d29e77c0bbb85c66cd"


def test_the_canonical_json_and_the_fingerprint_are_the_same_bytes_on_every_version() -> None:
    # GIVEN a body with every kind of value, parsed as the consumer parses it
    order = parse_body(GOLDEN_BODY)
    # WHEN its canonical JSON and its fingerprint are computed
    text = canonical_json(order)
    # THEN the text is byte for byte the golden one (json.dumps' escaping, ensure_ascii=False, sorted keys)
    assert text == GOLDEN_CANONICAL
    # AND the fingerprint is its SHA-256, the digest stored with every record since 0.1.0
    assert hashlib.sha256(GOLDEN_CANONICAL.encode("utf-8")).hexdigest() == GOLDEN_FINGERPRINT
    assert payload_sha256(order) == GOLDEN_FINGERPRINT
    assert parse_order_message(GOLDEN_BODY).payload_sha256 == GOLDEN_FINGERPRINT


def test_derived_keys_shards_and_sns_ids_are_the_same_on_every_version() -> None:
    # GIVEN the golden body and fixed ids
    order = parse_body(GOLDEN_BODY)
    # WHEN the consumer derives its key, the pending index's shard and the SNS ids
    # THEN each is the golden value (a changed digest would key one order twice across a deploy)
    assert derive_event_id(order, ("order_id", "customer", "amounts")) == GOLDEN_DERIVED_KEY
    assert (pending_shard("evt-1"), pending_shard("o-\u00e9-1")) == ("19", "18")
    assert sns_ids.sns_deduplication_id("evt-1") == "7b409f932d2c88e97f0c17676c8420d3ea0dab6edb150a89b5684a8ad6d6c4c7"
    assert (
        sns_ids.queue_deduplication_id("evt-1", "ab" * 32)
        == "bc27ce8cd4b0ded6ff95fb42e41bdfa29107a015f64ddfde354d6088802ef11d"
    )
    assert (
        sns_ids.sns_group_id("o \u00e9 1") == "sha256:8bf8c59e70d3dd2a1bf777db30535622095b6e002aabc33a4e2225f2e708d8a0"
    )


# --- json: bodies whose reading depends on the interpreter ----------------------------------------------

#: Python's default limit on the digits int() converts from a string (3.11+; PYTHONINTMAXSTRDIGITS).
DEFAULT_INT_MAX_STR_DIGITS = 4300
#: The smallest limit Python accepts, the default, and none (0): the consumer's outcome is the same.
INT_LIMITS = [pytest.param(640, id="limit-640"), pytest.param(4300, id="limit-4300"), pytest.param(0, id="no-limit")]


@pytest.fixture(params=INT_LIMITS)
def int_limit(request: pytest.FixtureRequest) -> Iterator[int]:
    """A process-wide int() conversion limit for one test, restored after it."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(request.param)
    yield request.param
    sys.set_int_max_str_digits(before)


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        pytest.param("7" * 5000, "has 5000 significant digits", id="5000-digits"),
        pytest.param("1" + "0" * 4300, "out of range", id="4301-digits-one-significant"),
        pytest.param("-" + "9" * 4301, "has 4301 significant digits", id="negative-4301-digits"),
    ],
)
def test_an_integer_past_the_int_conversion_limit_is_parked_whatever_the_limit(
    world: World, int_limit: int, number: str, reason: str
) -> None:
    # GIVEN an order whose nested number has more digits than int() converts by default (4,300)
    body = '{"order_id": "o-big", "items": [{"qty": ' + number + "}]}"
    record = sqs_record(body)
    # WHEN the handler processes it under this int() limit (the literal is read as text, never by int())
    response = world.invoke([record])
    # THEN it is parked at once as INVALID_MESSAGE naming the field, nothing written: no ValueError escapes
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["Body"] == body
    message = parked["MessageAttributes"]["error_message"]["StringValue"]
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"
    assert message.startswith("items[0].qty: ")
    assert reason in message
    assert world.order_rows() == {}


def test_the_largest_integer_dynamodb_stores_is_recorded_exactly(world: World) -> None:
    # GIVEN an order whose amount is 38 nines followed by 88 zeros (126 digits, DynamoDB's largest)
    largest = "9" * 38 + "0" * 88
    # WHEN the handler processes it under the smallest int() limit Python allows
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        response = world.invoke([sqs_record('{"order_id": "o-max", "amount": ' + largest + "}")])
    finally:
        sys.set_int_max_str_digits(before)
    # THEN it is recorded with its exact digits
    assert response == {"batchItemFailures": []}
    row = world.dynamodb.get_item(TableName=world.orders_table, Key={"order_id": {"S": "o-max"}})["Item"]
    assert row["amount"] == {"N": largest}


@pytest.mark.parametrize("levels", [5_000, 120_000])
def test_nesting_json_reads_on_one_version_and_not_another_is_parked_alike(world: World, levels: int) -> None:
    # GIVEN an order nested thousands of levels deep (3.11's json refuses 5,000 levels, 3.14's reads
    # them; neither reads 120,000)
    body = '{"order_id": "o-deep", "x": ' + "[" * levels + "]" * levels + "}"
    readable = parses_here(body)
    # WHEN the handler processes it
    response = world.invoke([sqs_record(body)])
    # THEN it is parked at once as INVALID_MESSAGE on every version, for the reason this json gives
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"
    message = parked["MessageAttributes"]["error_message"]["StringValue"]
    if readable:
        assert message == "x" + "[0]" * 32 + " is nested deeper than DynamoDB's 32 levels"
    else:
        assert message.startswith("body is not valid JSON: ")
    assert world.order_rows() == {}


# --- decimal: DynamoDB's numbers, exact, with no context consulted ------------------------------------------

EDGE_NUMBERS = [
    pytest.param("1E-130", "0." + "0" * 129 + "1", id="smallest"),
    pytest.param("-1E-130", "-0." + "0" * 129 + "1", id="smallest-negative"),
    pytest.param("9.9999E125", "99999" + "0" * 121, id="9.9999e125"),
    pytest.param("9.9999999999999999999999999999999999999E+125", "9" * 38 + "0" * 88, id="largest"),
    pytest.param(
        "1.2345678901234567890123456789012345678E-93",
        "0." + "0" * 92 + "12345678901234567890123456789012345678",
        id="38-digits-small",
    ),
    pytest.param("12345678901234567890123456789012345678", "12345678901234567890123456789012345678", id="38-digits"),
    pytest.param("1.000000000000000000000000000000000000000E+41", "1" + "0" * 41, id="dynamodb-42-digit-form"),
    pytest.param("-0.000", "0", id="negative-zero"),
    pytest.param("0.1", "0.1", id="one-tenth"),
]


def _hostile_context() -> Context:
    """A context that would round everything to 3 digits, or trap, were it consulted."""
    return Context(
        prec=3,
        rounding=ROUND_FLOOR,
        Emin=-5,
        Emax=5,
        traps=[Clamped, Inexact, InvalidOperation, Overflow, Rounded, DecimalUnderflow],
    )


@pytest.mark.parametrize(("stored", "expected"), EDGE_NUMBERS)
def test_dynamodb_edge_numbers_keep_their_exact_text_whatever_the_decimal_context(stored: str, expected: str) -> None:
    # GIVEN a number as DynamoDB returns it (a reconciled row), read as Decimal as the store reads it
    value = from_attribute_value({"N": stored})
    assert isinstance(value, Decimal)
    # WHEN its canonical text is written under the default context, and under one that would round or trap
    default = number_text(value)
    with localcontext(_hostile_context()):
        hostile = number_text(from_attribute_value({"N": stored}))
    # THEN both are the exact positional text: no context is consulted
    assert default == hostile == expected


def test_a_float_from_a_producer_is_written_as_its_shortest_repr() -> None:
    # GIVEN floats a producer's library passes (repr is the shortest text that round-trips, since 3.1)
    # WHEN the canonical text is written / THEN it is that text, positional
    assert [number_text(value) for value in (0.1, 1e-130, 1.5e125, -2.5)] == [
        "0.1",
        "0." + "0" * 129 + "1",
        "15" + "0" * 124,
        "-2.5",
    ]


def test_schema_number_rules_are_exact_for_38_digits_under_the_default_context() -> None:
    # GIVEN 38-digit numbers, beyond the default context's 28 digits of precision
    whole = Decimal("12345678901234567890123456789012345678")
    odd = Decimal("12345678901234567890123456789012345679")  # a literal: whole + 1 would round to 28 digits
    almost = Decimal("1234567890123456789012345678901234567.8")
    # WHEN the schema's integer and multipleOf rules check them
    # THEN the answers are exact (no rounding to 28 digits would tell them apart)
    assert is_integer(whole)
    assert not is_integer(almost)
    assert is_multiple(whole, 2)
    assert not is_multiple(odd, 2)
    assert is_multiple(Decimal("1E-130"), Decimal("1E-130"))
    assert not is_multiple(almost, Decimal("0.5"))


# --- enum: statuses are their values -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "value"), [(STATUS_SENT, "sent"), (STATUS_PENDING, "pending"), (Outcome.INVALID, "invalid")]
)
def test_statuses_format_compare_and_serialize_as_their_values(member: Status | Outcome, value: str) -> None:
    # GIVEN a StrEnum member the functions write into DynamoDB, logs and metrics
    # WHEN it is formatted every way the code and botocore do
    # THEN each gives the bare value, never "Status.SENT" (Enum.__format__ changed in 3.12 for mixed-in enums)
    assert f"{member}" == str(member) == format(member, "") == "%s" % member == value  # noqa: UP031
    assert f"{member:>8}" == f"{value:>8}"
    assert json.dumps({"S": member}) == json.dumps({"S": value})
    assert member == value
    assert hash(member) == hash(value)
    assert {value: 1}[member] == 1
    assert type(member)(value) is member


# --- threads: what the batch's pool and the reconciler's worker rely on -----------------------------------


def test_a_crash_in_a_pool_job_reaches_the_waiting_thread_and_a_queued_job_never_runs() -> None:
    # GIVEN a one-thread pool like the batch's (pipeline._gather): a job that will crash (a BaseException
    # that is not an Exception) holding the thread, and a job queued behind it
    ran: list[str] = []
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="order")
    started, release = threading.Event(), threading.Event()

    def crash() -> None:
        started.set()
        release.wait(5)
        raise Crash("boom")

    try:
        crashing = pool.submit(crash)
        assert started.wait(5)
        queued = pool.submit(ran.append, "queued")
        # WHEN the queued job is cancelled, the crash happens and the caller waits for the first exception
        assert queued.cancel()
        release.set()
        done, _ = wait([crashing, queued], timeout=5, return_when=FIRST_EXCEPTION)
        # THEN the wait returns with the crash itself as the job's exception, and the cancelled job never ran
        assert crashing in done
        assert isinstance(crashing.exception(), Crash)
        assert queued.cancelled()
        # AND the pool's thread survived the crash: the next job runs on it, named by the prefix
        assert pool.submit(lambda: threading.current_thread().name).result(timeout=5).startswith("order")
        assert ran == []
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def test_shutting_a_pool_down_without_waiting_cancels_its_queued_jobs() -> None:
    # GIVEN a pool whose one thread is held by a job, with three jobs queued (a batch past its deadline)
    pool = ThreadPoolExecutor(max_workers=1)
    release = threading.Event()
    holding = pool.submit(release.wait, 5)
    queued = [pool.submit(time.sleep, 0) for _ in range(3)]
    # WHEN it is shut down as Pipeline._pool does (wait=False, cancel_futures=True)
    pool.shutdown(wait=False, cancel_futures=True)
    # THEN the queued jobs are cancelled at once and the running one finishes on its own
    assert all(job.cancelled() for job in queued)
    release.set()
    assert holding.result(timeout=5) is True


def test_a_daemon_worker_that_overruns_is_left_behind_after_a_bounded_join() -> None:
    # GIVEN the reconciler's worker: a daemon thread whose call does not answer
    release = threading.Event()
    worker = threading.Thread(target=release.wait, args=(5,), name="reconciler-run", daemon=True)
    worker.start()
    # WHEN the run joins it with a timeout (Reconciler.run's slices)
    started = time.monotonic()
    worker.join(timeout=0.05)
    # THEN the join returns at the timeout with the worker still alive, and it is a daemon (it cannot
    # keep the process); a condition's wait returns False at its timeout (the byte budget's acquire)
    assert time.monotonic() - started < 2
    assert worker.is_alive()
    assert worker.daemon
    condition = threading.Condition()
    with condition:
        assert condition.wait(0.01) is False
    release.set()
    worker.join(timeout=5)
    assert not worker.is_alive()
