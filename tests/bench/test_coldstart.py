"""The cold-start probe stages the product's asset as Lambda holds it (bench/coldstart.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.coldstart import staged
from idempotent_order_pipeline import bytecode
from idempotent_order_pipeline.asset import RUNTIME_BYTECODE_TAG

REPO = Path(__file__).resolve().parents[2]


def test_the_asset_is_staged_with_loadable_checked_hash_bytecode_and_a_peer_without(tmp_path: Path) -> None:
    # GIVEN the roots the benchmark probes: the asset (linked as lambdas/), then the repository
    roots = [REPO / "lambdas", REPO]
    # WHEN they are staged
    task, other = staged(roots, tmp_path)
    # THEN every module of the asset has bytecode this Python loads as it is (checked-hash, fresh), the
    # runtime's shipped files are there too, and the peers' package is staged without bytecode
    assert bytecode.check([task]) == []
    assert (task / "order_consumer" / "__pycache__" / f"handler.{RUNTIME_BYTECODE_TAG}.pyc").is_file()
    modules = list(task.rglob("*.py"))
    assert len(modules) >= 30
    assert all(bytecode.usable(bytecode.bytecode_path(module)) for module in modules)
    assert (other / "bench" / "consumers" / "powertools.py").is_file()
    assert not list(other.rglob("*.pyc"))
    assert sys.implementation.cache_tag in {p.name.split(".")[1] for p in task.rglob("*.pyc")}
