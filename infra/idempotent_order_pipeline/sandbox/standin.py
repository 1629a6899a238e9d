"""The stand-in process: a local AWS account that runs what ``cdk deploy`` puts into it.

``order-pipeline sandbox start`` runs ``python -m idempotent_order_pipeline.sandbox.standin --state-dir DIR``
in the background (see :mod:`.control`). In order, it:

1. starts the endpoint, a moto server on ``localhost`` in a child process (:mod:`.server`), its
   log in ``DIR/logs/moto-server.log``;
2. publishes the installed Powertools as a layer and its ARN under Powertools' public SSM
   parameter (the construct's default layer resolves from it at deploy, as in AWS);
3. runs ``cdk bootstrap`` (the CDK CLI: ``--cdk``, ``$ORDER_PIPELINE_SANDBOX_CDK`` or ``cdk`` on
   ``PATH``);
4. finds the interpreter of each of Lambda's Python runtimes (:mod:`.runtimes`), writes
   ``DIR/sandbox.env`` (credentials, ``AWS_ENDPOINT_URL``, region), then ``DIR/state.json`` (its pid,
   endpoint and interpreters: from now on it is ready);
5. runs the :class:`~.supervisor.Supervisor` until SIGTERM: every SQS-triggered and every scheduled
   function deployed from then on is live; ``DIR/status.json`` says what runs.

On SIGTERM it stops the pollers, the function processes and the endpoint, and removes the env and
state files. The endpoint's state lives in memory: a new start is an empty account.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from idempotent_order_pipeline.sandbox.cdk_cli import QUIET_CDK_CLI
from idempotent_order_pipeline.sandbox.control import StateDir
from idempotent_order_pipeline.sandbox.deploy import (
    DeployError,
    bootstrap,
    find_cdk_cli,
    publish_powertools_layer,
    publish_powertools_parameter,
)
from idempotent_order_pipeline.sandbox.server import Endpoint, SandboxServerProcess
from idempotent_order_pipeline.sandbox.supervisor import Supervisor, SupervisorOptions


def env_file_text(endpoint: Endpoint) -> str:
    """``export`` lines for the endpoint (the sandbox's dummy credentials) and a quiet CDK CLI."""
    variables = {**endpoint.environment(), **QUIET_CDK_CLI}
    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in variables.items())


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)  # appears complete, or not at all


def log(message: str) -> None:
    """A line of the stand-in's log (its stdout is ``sandbox.log``)."""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)


def _parser() -> argparse.ArgumentParser:
    defaults = SupervisorOptions()
    parser = argparse.ArgumentParser(prog="python -m idempotent_order_pipeline.sandbox.standin", description=__doc__)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--cdk", default=None)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--visibility-timeout", type=int, default=defaults.visibility_timeout)
    parser.add_argument("--crash-rate", type=float, default=defaults.crash_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    state = StateDir.resolve(args.state_dir)
    options = SupervisorOptions(
        concurrency=args.concurrency,
        visibility_timeout=args.visibility_timeout,
        crash_rate=args.crash_rate,
        seed=args.seed,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    state.logs_dir.mkdir(parents=True, exist_ok=True)
    try:
        cdk = find_cdk_cli(args.cdk)
        with SandboxServerProcess(log_path=state.logs_dir / "moto-server.log") as endpoint:
            log(f"endpoint {endpoint.url} (region {endpoint.region}); log {state.logs_dir / 'moto-server.log'}")
            layer = publish_powertools_layer(endpoint, work_dir=state.path)
            parameter = publish_powertools_parameter(endpoint, layer)
            log(f"Powertools layer {layer.arn} published under {parameter}")
            log(f"cdk bootstrap with {cdk}...")
            bootstrap(endpoint, work_dir=state.path / "bootstrap", cdk=cdk)
            supervisor = Supervisor(endpoint, state.path, {layer.arn: layer}, options, log=log)
            runtimes = supervisor.runtimes.interpreters.summaries()
            for runtime in runtimes:
                log(runtime["summary"])
            _write_atomically(state.env_file, env_file_text(endpoint))

            def publish_status() -> None:
                _write_atomically(state.status_file, json.dumps(supervisor.status(), indent=1))

            publish_status()
            ready = {
                "pid": os.getpid(),
                "endpoint": endpoint.url,
                "region": endpoint.region,
                "layer": {"arn": layer.arn, "zip": str(layer.zip_path), "sha256": layer.sha256},
                "runtimes": runtimes,
            }
            _write_atomically(state.state_file, json.dumps(ready))
            log(f"ready: source {state.env_file}, then cdk deploy; every SQS-triggered function deployed is live")
            supervisor.run(stop, on_round=publish_status)
            log("stopping: pollers, function processes, the endpoint")
    except DeployError as exc:
        log(f"DeployError: {exc}")
        return 2
    finally:
        for path in (state.state_file, state.env_file, state.status_file):
            path.unlink(missing_ok=True)
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
