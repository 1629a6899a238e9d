"""The outputs: ``bench/results.json`` (the contract's shape), details, a rich table, the README section."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.prices import PRICE_REGION, PRICE_SOURCES, PRICES, PRICES_CHECKED
from bench.summary import OPERATION_ABBREVIATIONS, Figures, Target

README_HEADING = "## Performance"
README_WIDTH = 100


@dataclass(frozen=True)
class RunInfo:
    """How the figures were produced."""

    command: str
    date: str
    latency_ms: float
    batches: int
    zero_latency_batches: int
    import_samples: int
    memory_mb: int
    memory_source: str
    stand_in: str
    versions: Mapping[str, str]
    cpus: int
    load: str
    elapsed_s: float


def contract_json(latency_ms: float, results: Mapping[str, Figures]) -> dict[str, Any]:
    """``bench/results.json``: exactly the shape issue 7 specifies."""
    latency: float | int = int(latency_ms) if float(latency_ms).is_integer() else latency_ms
    return {"latency_ms_per_call": latency, "consumers": {name: fig.contract() for name, fig in results.items()}}


def details_json(info: RunInfo, results: Mapping[str, Figures], checks: list[Target]) -> dict[str, Any]:
    """Everything behind the contract's figures, for ``bench/results-detail.json``."""
    return {
        "run": {
            "command": info.command,
            "date": info.date,
            "latency_ms_per_call": info.latency_ms,
            "batches_per_consumer": info.batches,
            "zero_latency_batches_per_consumer": info.zero_latency_batches,
            "batch_size": 10,
            "cold_import_samples": info.import_samples,
            "lambda_memory_mb": info.memory_mb,
            "lambda_memory_source": info.memory_source,
            "lambda_architecture": "arm64",
            "stand_in": info.stand_in,
            "versions": dict(info.versions),
            "cpus": info.cpus,
            "load_average": info.load,
            "elapsed_s": round(info.elapsed_s, 1),
        },
        "prices": {
            "checked": PRICES_CHECKED,
            "region": PRICE_REGION,
            "usd": PRICES.__dict__,
            "sources": PRICE_SOURCES,
            "excluded": "free tiers; SQS (the same for every consumer); CloudWatch Logs",
        },
        "consumers": {name: {**fig.contract(), **fig.details()} for name, fig in results.items()},
        "targets": [{"target": c.name, "met": c.met, "detail": c.detail} for c in checks],
    }


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _ops(by_operation: Mapping[str, float]) -> str:
    return " + ".join(
        f"{OPERATION_ABBREVIATIONS.get(op, op)}{'' if count == 1 else f' x{count:g}'}"
        for op, count in by_operation.items()
    )


def _calls(total: float, by_operation: Mapping[str, float]) -> str:
    return f"{total:g} ({_ops(by_operation)})"


def table_rows(info: RunInfo, results: Mapping[str, Figures]) -> tuple[list[str], list[list[str]]]:
    """Header and rows shared by the rich table and the README's markdown table."""
    header = [
        "consumer",
        f"batch of 10 @{info.latency_ms:g} ms/call (ms)",
        "batch of 10 @0 ms (ms)",
        f"1,000 msgs @{info.latency_ms:g} ms (ms)",
        "calls/msg, first delivery",
        "calls/msg, redelivery",
        "WRU/msg",
        "RRU/msg",
        "USD per 1M orders",
        "cold import (ms)",
        "duplicate rows",
    ]
    rows = []
    for fig in results.values():
        rows.append(
            [
                fig.name,
                f"{fig.batch10_ms:.1f}",
                f"{fig.batch10_ms_zero_latency:.1f}",
                f"{fig.per_1000_ms:,.0f}",
                _calls(fig.calls_per_msg_first, fig.calls_first_by_operation),
                _calls(fig.calls_per_msg_redelivery, fig.calls_redelivery_by_operation),
                f"{fig.wru_per_msg:g}",
                f"{fig.rru_per_msg:g}",
                f"{fig.usd_per_million:.3f}",
                f"{fig.cold_import_ms:.0f}",
                f"{fig.duplicate_rows:,} of {fig.redelivered:,}",
            ]
        )
    return header, rows


def logs_usd(fig: Figures) -> float:
    """CloudWatch Logs ingestion per million orders for what the consumer wrote per message."""
    return fig.log_bytes_per_msg * 1_000_000 / 1e9 * PRICES.cloudwatch_logs_per_gb_ingested


