from __future__ import annotations

from typing import Any

from tests.reliability.test_stateful import STATS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print what the chaos run tried, the figures docs/reliability.md's table quotes."""
    if STATS.examples:
        terminalreporter.write_line(
            f"reliability: {STATS.examples} generated scenarios, {STATS.steps} consumer steps, "
            f"{STATS.messages} messages, {sum(STATS.faults.values())} faults armed "
            f"{dict(sorted(STATS.faults.items()))}, "
            f"{STATS.crashes} invocations crashed, {STATS.redriven} messages redriven to the DLQ, "
            f"{STATS.reconciled} records notified by the reconciler after the DLQ was dropped, "
            f"{STATS.previous_version_steps} consumer steps by 0.2.0 (alone or racing)"
        )
    from tests.reliability.test_kills import RUNS

    for kind, run in RUNS.items():
        terminalreporter.write_line(run.line(kind))
