"""The explorer's bounded slice for ``make test``: every schedule of two deliveries of one event with up
to one crash (0 violations), and negative controls it must catch, with a trace that replays.

``make verify`` runs the published bounds (``tests/verify/bounds.py``) and every control.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.verify.controls import CONTROLS, Control
from tests.verify.explorer import Harness, schedule_text
from tests.verify.scenarios import two_deliveries
from tests.verify.scheduler import Bounds


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


@pytest.mark.parametrize("name", ["mark-before-publish", "deadline-ignored", "eventually-consistent-read"])
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
