"""The stand-in's crash injection keeps its promise when the function makes calls from several threads."""

from __future__ import annotations

import pytest

from idempotent_order_pipeline.sandbox.lambda_runtime import InjectedCrash, _CrashInjector


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
    with pytest.raises(InjectedCrash, match="after an AWS call succeeded"):
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
