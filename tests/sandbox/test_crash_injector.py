"""The stand-in's crash injection keeps its promise when the function makes calls from several threads."""

from __future__ import annotations

import pytest

from idempotent_order_pipeline.sandbox.chaos import CALLS_OF_A_BATCH_OF_NEW_ORDERS, RandomCrashes
from idempotent_order_pipeline.sandbox.lambda_runtime import CrashOrder, InjectedCrash, _CrashInjector


def test_a_crash_after_a_call_fires_when_that_call_returns_even_if_later_calls_were_sent_meanwhile() -> None:
    # GIVEN an injector armed to crash after the first call returns
    injector = _CrashInjector()
    injector.arm({"at_call": 1, "after": True})
    # WHEN three calls are sent (from the consumer's pool threads) before the first one returns
    first, second, third = (injector.before_call() for _ in range(3))
    # THEN the calls are numbered in the order they were sent, the later ones return unharmed...
    assert (first, second, third) == (1, 2, 3)
    injector.after_call(second)
    injector.after_call(third)
    # ...and the first one's return is where the invocation dies, once
    with pytest.raises(InjectedCrash, match="after an AWS call returned"):
        injector.after_call(first)
    injector.after_call(first)


def test_a_crash_before_a_call_fires_at_its_number_and_an_unarmed_injector_only_counts() -> None:
    # GIVEN an injector armed to crash before the second call
    injector = _CrashInjector()
    injector.arm({"at_call": 2, "after": False})
    # WHEN calls are sent
    assert injector.before_call() == 1
    # THEN the second one never goes out
    with pytest.raises(InjectedCrash, match="before an AWS call was sent"):
        injector.before_call()
    # AND once disarmed, calls are only counted
    injector.disarm()
    assert injector.before_call() == 3
    assert injector.calls == 3


class _Refused(Exception):
    """What botocore raises for an error answer (a ClientError, say)."""


def test_a_crash_after_a_call_fires_when_the_answer_is_an_error() -> None:
    # GIVEN botocore's call wrapped by an injector armed to crash after the first call, and a first
    # call that AWS answers with an error (a batch of redelivered records: one cancelled transaction)
    injector = _CrashInjector()
    injector.arm({"at_call": 1, "after": True})
    answers: list[str] = []

    def make_api_call(client: object, operation_name: str, api_params: object) -> str:
        answers.append(operation_name)
        if operation_name == "TransactWriteItems":
            raise _Refused("TransactionCanceledException")
        return "ok"

    counted = injector.counting(make_api_call)
    # WHEN the first call is made
    # THEN it was sent, and the invocation dies once its answer arrived, not with the error
    with pytest.raises(InjectedCrash, match="after an AWS call returned") as crash:
        counted(None, "TransactWriteItems", {})
    assert answers == ["TransactWriteItems"]
    assert isinstance(crash.value.__context__, _Refused)
    # AND the next calls go through, counted
    assert counted(None, "PublishBatch", {}) == "ok"
    with pytest.raises(_Refused):
        counted(None, "TransactWriteItems", {})
    assert injector.calls == 3


def _records(count: int, receive_count: int = 1) -> list[dict[str, object]]:
    return [{"attributes": {"ApproximateReceiveCount": str(receive_count)}} for _ in range(count)]


def test_the_crash_plan_crashes_the_first_two_at_their_first_call_then_a_share_within_a_batch_s_calls() -> None:
    # GIVEN the demo's crash plan at a rate of 0.5
    plan = RandomCrashes(0.5, seed=7, max_receive_count=3)
    # WHEN 2,000 batches of ten new orders ask it
    orders = [plan(_records(10)) for _ in range(2_000)]
    # THEN the first two crash at their first call
    assert orders[:2] == [CrashOrder(at_call=1, after=orders[0].after), CrashOrder(at_call=1, after=orders[1].after)]
    # AND about half of the others crash (the rate), each at one of the calls such a batch makes,
    # every one of them and on both sides of the call
    crashes = [order for order in orders[2:] if order is not None]
    assert 900 <= len(crashes) <= 1_100
    assert {order.at_call for order in crashes} == set(range(1, CALLS_OF_A_BATCH_OF_NEW_ORDERS + 1))
    assert {order.after for order in crashes} == {True, False}
    # AND a batch holding a message on its last delivery never crashes, whatever the draw
    assert all(plan(_records(10, receive_count=3)) is None for _ in range(200))
