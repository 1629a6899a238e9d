"""Memory: no body up to 256 KB (SQS's maximum) makes the consumer's parsing and storing big.

Measured in a fresh subprocess (``tests/consumer/memory_probe.py``): each body in a child forked
from a warmed-up process, as the increase of its peak RSS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.consumer.memory_probe import BODIES

# Measures peak RSS in a subprocess that forks one child per body.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
#: The bound the README's input contract states for any body of at most 256 KB.
MAX_INCREASE_BYTES = 64 * 1024 * 1024
#: What each body must come to: stored (valid) or parked as INVALID_MESSAGE.
EXPECTED = {
    "300-huge-exponents": "INVALID_MESSAGE",
    "huge-exponents": "INVALID_MESSAGE",
    "exponent-of-260k-digits": "INVALID_MESSAGE",
    "mantissa-of-260k-digits": "INVALID_MESSAGE",
    "many-lone-surrogates": "INVALID_MESSAGE",
    "deep-nesting": "INVALID_MESSAGE",
    "deep-nesting-unclosed": "INVALID_MESSAGE",
    "many-zeros": "stored",
    "many-distinct-numbers": "stored",
    "many-largest-numbers": "stored",
    "many-smallest-numbers": "stored",
    "many-empty-lists": "stored",
    "many-empty-maps": "stored",
    "many-keys": "stored",
    "huge-string": "stored",
}


def test_no_body_up_to_256_kb_raises_peak_rss_by_64_mb() -> None:
    # GIVEN every hostile body shape of at most 256 KB, each run in a fresh fork of a warmed-up process
    assert set(EXPECTED) == set(BODIES)
    environment = {**os.environ, "PYTHONPATH": str(REPO / "infra")}
    # WHEN the consumer's parser, validator and DynamoDB request serialization handle each one
    completed = subprocess.run(  # noqa: S603  (our interpreter, our probe)
        [sys.executable, str(REPO / "tests" / "consumer" / "memory_probe.py")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=240,
        check=True,
    )
    results = {line["body"]: line for line in map(json.loads, completed.stdout.splitlines())}
    # THEN each came to its expected outcome (nothing crashed), within SQS's size limit
    assert {name: result["outcome"] for name, result in results.items()} == EXPECTED
    assert max(result["bytes"] for result in results.values()) <= 256 * 1024
    # AND none raised the peak RSS by 64 MB or more
    too_big = {name: result["increase"] for name, result in results.items() if result["increase"] >= MAX_INCREASE_BYTES}
    assert too_big == {}
