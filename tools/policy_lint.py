"""Lint IAM policy documents with parliament: identity, resource, key, trust and endpoint policies alike.

Runs in its own virtualenv (.venv-parliament, requirements-parliament.lock; `make venv` creates it),
so it imports nothing of this repository and only the standard library besides parliament. Reads a
JSON object ``{policy name: policy document}`` (intrinsics already resolved to plausible strings)
from the file given as the only argument, and prints one JSON list of findings::

    [{"policy": name, "issue": "RESOURCE_MISMATCH", "severity": "MEDIUM", "detail": ..., "location": ...}]

Community auditors are on; every finding is reported, the caller decides what is explained.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def lint(policies: dict[str, Any]) -> list[dict[str, Any]]:
    from parliament import analyze_policy_string, config  # the tool venv's only dependency

    findings: list[dict[str, Any]] = []
    for name, document in sorted(policies.items()):
        policy = analyze_policy_string(json.dumps(document), include_community_auditors=True)
        for finding in policy.findings:
            severity = config.get(finding.issue, {}).get("severity", "UNKNOWN")
            findings.append(
                {
                    "policy": name,
                    "issue": finding.issue,
                    "severity": severity,
                    "detail": finding.detail,
                    "location": finding.location,
                }
            )
    return findings


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} POLICIES.json", file=sys.stderr)
        return 2
    policies = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    print(json.dumps(lint(policies), default=str, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
