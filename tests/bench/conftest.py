from __future__ import annotations

from typing import Any

import pytest

from bench import deployment


@pytest.fixture(scope="session")
def deployed() -> dict[str, Any]:
    """The default pipeline's facts (tables, reconciler, alarms), synthesized in this process.

    The bench itself synthesizes in a fresh interpreter (:func:`bench.deployment.load`, to keep the CDK
    out of its measuring process); the tests' processes hold the CDK already, and a new interpreter would
    start another one (about 5 s of CPU). The bench's smoke run (test_bench_smoke.py) goes through ``load``.
    """
    return deployment.synthesize()
