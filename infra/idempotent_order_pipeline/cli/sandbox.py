"""``order-pipeline sandbox start|status|stop``: the local stand-in for AWS (needs the ``sandbox`` extra).

The commands are a front for :mod:`idempotent_order_pipeline.sandbox.control`, imported when one runs, so
that the rest of the CLI works without the extra. ``start`` prints the env file's path as its last
line (scripts take it with ``tail -n 1``); these names and that line are a contract.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from idempotent_order_pipeline.cli.output import Failure, echo

if TYPE_CHECKING:
    from idempotent_order_pipeline.sandbox import control

#: The modules the ``sandbox`` extra installs that the stand-in imports first.
SANDBOX_EXTRA_MODULES = frozenset({"moto", "werkzeug", "flask", "aws_lambda_powertools"})
SANDBOX_EXTRA_HINT = (
    "order-pipeline sandbox needs the 'sandbox' extra ({missing} is not installed): "
    "pip install 'idempotent-order-pipeline[sandbox]'"
)
#: Mirrors of idempotent_order_pipeline.sandbox.control's names, so that --help works without the extra.
STATE_DIR_VARIABLE = "ORDER_PIPELINE_SANDBOX_DIR"
DEFAULT_STATE_DIR = ".order-pipeline-sandbox"


def _control() -> Any:
    try:
        from idempotent_order_pipeline.sandbox import control
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in SANDBOX_EXTRA_MODULES:
            raise
        raise Failure(SANDBOX_EXTRA_HINT.format(missing=exc.name)) from exc
    return control


def _state(ctx: click.Context) -> control.StateDir:
    state: control.StateDir = _control().StateDir.resolve(ctx.obj)
    return state


@click.group()
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=STATE_DIR_VARIABLE,
    default=DEFAULT_STATE_DIR,
    show_default=True,
    help=f"Where the stand-in keeps its env file, logs and state (or ${STATE_DIR_VARIABLE}).",
)
@click.pass_context
def sandbox(ctx: click.Context, state_dir: Path) -> None:
    """A local stand-in for AWS that runs what `cdk deploy` puts into it (the `sandbox` extra).

    `start` runs it in the background: moto on localhost, bootstrapped for the CDK, the Powertools
    layer and its public SSM parameter published. Source the env file it prints, then `cdk deploy`:
    every SQS-triggered function (with its mapping's settings) and every scheduled function is run
    from the code deployed, until `stop`.
    """
    ctx.obj = state_dir


@sandbox.command()
@click.option(
    "--cdk",
    metavar="PATH",
    envvar="ORDER_PIPELINE_SANDBOX_CDK",
    help="The CDK CLI for `cdk bootstrap` (or $ORDER_PIPELINE_SANDBOX_CDK; default: `cdk` on PATH, "
    "else ./node_modules/.bin/cdk).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 16),
    default=2,
    show_default=True,
    help="Execution environments per function.",
)
@click.option(
    "--visibility-timeout",
    type=click.IntRange(1, 43200),
    default=3,
    show_default=True,
    help="Seconds before a failed batch is received again (compressed time; AWS uses the queue's).",
)
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for it to be ready.")
@click.pass_context
def start(ctx: click.Context, cdk: str | None, concurrency: int, visibility_timeout: int, timeout: float) -> None:
    """Start the stand-in in the background; print the env file's path as the last line.

    Already running: says so and prints the same path.
    """
    control = _control()
    state = _state(ctx)
    options = control.SupervisorOptions(concurrency=concurrency, visibility_timeout=visibility_timeout)
    try:
        stand_in, started = control.start(state, options=options, cdk=cdk, timeout=timeout)
    except control.StandInError as exc:
        raise Failure(str(exc)) from exc
    verb = "started" if started else "already running"
    echo(f"{verb}: {stand_in.endpoint_url} (region {stand_in.region}, pid {stand_in.pid})")
    echo(f"log: {state.log_file} (functions: {state.logs_dir}/<function>-<n>.log)")
    echo(f"next: source {state.env_file}; cdk deploy; order-pipeline send ...")
    echo(str(state.env_file))


@sandbox.command()
@click.option("--json", "as_json", is_flag=True, help="The status as one JSON document.")
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Whether the stand-in runs, and which functions it runs (exit code 1 when it does not run)."""
    control = _control()
    state = _state(ctx)
    stand_in = control.running(state)
    if stand_in is None:
        if as_json:
            echo(json.dumps({"running": False, "state_dir": str(state.path)}))
        else:
            echo(f"not running (state dir {state.path})")
        ctx.exit(1)
    live = stand_in.status()
    if as_json:
        document = {
            "running": True,
            "pid": stand_in.pid,
            "endpoint": stand_in.endpoint_url,
            "region": stand_in.region,
            "env_file": str(state.env_file),
            "log_file": str(state.log_file),
            **live,
        }
        echo(json.dumps(document))
        return
    echo(f"running: {stand_in.endpoint_url} (region {stand_in.region}, pid {stand_in.pid})")
    echo(f"env file: {state.env_file}")
    echo(f"log: {state.log_file}")
    for mapping in live.get("mappings", []):
        echo(
            f"  {mapping['function']} <- {mapping['queue']}: batch {mapping['batch_size']}, "
            f"{mapping['invocations']} invocation(s), {sum(mapping['function_errors'].values())} error(s)"
        )
    for schedule in live.get("schedules", []):
        echo(f"  {schedule['function']} every {schedule['every_seconds']} s: {schedule['invocations']} run(s)")
    for problem in live.get("problems", []):
        echo(f"  cannot run {problem}")


@sandbox.command()
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds to wait at most.")
@click.pass_context
def wait(ctx: click.Context, timeout: float) -> None:
    """Wait until every queue the stand-in polls is empty (what was sent is processed); exit 1 on timeout."""
    control = _control()
    state = _state(ctx)
    stand_in = control.running(state)
    if stand_in is None:
        raise Failure(f"not running (state dir {state.path})")
    if not control.wait_until_idle(stand_in, timeout=timeout):
        echo(f"still busy after {timeout:.0f} s (see order-pipeline sandbox status)")
        ctx.exit(1)
    echo("idle: every polled queue is empty")


@sandbox.command()
@click.pass_context
def stop(ctx: click.Context) -> None:
    """Stop the stand-in, its function processes and its endpoint (its AWS state is gone)."""
    control = _control()
    state = _state(ctx)
    stopped = control.stop(state)
    echo("not running" if stopped is None else f"stopped (pid {stopped.pid})")
