"""``make verify``: the explorer at the published bounds, then the negative controls.

    python -m tests.verify                      # everything; the last line is the summary
    python -m tests.verify --scenario standard/same-content --crashes 1 --faults 0
    python -m tests.verify --controls-only
    python -m tests.verify --scenario standard/same-content --replay "D1#0:call D1#1:crash ..."

Ends with ``explored <N> schedules, <S> states, 0 violations; negative controls <K>/<K> caught`` and
exits non-zero on a violation or a missed control.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Iterator

# Before the consumer is imported: dummy credentials, no real endpoint, no log lines or metrics.
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "POWERTOOLS_SERVICE_NAME": "order-consumer",
    "POWERTOOLS_METRICS_NAMESPACE": "Explorer",
    "POWERTOOLS_LOG_LEVEL": "CRITICAL",
    "POWERTOOLS_METRICS_DISABLED": "true",
}.items():
    os.environ[_name] = _value
os.environ.pop("AWS_PROFILE", None)
os.environ.pop("AWS_ENDPOINT_URL", None)

from tests.verify import bounds as published  # noqa: E402
from tests.verify.controls import CONTROLS  # noqa: E402
from tests.verify.explorer import Harness, Report, schedule_text  # noqa: E402
from tests.verify.scenarios import by_name  # noqa: E402
from tests.verify.scheduler import Bounds  # noqa: E402


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Powertools prints metrics (EMF) to stdout; the explorer's output is its own lines."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def _say(line: str) -> None:
    print(line, file=sys.__stdout__, flush=True)


def _violation(report: Report) -> None:
    assert report.violation is not None
    _say(f"VIOLATION in {report.scenario}: {report.violation.violation}")
    _say(f"  schedule (replay with --scenario {report.scenario} --replay): {schedule_text(report.violation)}")
    _say("  trace (actor, call, result):")
    for entry in report.trace:
        _say(f"    {entry}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.verify", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", help="one scenario (default: the published bounds)")
    parser.add_argument("--crashes", type=int, default=1)
    parser.add_argument("--faults", type=int, default=0)
    parser.add_argument("--replay", help="a schedule as printed with a violation")
    parser.add_argument("--controls-only", action="store_true")
    parser.add_argument("--no-controls", action="store_true")
    args = parser.parse_args(argv)
    harness = Harness()
    schedules = states = violations = 0
    with _quiet(), harness.active():
        if args.replay is not None:
            outcome, world = harness.replay(by_name()[args.scenario](), Bounds(args.crashes, args.faults), args.replay)
            for entry in world.log:
                _say(f"    {entry}")
            _say(outcome.violation or "no violation")
            return 1 if outcome.violation else 0
        runs = [] if args.controls_only else published.RUNS
        if args.scenario is not None:
            runs = [(args.scenario, Bounds(args.crashes, args.faults))]
        for name, bounds in runs:
            report = harness.explore(by_name()[name](), bounds)
            _say(f"{report.line()} (bounds: {bounds.crashes} crash(es), {bounds.faults} fault(s) per schedule)")
            schedules += report.schedules
            states += len(report.states)
            if report.violation is not None:
                violations += 1
                _violation(report)
        caught = 0
        controls = [] if args.no_controls or args.scenario else CONTROLS
        for control in controls:
            with control.patch():
                report = harness.explore(control.scenario(), control.bounds, prepare=control.prepare)
            if report.violation is not None:
                caught += 1
                _say(f"control {control.name} ({control.weakening}): caught after {report.schedules} schedules")
                _say(f"  {report.violation.violation.splitlines()[0] if report.violation.violation else ''}")
                _say(f"  schedule: {schedule_text(report.violation)}")
            else:
                _say(f"control {control.name} ({control.weakening}): NOT CAUGHT in {report.schedules} schedules")
    _say(f"stretch: {published.STRETCH}")
    _say(
        f"explored {schedules} schedules, {states} states, {violations} violations; "
        f"negative controls {caught}/{len(controls)} caught"
    )
    return 0 if violations == 0 and caught == len(controls) else 1


if __name__ == "__main__":
    sys.exit(main())
