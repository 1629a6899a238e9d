"""Memory: the biggest batch Lambda can deliver (6 MB of payload) adds a bounded peak, whatever its bodies.

Measured in a fresh subprocess (``tests/consumer/batch_memory_probe.py``), as the increase of peak
RSS while the pipeline processes 23 bodies of 256 KiB of empty maps (the most expanding body of
``memory_probe.BODIES``: about 27 MB each while parsed and written). Without the byte budget
(``order_consumer.budget``) ten threads held ten at once and the batch's row items stayed until
the end: about 600 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Starts processes (the test tiers' rule).
pytestmark = pytest.mark.slow
#: Lambda's largest synchronous payload; the batch fills it with 256 KiB bodies.
MAX_BATCH_PAYLOAD = 6 * 1024 * 1024
BODIES = 23  # 23 x 256 KiB = 5.75 MiB of bodies (plus the event's own fields)
#: The bound: about four bodies' worth at once, whatever the batch.
MAX_INCREASE_BYTES = 160 * 1024 * 1024


def test_a_6_mb_batch_of_the_most_expanding_bodies_stays_within_160_mb() -> None:
    # GIVEN a batch of 23 valid orders of 256 KiB each of empty maps (~6 MB, Lambda's payload limit)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "infra"), str(REPO)])}
    # WHEN the pipeline processes it in a fresh process
    completed = subprocess.run(  # noqa: S603  (our interpreter, our probe)
        [sys.executable, str(REPO / "tests" / "consumer" / "batch_memory_probe.py"), "many-empty-maps", str(BODIES)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
        check=True,
        cwd=REPO,
    )
    result = json.loads(completed.stdout.splitlines()[-1])
    print(result)
    # THEN every order was recorded, the batch was as big as Lambda delivers
    assert result["outcomes"] == {"recorded": BODIES}
    assert MAX_BATCH_PAYLOAD - 512 * 1024 < result["payload"] <= MAX_BATCH_PAYLOAD
    # AND the peak RSS grew by less than 160 MB
    assert result["increase"] < MAX_INCREASE_BYTES, result["increase"] / 2**20
