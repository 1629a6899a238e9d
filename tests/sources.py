"""A copy of the distribution's sources as a clone holds them, for the tests that build a wheel from it.

Build metadata and the bytecode the tests' own Pythons wrote are left out; the python3.14 bytecode the
asset and the layer ship is kept (:func:`idempotent_order_pipeline.asset.copy_ignore`, the asset's rule).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from idempotent_order_pipeline.asset import copy_ignore

REPO = Path(__file__).resolve().parents[1]
#: What the distribution is built from.
DISTRIBUTION_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "infra")


def copy_sources(destination: Path) -> Path:
    """Copy :data:`DISTRIBUTION_SOURCES` into ``destination``; returns it."""
    for name in DISTRIBUTION_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, destination / name, ignore=copy_ignore)
        else:
            destination.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, destination / name)
    return destination


#: The file that serializes the builds of one run's processes (pytest-xdist's workers) in :func:`shared_distributions`.
_BUILD_LOCK = "distributions.lock"


def build_distributions(source: Path, out: Path) -> None:
    """``python -m build`` on ``source`` (the sdist, then the wheel from it), offline, into ``out``."""
    completed = subprocess.run(  # noqa: S603  (our interpreter, our temporary paths)
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"python -m build failed:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")


def shared_distributions(root: Path, build: Callable[[Path, Path], None] = build_distributions) -> Path:
    """The sdist and the wheel built from a copy of :data:`DISTRIBUTION_SOURCES`, once per test run.

    ``root`` is shared by the run's processes (the directory of pytest-xdist's workers' base temporary
    directories): the first process to ask builds under a lock, into a directory that gets its final name
    only once the build succeeded; the others wait for it and reuse it. A failed build leaves nothing behind,
    so the next process to ask builds again (and fails with the build's output). The distributions are
    read-only to their users: they list, open and install them.
    """
    out = root / "distributions"
    with (root / _BUILD_LOCK).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_dir():
            work = Path(tempfile.mkdtemp(prefix="distributions-", dir=root))
            try:
                build(copy_sources(work / "source"), work / "dist")
                (work / "dist").rename(out)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return out
