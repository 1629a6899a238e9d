"""The helper's guarantees as scenarios: each raises AssertionError when the guarantee does not hold.

``test_once.py`` runs them against the helper as shipped; ``test_weakened_helper.py`` runs them
against deliberately weakened helpers and expects each to fail, so a scenario that stopped checking
its guarantee would be caught.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import (
    Busy,
    Claim,
    ClaimLost,
    Done,
    OncePerEvent,
    OrderNotification,
    parse,
)
from tests.consumer.harness import ArmedFault, Crash, client_error
from tests.subscriber.harness import (
    LEASE_SECONDS,
    SubscriberWorld,
    copies,
    counter_effect,
    notification_record,
    payment_effect,
)

EVENTS = 3
#: How each call of the protocol is made to fail: the process dies before the call is sent, or
#: after it succeeded (the answer is lost), or DynamoDB answers with an error.
FAULTS = ("crash-before", "crash-after", "error")


def _fault(kind: str, at: int) -> ArmedFault:
    if kind == "error":
        return ArmedFault(client_error("Call", "InternalServerError"), at=at)
    return ArmedFault(Crash(), at=at, after_success=kind == "crash-after")


def every_call_fails_once(dynamodb: Any, effect: str, kind: str) -> None:
    """For each call a clean delivery makes, a world where that call fails; redelivered until done."""
    records = copies(EVENTS, per_event=2) + copies(1, per_event=3)[2:]  # event-0 three times
    probe = SubscriberWorld(dynamodb, prefix=f"probe-{effect}-{kind}-")
    probe.deliver_until_done(records, getattr(probe, effect)())
    calls = probe.board.total
    assert calls >= 2 * EVENTS, calls
    fired = 0
    for at in range(1, calls + 1):
        world = SubscriberWorld(dynamodb, prefix=f"{effect}-{kind}-{at}-")
        fault = world.board.arm(_fault(kind, at))
        world.deliver_until_done(records, getattr(world, effect)())
        assert world.board.total >= at, (at, "the call was never reached")
        fired += fault.fired
        assert world.statuses() == Counter({"done": EVENTS}), f"call {at}: {world.statuses()}"
        if effect == "counting":
            counters = world.counters()
            assert counters == Counter({f"order-{i}": 1 for i in range(EVENTS)}), f"call {at}: {counters}"
        else:
            _at_most_once_per_lease(world, at)
    # Every call failed once; crashing after success skips the calls that failed on their own (a refused claim).
    assert fired == calls if kind != "crash-after" else calls / 2 < fired < calls, (fired, calls)


def _at_most_once_per_lease(world: SubscriberWorld, at: object) -> None:
    """Every order charged, each lease's key used at most once, and only keys of claims that were made."""
    charges = world.provider.charges
    assert {order for order, _ in charges} == {f"order-{i}" for i in range(EVENTS)}, at
    per_key = Counter(key for _, key in charges)
    assert max(per_key.values()) == 1, (at, per_key)
    assert set(per_key) <= set(world.claimed_tokens()), at


def three_copies_at_once(dynamodb: Any, effect: str) -> None:
    """Three copies of each notification handled by three threads at once, redelivered until done."""
    world = SubscriberWorld(dynamodb, prefix=f"threads-{effect}-")
    inner = counter_effect(world.counters_table) if effect == "counting" else payment_effect(world.guarded_provider)

    def slow(notification: OrderNotification, claim: Claim) -> Any:
        time.sleep(0.005)  # let the other threads run while this one holds the claim
        return inner(notification, claim)

    handler = OncePerEvent(slow, dedup=world.dedup)
    for event in range(EVENTS):
        pending = [notification_record(f"event-{event}", f"order-{event}", copy=c) for c in range(3)]
        for _ in range(10):
            if not pending:
                break
            failed: list[dict[str, Any]] = []
            start = threading.Barrier(len(pending))

            def deliver(record: dict[str, Any], start: threading.Barrier = start, failed: list[Any] = failed) -> None:
                start.wait()
                if handler.handle([record]):
                    failed.append(record)

            threads = [threading.Thread(target=deliver, args=(record,)) for record in pending]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            pending = failed
            world.clock.advance(LEASE_SECONDS + 1)
        assert not pending, f"event-{event} never acknowledged"
    assert world.statuses() == Counter({"done": EVENTS})
    if effect == "counting":
        counters = world.counters()
        assert counters == Counter({f"order-{i}": 1 for i in range(EVENTS)}), f"counters {counters}"
    else:
        _at_most_once_per_lease(world, "threads")
        # Nothing failed and no lease ran out: one lease won per order, so one call.
        calls = Counter(order for order, _ in world.provider.charges)
        assert calls == Counter({f"order-{i}": 1 for i in range(EVENTS)}), f"calls {calls}"


def lease_runs_out_mid_effect(dynamodb: Any) -> None:
    """A's lease runs out while its effect runs; B takes the claim over; A's transaction must fail."""
    world = SubscriberWorld(dynamodb, prefix="lease-")
    effect = counter_effect(world.counters_table)
    first, second = (notification_record("event-0", "order-0", copy=c) for c in range(2))
    takeovers: list[Claim | Busy | Done] = []

    def slow_effect(notification: OrderNotification, claim: Claim) -> Any:
        world.clock.advance(LEASE_SECONDS + 1)  # A's lease runs out mid-effect...
        takeovers.append(world.dedup.claim(notification.event_id))  # ...and B, a second copy, claims the event
        return effect(notification, claim)

    # WHEN A finishes its effect after B took over, then B finishes
    acknowledged = OncePerEvent(slow_effect, dedup=world.dedup).handle_one(first)
    [b_claim] = takeovers
    assert isinstance(b_claim, Claim), f"the second copy could not take over: {b_claim}"
    try:
        world.dedup.complete(b_claim, effect(parse(second), b_claim))
    except ClaimLost as exc:
        raise AssertionError("the second copy's transaction was refused: the first one's went through") from exc
    # THEN A's transaction failed its condition (A is acknowledged: B acts), B's applied, once
    assert acknowledged
    assert world.counters() == Counter({"order-0": 1})
    assert world.counter_row("order-0")["applied_by"] == {"S": b_claim.token}
    assert world.statuses() == Counter({"done": 1})
    # AND a later copy is a duplicate
    assert OncePerEvent(effect, dedup=world.dedup).handle_one(second)
    assert world.counters() == Counter({"order-0": 1})
