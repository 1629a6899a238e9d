"""``python -m idempotent_order_pipeline.sandbox demo`` (``make demo``): the stand-in on this repository's app.

It starts the stand-in (what ``order-pipeline sandbox start`` starts, with a crash plan), deploys
the ``dev`` stage with the real CDK CLI, runs the chaos traffic and the SNS outage scenario, prints
the report and exits non-zero on any violation; then it stops the stand-in.

Settings come from the command line or, for ``make``, from ``DEMO_*`` variables: ``DEMO_ORDERS``
(default 500), ``DEMO_SEED``, ``DEMO_CRASH_RATE`` (share of invocations that crash, default 0.2),
``DEMO_CONCURRENCY`` (execution environments, default 2), ``DEMO_VISIBILITY_TIMEOUT`` (seconds).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from idempotent_order_pipeline.sandbox import demo, outage
from idempotent_order_pipeline.sandbox.control import StandInError
from idempotent_order_pipeline.sandbox.deploy import DEFAULT_STAGE, DeployError
from idempotent_order_pipeline.sandbox.function import DeployedFunctionError
from idempotent_order_pipeline.sandbox.poller import DEFAULT_VISIBILITY_TIMEOUT_SECONDS
from idempotent_order_pipeline.sandbox.report import render, render_outage


def _env_default(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m idempotent_order_pipeline.sandbox", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("demo")
    run.add_argument("--stage", default=DEFAULT_STAGE)
    run.add_argument(
        "--concurrency", type=int, default=int(_env_default("DEMO_CONCURRENCY", str(demo.DEFAULT_CONCURRENCY)))
    )
    run.add_argument(
        "--visibility-timeout",
        type=int,
        default=int(_env_default("DEMO_VISIBILITY_TIMEOUT", str(DEFAULT_VISIBILITY_TIMEOUT_SECONDS))),
    )
    run.add_argument("--orders", type=int, default=int(_env_default("DEMO_ORDERS", str(demo.DEFAULT_ORDERS))))
    run.add_argument("--seed", type=int, default=int(_env_default("DEMO_SEED", str(demo.DEFAULT_SEED))))
    run.add_argument(
        "--crash-rate", type=float, default=float(_env_default("DEMO_CRASH_RATE", str(demo.DEFAULT_CRASH_RATE)))
    )
    return parser


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _run_demo(args: argparse.Namespace, console: Console) -> int:
    options = demo.SandboxOptions(
        stage=args.stage,
        concurrency=args.concurrency,
        crash_rate=args.crash_rate,
        crash_seed=args.seed,
        visibility_timeout=args.visibility_timeout,
    )
    chaos = demo.ChaosOptions(orders=args.orders, seed=args.seed)
    with demo.Sandbox(options, log=lambda message: console.log(message)) as sandbox:
        console.log(
            f"stand-in {sandbox.endpoint.url} (state {sandbox.run_dir}); deployed {sandbox.deployment.stack_name}"
        )
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
        )
        task = progress.add_task("messages settled", total=None, status="")

        def on_progress(done: int, total: int, stats: demo.RunStats) -> None:
            status = f"invocations {stats.invocations} · crashes {stats.crashes_injected}"
            progress.update(task, completed=done, total=total, status=status)

        with progress:
            run = demo.run_chaos(sandbox, chaos, on_progress)
        render(run, demo.describe(sandbox), sandbox.timings, console)
        console.log("SNS outage scenario: orders recorded while SNS is down, DLQ dropped, reconciler...")
        recovered = outage.run_sns_outage(sandbox, seed=args.seed)
        render_outage(recovered, console)
    console.log(f"stopped the stand-in and its function processes; logs in {sandbox.logs_dir}")
    return 0 if run.result.ok and recovered.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        return _run_demo(args, console)
    except (DeployError, DeployedFunctionError, StandInError) as exc:
        console.print(f"[bold red]{type(exc).__name__}[/]: {exc}")
        return 2
    except KeyboardInterrupt:
        console.print("interrupted; everything the sandbox started is stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
