"""The functions under ``-O`` and ``-OO`` (``PYTHONOPTIMIZE=1`` or ``2`` in a function's environment) work alike.

``-O`` removes ``assert`` statements, ``-OO`` docstrings too. Each run is a fresh interpreter (this
one: python3.14 under ``make test-runtime``) running ``tests/consumer/optimized_probe.py``: a consumer
batch, a reconciler pass and a subscriber batch on moto. ``tests/test_function_source.py`` checks
the source itself (no docstring read, every ``assert`` a type check) on every tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id
from tests.reconciler.harness import order

# Spawns one interpreter per flag.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

#: What the probe's runs do, whatever the flag.
EXPECTED: dict[str, Any] = {
    # two copies of o-1 (recorded, then republished: its record was not sent yet), NaN, 5,000 digits, a key twice
    "consumer": {
        "failures": 0,
        "notified": 2,
        "orders": ["o-1"],
        "parked": ["INVALID_MESSAGE"] * 3,
        "statuses": ["sent"],
    },
    # two records the consumer left pending (it crashed at SNS), both found and notified
    "reconciler": {
        "failed": False,
        "found": 2,
        "left_pending": 0,
        "notified": sorted(derive_event_id(order(n)) for n in (1, 2)),
        "reconciled": 2,
    },
    # two copies each of two notifications, and a body that is not JSON
    "subscriber": {"counters": {"order-0": 1, "order-1": 1}, "failures": [{"itemIdentifier": "junk"}]},
}


def _probe(*flags: str) -> dict[str, Any]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join((str(REPO / "infra"), str(REPO)))}
    environment.pop("PYTHONOPTIMIZE", None)
    completed = subprocess.run(  # noqa: S603  (our interpreter, our probe)
        [sys.executable, *flags, str(REPO / "tests" / "consumer" / "optimized_probe.py")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=240,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return dict(json.loads(completed.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("flags", "optimize", "docstrings"),
    [
        pytest.param((), 0, True, id="plain"),
        pytest.param(("-O",), 1, True, id="-O"),
        pytest.param(("-OO",), 2, False, id="-OO"),
    ],
)
def test_the_functions_do_the_same_work_with_asserts_and_docstrings_removed(
    flags: tuple[str, ...], optimize: int, docstrings: bool
) -> None:
    # GIVEN a fresh interpreter with the flag (and no DeprecationWarning allowed from the functions' code)
    # WHEN it imports the handler, the reconciler and the subscriber helper and runs a batch of each on moto
    result = _probe(*flags)
    # THEN the flag took effect (docstrings gone under -OO only)
    assert (result.pop("optimize"), result.pop("docstrings"), result.pop("subscriber_docstrings")) == (
        optimize,
        docstrings,
        docstrings,
    )
    # AND every outcome is the one without the flag: recorded, parked, reconciled, deduplicated alike
    assert result == EXPECTED
