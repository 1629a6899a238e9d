"""Released versions' code, frozen as released, run in a child process.

``tests/compat/v0_1_0/lambdas`` is ``git show v0.1.0:lambdas/...`` (tag ``v0.1.0`` = e6c98c4), kept
as files because tags are not pushed. The released code imports itself as top-level packages
(``order_events``, ``order_consumer``), which this test process must never do (one import root,
see ``tests/conftest.py``), so it only ever runs in a child process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
V0_1_0 = HERE / "v0_1_0" / "lambdas"


def run_released(root: Path, script: str, payload: Any) -> Any:
    """Run ``script`` with ``root`` first on the path; it reads JSON ``payload`` from stdin and prints JSON."""
    done = subprocess.run(  # noqa: S603 - this interpreter, frozen code of this repository
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(root)!r})\n{script}"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


V0_1_0_KEYS = """
import json, sys
from decimal import Decimal
from order_events.keys import derive_event_id, payload_sha256
orders = json.loads(sys.stdin.read(), parse_float=Decimal, parse_int=Decimal)
print(json.dumps([[derive_event_id(o), payload_sha256(o)] for o in orders]))
"""


def v0_1_0_keys(orders: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(event id 0.1.0 derived, payload fingerprint 0.1.0 stored) for each order."""
    return [(key, sha) for key, sha in run_released(V0_1_0, V0_1_0_KEYS, orders)]