def notes(info: RunInfo, results: Mapping[str, Figures]) -> list[str]:
    def each(value: Callable[[Figures], str]) -> str:
        return ", ".join(f"{fig.name} {value(fig)}" for fig in results.values())

    return [
        f"Stand-in: {info.stand_in}.",
        "Batch times are the consumer's time: wall time with the stand-in's own work taken off the clock. moto "
        "answers in-process, one call at a time under a lock and on the same CPU, for about "
        f"{each(lambda f: format(f.moto_ms_per_call['median'], '.2f'))} ms per call (median); in AWS that work runs "
        "on the service's side, in parallel, inside the round trip the latency stands for. With the stand-in's "
        f"work left on the clock, a batch of 10 at {info.latency_ms:g} ms/call takes "
        f"{each(lambda f: f'{f.batch10_ms_wall:.0f}')} ms.",
        f"Consumer CPU per batch of 10 (the 0 ms column: its code and botocore's, threads included), ms: "
        f"{each(lambda f: f'{f.consumer_cpu_ms_per_batch:.0f}')}. Lambda gives {info.memory_mb} MB about "
        f"{info.memory_mb / 1769:.2f} vCPU (1 vCPU at 1,769 MB), so CPU weighs more there than here.",
        "Logs written per message (JSON log lines, EMF metrics): "
        + (
            ", ".join(
                f"{fig.name} {fig.log_bytes_per_msg:.0f} B, ${logs_usd(fig):.3f} per million orders at CloudWatch "
                f"Logs' ${PRICES.cloudwatch_logs_per_gb_ingested}/GB ingested"
                for fig in results.values()
                if fig.log_bytes_per_msg
            )
            or "none"
        )
        + "; not in the USD column (the peers here write no logs; real ones would).",
        f"Prices ({PRICE_REGION}, list, checked {PRICES_CHECKED}, free tiers ignored): DynamoDB on-demand "
        f"${PRICES.dynamodb_per_million_wru}/M WRU and ${PRICES.dynamodb_per_million_rru}/M RRU, SNS "
        f"${PRICES.sns_per_million_publishes}/M publishes, Lambda arm64 ${PRICES.lambda_arm64_per_gb_second:.10f}/GB-s "
        f"and ${PRICES.lambda_per_million_requests}/M requests, at {info.memory_mb} MB ({info.memory_source}), "
        "billed on the batch time above; SQS costs every consumer the same and is left out.",
        "Request units by DynamoDB's rules (bench/units.py): 1 WRU per KB written, 2 per KB per item in a "
        "transaction, failed conditions and cancelled transactions still consume; reads 0.5 RRU per 4 KB "
        "eventually consistent, 1 strongly consistent.",
        f"Duplicate rows: order rows beyond one per order, after every message was delivered twice "
        f"({info.batches + info.zero_latency_batches} batches of 10 per consumer); redelivered notifications "
        f"per message: {each(lambda f: f'{f.publishes_per_msg_redelivery:g}')}.",
        f"Runs: {info.batches} batches of 10 per consumer at {info.latency_ms:g} ms/call and "
        f"{info.zero_latency_batches} at 0 ms, the consumers interleaved batch by batch on the same orders; batch "
        f"figures are medians, 1,000 msgs is the sum over {info.batches * 10} messages scaled to 1,000; cold import "
        f"is the minimum of {info.import_samples} fresh interpreters (product code compiled from source, as its "
        f"asset ships no .pyc); {info.cpus} CPUs shared with other work (load average {info.load}), "
        f"on {info.date}, {info.elapsed_s:.0f} s.",
    ]


def print_report(info: RunInfo, results: Mapping[str, Figures], checks: list[Target], console: Console) -> None:
    header, rows = table_rows(info, results)
    table = Table(title=f"Four SQS order consumers, same orders, same stand-in ({info.command})")
    for index, column in enumerate(header):
        table.add_column(column, justify="left" if index in (0, 4, 5) else "right", overflow="fold")
    for row in rows:
        table.add_row(*row, style="bold" if row[0] == "ours" else None)
    console.print(table)
    for check in checks:
        mark = "[green]met[/green]" if check.met else "[red]MISSED[/red]"
        console.print(f"  {mark}  {check.name}: {check.detail}")
    for note in notes(info, results):
        console.print(f"  - {note}", highlight=False)


def _wrap(text: str, bullet: bool = False) -> str:
    """Prose wrapped like the rest of the README (100 columns)."""
    if bullet:
        return textwrap.fill(text, width=README_WIDTH, initial_indent="- ", subsequent_indent="  ")
    return textwrap.fill(text, width=README_WIDTH)


def markdown(info: RunInfo, results: Mapping[str, Figures], checks: list[Target]) -> str:
    header, rows = table_rows(info, results)
    lines = [
        README_HEADING,
        "",
        _wrap(
            "Four consumers of the same SQS order batches, side by side in one run on the moto stand-in, with "
            f"a network round trip of {info.latency_ms:g} ms injected per AWS call: `naive` (put + publish, no "
            "idempotency), `seed` (the seed article's TransactWriteItems / GetItem / Publish / UpdateItem, "
            "records one after the other), `powertools` (Powertools `BatchProcessor` + `@idempotent_function` "
            "around a conditional put and a publish) and `ours` (`order_consumer.handler`, unchanged). "
            "Reproduce with:"
        ),
        "",
        "```bash",
        "make bench        # the full run: writes bench/results.json (+ results-detail.json) and this section",
        "make bench-quick  # fewer batches and samples, under a minute, writes nothing",
        "```",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i in (0, 4, 5) else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(f"**{c}**" if row[0] == "ours" else c for c in row) + " |" for row in rows]
    lines += ["", "Targets (ours against the peers of the same run):", ""]
    lines += [_wrap(f"{'met' if c.met else '**missed**'}: {c.name} ({c.detail})", bullet=True) for c in checks]
    lines += ["", "How these were measured:", ""]
    lines += [_wrap(note, bullet=True) for note in notes(info, results)]
    return "\n".join(lines) + "\n"


def update_readme(readme: Path, section: str) -> None:
    """Replace the README's Performance section (up to the next ``## `` heading), or append it."""
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(README_HEADING)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        following = pattern.search(text)
        assert following is not None
        tail = text[following.end() :]
        updated = text[: following.start()] + section + ("\n" + tail if tail else "")
    else:
        updated = text.rstrip("\n") + "\n\n" + section
    readme.write_text(updated, encoding="utf-8")
