"""A copy of the distribution's sources as a clone holds them, for the tests that build a wheel from it.

Build metadata and the bytecode the tests' own Pythons wrote are left out; the python3.14 bytecode the
asset and the layer ship is kept (:func:`idempotent_order_pipeline.asset.copy_ignore`, the asset's rule).
"""

from __future__ import annotations

import shutil
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
