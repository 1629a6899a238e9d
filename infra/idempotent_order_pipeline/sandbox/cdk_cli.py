"""How the stand-in and this repository's tools run the CDK CLI: quiet, non-interactive, this interpreter's Node first.

One home for the variables the stand-in (``cdk bootstrap``, the env file it writes for the team's
``cdk deploy``), ``make demo`` and the data-loss gate (``data_loss_gate``) give the CLI; the
Makefile exports the same ones for its own targets.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

#: No version check, notices, telemetry or Node-version banner: output that is the CLI's answer only.
QUIET_CDK_CLI = {
    "CDK_DISABLE_VERSION_CHECK": "1",
    "CDK_CLI_NOTICES": "false",
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
}


def cdk_cli_environment(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with this interpreter's bin first on ``PATH`` (the venv's Node), the CLI quiet and non-interactive."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **base,
        "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
        **QUIET_CDK_CLI,
        "CI": "true",
    }
