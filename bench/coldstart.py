"""Handler import time in a fresh interpreter: the init phase of a cold Lambda start.

Each sample starts a new ``python`` with the handler's source root first on ``sys.path`` (as
``/var/task`` is in Lambda) and times ``import <module>`` with ``time.perf_counter``; the figure is
the minimum of the samples (the least disturbed by other work on the machine); the import's CPU
time is kept too, as a check that is less sensitive to that other work. Library code is
imported with the ``.pyc`` files its installer compiled; this repo's code without (``PYTHONDONTWRITEBYTECODE``,
and Lambda's code directory is read-only, so the product compiles its sources at every cold start
unless the asset ships ``.pyc`` files).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_PROBE = (
    "import time, importlib\n"
    "wall, cpu = time.perf_counter(), time.process_time()\n"
    "importlib.import_module({module!r})\n"
    "print((time.perf_counter() - wall) * 1000.0, (time.process_time() - cpu) * 1000.0)\n"
)


@dataclass(frozen=True)
class ImportTime:
    """One fresh interpreter's import of the handler module."""

    wall_ms: float
    #: CPU time of the same import: less disturbed by other work on a shared machine.
    cpu_ms: float


def import_times(module: str, source_roots: list[Path], samples: int) -> list[ImportTime]:
    """Import time of ``module`` in ``samples`` fresh interpreters."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(root) for root in source_roots),
        "PYTHONDONTWRITEBYTECODE": "1",
        "POWERTOOLS_SERVICE_NAME": "order-consumer",
        "POWERTOOLS_METRICS_NAMESPACE": "OrderPipelineBench",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    results = []
    for _ in range(samples):
        completed = subprocess.run(  # noqa: S603 - our own interpreter and a fixed probe
            [sys.executable, "-c", _PROBE.format(module=module)],
            env=env,
            cwd=source_roots[0],
            capture_output=True,
            text=True,
            check=True,
        )
        wall_ms, cpu_ms = completed.stdout.strip().splitlines()[-1].split()
        results.append(ImportTime(wall_ms=float(wall_ms), cpu_ms=float(cpu_ms)))
    return results
