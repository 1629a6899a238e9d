"""``make endpoint``: a local AWS endpoint any CDK app can deploy the construct onto, until Ctrl-C.

For an adopter's own app (``docs/adopting.md``): it starts the moto server (with the
sandbox's moto fixes), runs ``cdk bootstrap`` and writes the variables that point the CDK CLI,
boto3 and ``order-pipeline`` at it to an env file (``source`` it). Unlike ``make sandbox`` it
deploys nothing itself and runs no consumer: it is the account to deploy into. An app that keeps
the construct's default Powertools layer deploys unchanged: the endpoint publishes the installed
Powertools as a layer and puts its ARN under Powertools' public SSM parameter, from which the
stack's ``PowertoolsLayerArn`` parameter resolves, as in AWS.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from cdk_cli_env import QUIET_CDK_CLI
from order_pipeline_sandbox.deploy import (
    WORK_DIR,
    DeployError,
    bootstrap,
    publish_powertools_layer,
    publish_powertools_parameter,
)
from order_pipeline_sandbox.server import Endpoint, SandboxServerProcess

#: Where the endpoint's variables are written (git-ignored, like everything under .sandbox/).
DEFAULT_ENV_FILE = WORK_DIR / "endpoint.env"


def env_file_text(endpoint: Endpoint) -> str:
    """``export`` lines for the endpoint (credentials are the sandbox's dummy ones)."""
    variables = {**endpoint.environment(), **QUIET_CDK_CLI}
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items())


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m order_pipeline_sandbox.endpoint", description=__doc__)
    parser.add_argument("--env-file", type=Path, default=DEFAULT_ENV_FILE, help=f"default: {DEFAULT_ENV_FILE}")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    args.env_file.unlink(missing_ok=True)
    work_dir = WORK_DIR / "endpoint"
    try:
        with SandboxServerProcess(log_path=None) as endpoint:
            print(f"endpoint {endpoint.url}: cdk bootstrap...", flush=True)
            bootstrap(endpoint, work_dir=work_dir)
            parameter = publish_powertools_parameter(endpoint, publish_powertools_layer(endpoint, work_dir=work_dir))
            print(f"endpoint {endpoint.url}: Powertools layer published under {parameter}", flush=True)
            args.env_file.parent.mkdir(parents=True, exist_ok=True)
            partial = args.env_file.with_suffix(".partial")
            partial.write_text(env_file_text(endpoint))
            partial.replace(args.env_file)  # appears complete, or not at all
            print(
                f"ready: {endpoint.url} (region {endpoint.region})\n"
                f"  source {args.env_file}\nthen cdk deploy and order-pipeline as usual. Ctrl-C stops it.",
                flush=True,
            )
            while True:  # time.sleep, unlike a lock wait, is interrupted by Ctrl-C
                time.sleep(1)
    except DeployError as exc:
        print(f"DeployError: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stopped", flush=True)
        return 0
    finally:
        args.env_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
