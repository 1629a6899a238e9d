"""``python -m order_pipeline_sandbox demo|sandbox`` (``make demo``, ``make sandbox``).

``demo`` deploys, runs the chaos traffic, prints the report and exits non-zero on any violation.
``sandbox`` deploys, then polls the queue into the function until Ctrl-C, printing how to send an
order by hand. Both stop every process they started on the way out.

Settings come from the command line or, for ``make``, from ``DEMO_*`` variables: ``DEMO_ORDERS``
(default 500), ``DEMO_SEED``, ``DEMO_CRASH_RATE`` (share of invocations that crash, default 0.2),
``DEMO_CONCURRENCY`` (execution environments, default 2), ``DEMO_VISIBILITY_TIMEOUT`` (seconds).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from order_pipeline_sandbox import demo, outage
from order_pipeline_sandbox.deploy import DEFAULT_STAGE, DeployError
from order_pipeline_sandbox.function import DeployedFunctionError
from order_pipeline_sandbox.poller import DEFAULT_VISIBILITY_TIMEOUT_SECONDS, PollerStats
from order_pipeline_sandbox.report import render, render_outage


def _env_default(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m order_pipeline_sandbox", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("demo", "sandbox"):
        command = commands.add_parser(name)
        command.add_argument("--stage", default=DEFAULT_STAGE)
        command.add_argument(
            "--concurrency", type=int, default=int(_env_default("DEMO_CONCURRENCY", str(demo.DEFAULT_CONCURRENCY)))
        )
        command.add_argument(
            "--visibility-timeout",
            type=int,
            default=int(_env_default("DEMO_VISIBILITY_TIMEOUT", str(DEFAULT_VISIBILITY_TIMEOUT_SECONDS))),
        )
    run = commands.choices["demo"]
    run.add_argument("--orders", type=int, default=int(_env_default("DEMO_ORDERS", str(demo.DEFAULT_ORDERS))))
    run.add_argument("--seed", type=int, default=int(_env_default("DEMO_SEED", str(demo.DEFAULT_SEED))))
    run.add_argument(
        "--crash-rate", type=float, default=float(_env_default("DEMO_CRASH_RATE", str(demo.DEFAULT_CRASH_RATE)))
    )
    return parser


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _run_demo(args: argparse.Namespace, console: Console) -> int:
    options = demo.SandboxOptions(stage=args.stage, concurrency=args.concurrency)
    chaos = demo.ChaosOptions(
        orders=args.orders, seed=args.seed, crash_rate=args.crash_rate, visibility_timeout=args.visibility_timeout
    )
    with demo.Sandbox(options, log=lambda message: console.log(message)) as sandbox:
        console.log(f"endpoint {sandbox.endpoint.url}; deployed {sandbox.deployment.stack_name}")
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
        )
        task = progress.add_task("messages settled", total=None, status="")

        def on_progress(done: int, total: int, stats: PollerStats) -> None:
            status = f"invocations {stats.invocations} · crashes {stats.crashes_injected}"
            progress.update(task, completed=done, total=total, status=status)

        with progress:
            run = demo.run_chaos(sandbox, chaos, on_progress)
        render(run, demo.describe(sandbox), sandbox.timings, console)
        console.log("SNS outage scenario: orders recorded while SNS is down, DLQ dropped, reconciler...")
        recovered = outage.run_sns_outage(sandbox, seed=args.seed, visibility_timeout=args.visibility_timeout)
        render_outage(recovered, console)
    console.log(f"stopped the endpoint and {options.concurrency} function processes; logs in {sandbox.logs_dir}")
    return 0 if run.result.ok and recovered.ok else 1


def _run_sandbox(args: argparse.Namespace, console: Console) -> int:
    options = demo.SandboxOptions(stage=args.stage, concurrency=args.concurrency)
    with demo.Sandbox(options, log=lambda message: console.log(message)) as sandbox:
        poller = sandbox.poller(visibility_timeout=args.visibility_timeout, crash_plan=None)
        poller.start()
        outputs = sandbox.deployment.outputs
        endpoint = sandbox.endpoint
        aws = f"aws --endpoint-url {endpoint.url} --region {endpoint.region}"
        info = demo.describe(sandbox)
        console.print(
            f"\n[bold]Sandbox ready[/]: {info['stack']} on {endpoint.url}\n"
            f"function  {info['function']}\nmapping   {info['mapping']}\n"
            f"skipped by moto's CloudFormation: {', '.join(info['skipped'])}\n\n"
            "Credentials: any (e.g. export AWS_ACCESS_KEY_ID=sandbox AWS_SECRET_ACCESS_KEY=sandbox)\n"
            f"Send an order:\n  {aws} sqs send-message --queue-url {outputs[names.QUEUE_URL_OUTPUT]} "
            '--message-body \'{"order_id": "hand-1", "amount": 12.5}\'\n'
            f"See the row:\n  {aws} dynamodb scan --table-name {outputs[names.ORDER_RECORDS_TABLE_OUTPUT]}\n"
            f"  {aws} dynamodb scan --table-name {outputs[names.PROCESSED_EVENTS_TABLE_OUTPUT]}\n"
            f"See the DLQ:\n  {aws} sqs receive-message --queue-url {outputs[names.DEAD_LETTER_QUEUE_URL_OUTPUT]} "
            "--message-attribute-names All\n"
            f"Function logs: {sandbox.logs_dir}/function-*.log\n\n"
            "Polling the queue into the function. Ctrl-C stops everything.",
            highlight=False,
            soft_wrap=True,
        )
        try:
            while True:  # time.sleep, unlike a lock wait, is interrupted by Ctrl-C
                time.sleep(1)
        except KeyboardInterrupt:
            console.print("\nstopping...")
        finally:
            poller.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        return _run_demo(args, console) if args.command == "demo" else _run_sandbox(args, console)
    except (DeployError, DeployedFunctionError) as exc:
        console.print(f"[bold red]{type(exc).__name__}[/]: {exc}")
        return 2
    except KeyboardInterrupt:
        console.print("interrupted; everything the sandbox started is stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
