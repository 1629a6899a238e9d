"""The explorer's bounded slice for ``make test``: every schedule of two deliveries of one event with up
to one crash (0 violations), the same with a redrive racing them, and negative controls it must
catch, with a trace that replays.

``make verify`` runs the published bounds (``tests/verify/bounds.py``) and every control.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.verify import redrive
from tests.verify.controls import CONTROLS, Control
from tests.verify.explorer import Harness, schedule_text
from tests.verify.scenarios import EVENT, by_name, conflict_redriven_slice, two_deliveries
from tests.verify.scheduler import CALL, CRASH, Bounds, Transition, independent


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    harness = Harness()
    with harness.active():
        yield harness


def control(name: str) -> Control:
    return next(c for c in CONTROLS if c.name == name)


def test_two_deliveries_with_a_crash_anywhere_hold_every_invariant(harness: Harness) -> None:
    # GIVEN two deliveries of one event, one content, a crash allowed at any point of either
    scenario = two_deliveries()

    # WHEN every schedule is explored
    report = harness.explore(scenario, Bounds(crashes=1, faults=0))

    # THEN there were schedules with crashes and several states, and none broke an invariant
    assert report.schedules > 10, report.line()
    assert len(report.states) > 5, report.line()
    assert report.violation is None, report.violation.violation if report.violation else ""


@pytest.mark.slow  # the deepest exploration of this file (about 8 s): make test runs it, make test-fast does not
def test_a_redrive_racing_a_conflict_with_a_crash_anywhere_holds_every_invariant(harness: Harness) -> None:
    # GIVEN one event sent twice with conflicting content (its key in a packed idempotency_key), the
    # two deliveries and a redrive of whatever the DLQ holds, a crash allowed at any point
    scenario = conflict_redriven_slice()

    # WHEN every schedule is explored
    report = harness.explore(scenario, Bounds(crashes=1, faults=0))

    # THEN in some schedules the redrive moved the parked loser back (in others it came too early),
    # and none broke an invariant
    assert 0 < report.redriven < report.schedules, report.line()
    assert report.violation is None, report.violation.violation if report.violation else ""


def test_a_redrive_moves_a_parked_message_as_it_is_and_the_consumer_parks_it_again_with_its_new_reason(
    harness: Harness,
) -> None:
    # GIVEN the conflict: D1 records evt-1 and returns, D2 parks the loser m-2 and returns
    scenario = conflict_redriven_slice()
    first = "D1#0:call D1#1:call D1#2:call D1#3:call D2#0:call D2#1:call D2#2:call"

    # WHEN the redrive moves the DLQ back and delivers what it moved
    outcome, world = harness.replay(scenario, Bounds(crashes=0, faults=0), first + " RD#0:call")

    # THEN it moved m-2's park as it was (the consumer's envelope and reason with it), the consumer read
    # the packed key (its transaction names evt-1) and parked the copy again as a conflict, with the
    # copy's id as its source and the producer's attributes packed, not the earlier reason
    assert outcome.violation is None, outcome.violation
    [moved] = world.moved_back
    assert moved.attribute("source_message_id") == "m-2"
    assert moved.envelope() is not None
    assert world.origins == {"m-2~moved": "m-2"}
    rd_calls = [entry.call for entry in world.log if entry.actor == redrive.ACTOR]
    assert f"TransactWriteItems record+row of {EVENT}" in rd_calls, rd_calls
    [parked_again] = world.dlq()
    assert parked_again.attribute("source_message_id") == "m-2~moved"
    assert parked_again.attribute("error_code") == "IDEMPOTENCY_CONFLICT"
    envelope = parked_again.envelope()
    assert envelope is not None
    assert envelope.packed["error_code"]["stringValue"] == "the producer's own"
    assert envelope.packed["idempotency_key"]["stringValue"] == EVENT


def test_on_a_fifo_queue_a_moved_copy_waits_while_its_original_is_in_flight(harness: Harness) -> None:
    # GIVEN the conflict on a FIFO queue: D2 has parked the loser m-2 (group g-b) but not returned yet
    scenario = by_name()["fifo/conflict-redriven"]()
    parked_not_returned = "D1#0:call D1#1:call D1#2:call D1#3:call D2#0:call D2#1:call"

    # WHEN the redrive moves the park back at that moment
    outcome, world = harness.replay(scenario, Bounds(crashes=0, faults=0), parked_not_returned + " RD#0:call")

    # THEN SQS does not hand the copy over (m-2 is still in flight in its group): the redrive delivers
    # nothing, and the drain delivers the copy after m-2 was acknowledged; it is parked again
    assert outcome.violation is None, outcome.violation
    [move] = [entry for entry in world.log if entry.actor == redrive.ACTOR]
    assert move.result == "moved ['m-2~moved'], handed over []"
    assert world.parked() == {"m-2~moved": ["IDEMPOTENCY_CONFLICT"]}


def test_sqs_dead_letters_a_message_on_its_last_receive_unchanged_and_a_redrive_delivers_it(harness: Harness) -> None:
    # GIVEN two messages of one event on their last receive, D1 dying before its first call
    scenario = by_name()["standard/last-receive-redriven"]()
    bounds = Bounds(crashes=1, faults=0)

    # WHEN the redrive runs first, while the DLQ is still empty
    early, world = harness.replay(scenario, bounds, "RD#0:call D1#0:crash")

    # THEN SQS dead-lettered m-1 as it was (its id, the producer's own error_code, no envelope), which is
    # no park of the consumer's, whatever it carries; it stays in the DLQ
    assert early.violation is None, early.violation
    [dead] = world.dlq()
    assert (dead.message_id, dead.moved_by_sqs, dead.envelope()) == ("m-1", True, None)
    assert dead.attribute("error_code") == "the producer's own"
    assert world.parked() == {}

    # WHEN the redrive runs after D1's death (each replay empties the world: moto is shared)
    late, world = harness.replay(scenario, bounds, "D1#0:crash RD#0:call")

    # THEN it moved m-1 back, delivered it again and acknowledged it once evt-1 was sent
    assert late.violation is None, late.violation
    assert world.dlq() == []
    assert world.origins == {"m-1~moved": "m-1"}
    returns = [entry.result for entry in world.log if entry.actor == redrive.ACTOR and entry.call == "return"]
    assert returns == ["acknowledged ['m-1~moved']"]
    assert world.records()[EVENT]["status"] == "sent"


def test_a_crash_that_dead_letters_a_message_does_not_commute_with_a_redrive() -> None:
    # GIVEN a delivery's crash whose footprint writes the DLQ, one whose footprint is empty, and a move task
    dlq = frozenset({("queue:orders-dlq", "w")})
    dead_lettering = Transition("D1", 0, CRASH, dlq)
    plain_crash = Transition("D1", 0, CRASH, frozenset())
    move = Transition(redrive.ACTOR, 0, CALL, dlq)

    # WHEN the scheduler asks whether each commutes with the move
    # THEN only the crash that touches nothing outside its actor does
    assert not independent(dead_lettering, move)
    assert independent(plain_crash, move)


@pytest.mark.parametrize(
    "name", ["mark-before-publish", "deadline-ignored", "eventually-consistent-read", "packed-attributes-ignored"]
)
def test_a_weakening_is_caught_with_a_trace_that_replays(harness: Harness, name: str) -> None:
    # GIVEN the real code weakened by the harness
    weakened = control(name)

    # WHEN its scenario is explored, and the violating schedule replayed
    with weakened.patch():
        report = harness.explore(weakened.scenario(), weakened.bounds, prepare=weakened.prepare)
        assert report.violation is not None, f"{name} not caught: {report.line()}"
        replayed, world = harness.replay(
            weakened.scenario(), weakened.bounds, schedule_text(report.violation), weakened.prepare
        )

    # THEN the trace names the calls, and the replay breaks the same invariant the same way
    assert report.trace, "a violation comes with its trace"
    assert [str(entry) for entry in world.log] == [str(entry) for entry in report.trace]
    assert replayed.violation == report.violation.violation
