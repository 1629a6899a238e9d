"""Cold start in a fresh interpreter: the handler's import, then its clients (Lambda's init phase).

Each sample starts a new ``python`` with the handler's source root first on ``sys.path`` (as
``/var/task`` is in Lambda) and the consumer's environment (a stand-in endpoint that is never
called), and times with ``time.perf_counter``

1. ``import <module>`` (the cold-import figure);
2. then the clients: a peer's ``configure`` with new boto3 DynamoDB and SNS clients; the product,
   as a black box, one invocation with no records, so that whatever it creates at its first use
   (clients, settings) is created, and whatever it created at import is not counted twice.

Import plus clients is the cold-start figure. Each figure is the minimum of the samples (the least
disturbed by other work on the machine); the CPU time is kept too, as a check that is less
sensitive to that other work. Library code (boto3, Powertools) is imported with the ``.pyc`` files its
installer compiled. Lambda's code directory is read-only and nothing is written there
(``PYTHONDONTWRITEBYTECODE``): a peer's handler, deployed as a plain CDK asset, compiles at every cold
start; the product's asset ships checked-hash bytecode for the runtime's Python (python3.14,
:mod:`idempotent_order_pipeline.bytecode`), and on another Python the staged copy gets that Python's,
made the same way (:func:`staged`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_PROBE = (
    "import contextlib, importlib, io, os, time\n"
    "from bench.lambda_context import Context\n"
    "wall, cpu = time.perf_counter(), time.process_time()\n"
    "module = importlib.import_module({module!r})\n"
    "imported, imported_cpu = time.perf_counter(), time.process_time()\n"
    "if {peer!r}:\n"
    "    import boto3\n"
    "    names = {variables!r}\n"
    "    module.configure(dynamodb=boto3.client('dynamodb'), sns=boto3.client('sns'),\n"
    "                     env={{n: os.environ[n] for n in names}})\n"
    "else:\n"
    "    with contextlib.redirect_stdout(io.StringIO()):\n"
    "        module.handler({{'Records': []}}, Context())\n"
    "done, done_cpu = time.perf_counter(), time.process_time()\n"
    "print((imported - wall) * 1000.0, (imported_cpu - cpu) * 1000.0,\n"
    "      (done - wall) * 1000.0, (done_cpu - cpu) * 1000.0)\n"
)


@dataclass(frozen=True)
class ImportTime:
    """One fresh interpreter's import of the handler module."""

    wall_ms: float
    #: CPU time of the same import: less disturbed by other work on a shared machine.
    cpu_ms: float
    #: Import plus client creation (the cold start), wall and CPU.
    start_wall_ms: float = 0.0
    start_cpu_ms: float = 0.0


def import_times(name: str, source_roots: list[Path], samples: int) -> list[ImportTime]:
    """Cold import and cold start of the consumer ``name`` in ``samples`` fresh interpreters."""
    from bench.capped import worker_environment
    from bench.worker import MODULES, PEER_VARIABLES

    probe = _PROBE.format(module=MODULES[name], peer=name != "ours", variables=PEER_VARIABLES.get(name, ()))
    results = []
    with tempfile.TemporaryDirectory(prefix="coldstart-") as folder:
        roots = staged(source_roots, Path(folder))
        env = {
            **worker_environment(name, "http://127.0.0.1:9"),
            "PYTHONPATH": os.pathsep.join(str(root) for root in roots),
        }
        for _ in range(samples):
            completed = subprocess.run(  # noqa: S603 - our own interpreter and a fixed probe
                [sys.executable, "-c", probe],
                env=env,
                cwd=roots[0],
                capture_output=True,
                text=True,
                check=True,
            )
            wall_ms, cpu_ms, start_ms, start_cpu_ms = map(float, completed.stdout.strip().splitlines()[-1].split())
            results.append(
                ImportTime(wall_ms=wall_ms, cpu_ms=cpu_ms, start_wall_ms=start_ms, start_cpu_ms=start_cpu_ms)
            )
    return results


#: What the probe imports from the roots after the first: the peers and the context (``bench.*``).
_PROBE_PACKAGES = ("bench",)


def staged(source_roots: list[Path], folder: Path) -> list[Path]:
    """Copies of the roots as Lambda's code directory holds them.

    The first root (the product's asset, ``/var/task``) as the asset ships it (its own rule,
    :func:`idempotent_order_pipeline.bytecode.copy_ignore`, no CDK import): sources and the runtime's
    checked-hash bytecode.
    When this Python is not the runtime's, that bytecode cannot load here; the copy gets this Python's,
    written by the same tool in the same mode, so that the import does the work it does in Lambda (hash
    the source, load the bytecode) instead of compiling. Of each other root only :data:`_PROBE_PACKAGES`,
    without bytecode (a peer's handler is a plain asset). The tests write ``__pycache__`` beside the
    sources, which an import of the sources themselves would read.
    """
    from idempotent_order_pipeline import bytecode

    task = folder / "task"
    shutil.copytree(source_roots[0], task, ignore=bytecode.copy_ignore)
    if sys.implementation.cache_tag != bytecode.RUNTIME_BYTECODE_TAG:
        bytecode.write([task])
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    roots = [task]
    for index, root in enumerate(source_roots[1:]):
        copy = folder / f"root-{index}"
        for package in _PROBE_PACKAGES:
            if (root / package).is_dir():
                shutil.copytree(root / package, copy / package, ignore=ignore)
        roots.append(copy)
    return roots
