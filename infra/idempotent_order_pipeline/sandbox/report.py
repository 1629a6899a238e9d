"""The demo's report: what was sent, what the endpoint holds, what moto skipped, the verdict."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import metric_names
from idempotent_order_pipeline.sandbox.checks import REDRIVEN
from idempotent_order_pipeline.sandbox.demo import ChaosRun
from idempotent_order_pipeline.sandbox.outage import OutageRun, as_rows


def _row(table: Table, name: str, value: Any, expectation: str = "", ok: bool | None = None) -> None:
    mark = "" if ok is None else ("[green]ok[/]" if ok else "[bold red]VIOLATED[/]")
    table.add_row(name, str(value), expectation, mark)


def render(run: ChaosRun, deployed: dict[str, Any], timings: dict[str, float], console: Console) -> None:
    """Print the report of ``run``."""
    figures = run.result.figures
    stats = run.stats
    metrics = run.metrics
    table = Table(title="Order pipeline: chaos run on the local endpoint", title_justify="left", expand=False)
    for column in ("", "value", "expected", ""):
        table.add_column(column)
    _row(table, "messages sent", figures["messages sent"])
    _row(
        table,
        "  orders / re-sent / conflicting / invalid",
        f"{figures['orders']} / {figures['re-sent by the producer']} / {figures['conflicting']} / {figures['invalid']}",
    )
    _row(table, "unique events", figures["unique events"])
    _row(
        table,
        "order rows",
        figures["order rows"],
        "one per unique event",
        figures["order rows"] + figures["events parked by redrive"] == figures["unique events"],
    )
    _row(table, "duplicate rows", figures["duplicate rows"], "0", figures["duplicate rows"] == 0)
    _row(
        table,
        "events without a notification",
        figures["events without a notification"],
        "0",
        figures["events without a notification"] == 0,
    )
    _row(table, "notifications received by a subscriber", figures["notifications received"], ">= order rows")
    _row(table, "duplicates skipped (metric)", metrics.get(metric_names.DUPLICATES_SKIPPED, 0))
    _row(table, "notifications published (metric)", metrics.get(metric_names.NOTIFICATIONS_PUBLISHED, 0))
    _row(table, "notifications republished (metric)", metrics.get(metric_names.NOTIFICATIONS_REPUBLISHED, 0))
    _row(
        table,
        "messages in the DLQ (distinct)",
        f"{figures['dead letters']} ({figures['distinct messages in the DLQ']})",
        f"({figures['expected in the DLQ']}: invalid + schema violations + losing conflicts)",
        figures["distinct messages parked by the handler"] == figures["expected in the DLQ"],
    )
    for code, count in sorted(run.result.dead_letters_by_code.items()):
        _row(table, f"  error_code {code}", count, "0" if code == REDRIVEN else "")
    app_run = run.worked_app
    if app_run.refusal is not None:
        _row(
            table,
            f"schema violation refused by the producer ({app_run.refusal.order_id})",
            app_run.refusal.message or "accepted",
            "refused",
            app_run.refusal.refused,
        )
    _row(table, "schema violations sent past the producer", figures["schema violations"], "parked: SCHEMA_VIOLATION")
    if app_run.fulfilment is not None:
        shipped = app_run.fulfilment.figures
        _row(
            table,
            f"fulfilment ({app_run.fulfilment.filter_policy}): orders shipped once / matching",
            f"{shipped['orders shipped once']} / {shipped['orders for fulfilment (filter matches)']}",
            "equal",
            shipped["orders shipped once"] == shipped["orders for fulfilment (filter matches)"]
            and len(app_run.fulfilment.shipments) == shipped["orders shipped once"],
        )
        _row(table, "  orders filtered out, never shipped", shipped["orders filtered out"])
    _row(table, "invocations (cold starts)", f"{stats.invocations} ({stats.cold_starts})")
    _row(table, "crashes injected", stats.crashes_injected, "> 0", stats.crashes_injected > 0)
    _row(table, "records reported failed by the function", stats.records_reported_failed)
    _row(table, "function errors not injected", len(stats.unexpected_errors), "0", not stats.unexpected_errors)
    _row(table, "poller errors (calls to the endpoint that failed)", stats.poller_errors, "0", stats.poller_errors == 0)
    _row(table, "wall time of the run", f"{run.wall_seconds:.1f} s")
    _row(table, "set-up (server, bootstrap, deploy, read back)", f"{sum(timings.values()):.1f} s")
    console.print(table)

    skipped = ", ".join(deployed["skipped"]) or "none"
    console.print(
        Panel(
            Group(
                f"endpoint   {deployed['endpoint']}",
                f"stack      {deployed['stack']}",
                f"function   {deployed['function']}",
                f"mapping    {deployed['mapping']}",
                f"layer      {deployed.get('layer', '-')}",
                *(interpreter_line(interpreter) for interpreter in deployed.get("interpreters", [])),
                f"[yellow]moto's CloudFormation skipped these resource types[/]: {skipped}",
                "Metrics are summed from the function's EMF log lines; crashed invocations emit none.",
                "A message parked in the DLQ by an invocation that then crashed is redelivered and parked again.",
            ),
            title="deployed",
            title_align="left",
        )
    )
    if run.result.violations:
        console.print(
            Panel("\n".join(run.result.violations), title="[bold red]invariants violated[/]", border_style="red")
        )
    else:
        console.print("[bold green]All invariants hold.[/]")


def interpreter_line(interpreter: dict[str, Any]) -> str:
    """``runtime    function X (python3.14) runs on ...``: yellow when it is not the runtime's Python."""
    line = escape(str(interpreter["line"]))
    return f"runtime    {line}" if interpreter["matches"] else f"[yellow]runtime[/]    {line}"


def render_outage(run: OutageRun, console: Console) -> None:
    """Print the SNS outage scenario: every order whose only copy was dropped, notified by the reconciler."""
    table = Table(title="SNS outage, DLQ dropped, reconciler", title_justify="left", expand=False)
    for column in ("", "value", "expected", ""):
        table.add_column(column)
    for name, value, expectation, ok in as_rows(run):
        _row(table, name, value, expectation, ok)
    console.print(table)
    if run.runs_on:
        console.print(f"reconciler: {escape(run.runs_on)}")
    if run.violations:
        console.print(Panel("\n".join(run.violations), title="[bold red]reconciliation failed[/]", border_style="red"))
    else:
        console.print(f"[bold green]All {run.notified} orders of the outage were notified by the reconciler.[/]")
