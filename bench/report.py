"""The outputs: ``bench/results.json`` (the contract's shape), details, a rich table, ``docs/performance.md``
and the README's headline figures."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.capped import SweepResult
from bench.prices import ASSUMPTIONS, PRICE_REGION, PRICE_SOURCES, PRICES, PRICES_CHECKED
from bench.summary import LAMBDA_CPU_CONSUMERS, OPERATION_ABBREVIATIONS, Figures, MemoryFigures, Target

#: The page ``make bench`` writes, relative to the repository root.
PAGE_PATH = "docs/performance.md"
PAGE_HEADING = "# Performance"
#: Prose is wrapped at the width of the rest of the docs.
TEXT_WIDTH = 100
#: The chart, relative to the repository root; the page sits beside it.
CHART_PATH = "docs/memory-sweep.png"
#: The README's headline figures sit between these two lines, and only there.
HEADLINE_START = "<!-- headline figures: written by make bench from bench/results.json -->"
HEADLINE_END = "<!-- end of headline figures -->"


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
    machine: str = ""
    capped: bool = False
    cap_note: str = ""
    rounds: int = 0
    latency_ms_list: tuple[float, ...] = ()
    recommendation: str = ""
    calls_check: str = ""
    #: How the reconciler's runs were measured and billed, in words.
    reconciler: str = ""
    #: The default pipeline's fixed monthly cost, by line (bench.prices.fixed_monthly).
    fixed_monthly_usd: Mapping[str, float] = field(default_factory=dict)


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def contract_json(
    latency_ms: float,
    results: Mapping[str, Figures],
    *,
    default_memory_mb: int,
    lambda_cpu: Mapping[int, MemoryFigures],
    fixed_monthly_usd: Mapping[str, float],
) -> dict[str, Any]:
    """``bench/results.json``: issue 7's keys, issue 12's (``default_memory_mb``, ``lambda_cpu``, calls),
    then issue 21's (``usd_breakdown`` per consumer, ``fixed_monthly_usd``, the assumptions)."""
    return {
        "latency_ms_per_call": _number(latency_ms),
        "consumers": {name: fig.contract() for name, fig in results.items()},
        "default_memory_mb": default_memory_mb,
        "lambda_cpu": {str(memory): figures.contract() for memory, figures in sorted(lambda_cpu.items())},
        "ours_calls_per_batch_of_10_new": _number(results["ours"].calls_per_batch_first),
        "fixed_monthly_usd": dict(fixed_monthly_usd),
        "cost_assumptions": asdict(ASSUMPTIONS),
    }


def sweep_json(
    sweep: SweepResult,
    by_latency: Mapping[float, Mapping[int, MemoryFigures]],
    components: Mapping[str, Mapping[str, float]],
) -> dict[str, Any]:
    """Everything of the capped sweep, every consumer and latency, for the detail file."""
    return {
        "capped": sweep.capped,
        "caps": sweep.cap_note,
        "quotas_applied": {
            str(m): {"quota_us": q.quota_us, "period_us": q.period_us, "share_of_one_core": round(q.share, 4)}
            for m, q in sorted(sweep.quotas.items())
        },
        "worker_core": sweep.worker_cpu,
        "stand_in_cores": sweep.standin_cpus,
        "rounds": sweep.rounds,
        "idle_gap_s": sweep.idle_gap_s,
        "by_latency_ms": {
            str(_number(latency)): {
                str(memory): {
                    **figures.contract(tuple(figures.consumers)),
                    "calls_per_batch_seen_by_http_stand_in": {
                        name: fig.calls_per_batch for name, fig in figures.consumers.items()
                    },
                    "batch10_ms_samples": {
                        name: [round(b.wall_ms, 1) for b in sweep.settings[latency][memory][name].batches]
                        for name in figures.consumers
                    },
                }
                for memory, figures in sorted(by_memory.items())
            }
            for latency, by_memory in by_latency.items()
        },
        "cpu_ms_per_record_by_component": components,
    }


def details_json(
    info: RunInfo, results: Mapping[str, Figures], checks: list[Target], sweep: Mapping[str, Any]
) -> dict[str, Any]:
    """Everything behind the contract's figures, for ``bench/results-detail.json``."""
    return {
        "run": {
            "machine": info.machine,
            "capped": info.capped,
            "caps": info.cap_note,
            "memory_recommendation": info.recommendation,
            "calls_moto_vs_http_stand_in": info.calls_check,
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
            "assumptions": asdict(ASSUMPTIONS),
            "excluded": "free tiers; the event source mapping's idle long polls (not per order)",
        },
        "reconciler": info.reconciler,
        "consumers": {name: {**fig.contract(), **fig.details()} for name, fig in results.items()},
        "lambda_cpu_sweep": dict(sweep),
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
    """The moto table (in-process, uncapped): header and rows shared by the rich table and the page."""
    header = [
        "consumer",
        f"batch of 10 @{info.latency_ms:g} ms/call, moto, uncapped (ms)",
        "batch of 10 @0 ms (ms)",
        "calls/msg, first delivery",
        "calls/msg, redelivery",
        "WRU/msg",
        "RRU/msg",
        "SNS requests/msg",
        f"USD per 1M orders @{info.memory_mb} MB, capped",
        "cold import (ms)",
        "cold start (ms)",
        "duplicate rows",
    ]
    rows = []
    for fig in results.values():
        rows.append(
            [
                fig.name,
                f"{fig.batch10_ms:.1f}",
                f"{fig.batch10_ms_zero_latency:.1f}",
                _calls(fig.calls_per_msg_first, fig.calls_first_by_operation),
                _calls(fig.calls_per_msg_redelivery, fig.calls_redelivery_by_operation),
                f"{fig.wru_per_msg:g}",
                f"{fig.rru_per_msg:g}",
                f"{fig.sns_requests_per_msg:g}",
                f"{fig.usd_per_million:.3f}",
                f"{fig.cold_import_ms:.0f}",
                f"{fig.cold_start_ms:.0f}",
                f"{fig.duplicate_rows:,} of {fig.redelivered:,}",
            ]
        )
    return header, rows


def sweep_rows(by_memory: Mapping[int, MemoryFigures]) -> tuple[list[str], list[list[str]]]:
    """The capped sweep at one latency: a row per memory size."""
    names = [n for n in LAMBDA_CPU_CONSUMERS if all(n in f.consumers for f in by_memory.values())]
    header = ["memory (MB)", "CPU share"]
    header += [f"{name} ms (p90)" for name in names]
    header += ["ours / seed", "ours / powertools"]
    header += [f"USD/M {name}" for name in names]
    rows = []
    for memory, figures in sorted(by_memory.items()):
        c = figures.consumers
        row = [str(memory), f"{figures.cpu_share:.3f}" + ("" if figures.capped else " (uncapped)")]
        row += [f"{c[n].batch10_ms:.0f} ({c[n].batch10_p90_ms:.0f})" for n in names]
        row += [f"{c['ours'].batch10_ms / c[peer].batch10_ms:.2f}x" for peer in ("seed", "powertools")]
        row += [f"{c[n].usd_per_million:.3f}" for n in names]
        rows.append(row)
    return header, rows


def component_rows(components: Mapping[str, Mapping[str, float]]) -> tuple[list[str], list[list[str]]]:
    """CPU ms per record by component, a row per component, a column per consumer."""
    names = [n for n in ("naive", *LAMBDA_CPU_CONSUMERS) if n in components]
    order: dict[str, float] = {}
    for name in names:
        for component, value in components[name].items():
            order[component] = order.get(component, 0.0) + value
    header = ["component (CPU ms per record)", *names]
    rows = [
        [component, *(f"{components[n].get(component, 0.0):.2f}" for n in names)]
        for component in sorted(order, key=lambda c: -order[c])
    ]
    rows.append(["**total**", *(f"**{sum(components[n].values()):.2f}**" for n in names)])
    return header, rows


def cost_rows(results: Mapping[str, Figures]) -> tuple[list[str], list[list[str]]]:
    """USD per million orders at the default memory, a row per line item, a column per consumer."""
    names = list(results)
    header = ["USD per million orders", *names]
    lines = list(next(iter(results.values())).cost.as_dict())
    rows = [[line.replace("_", " "), *(f"{results[n].cost.as_dict()[line]:.4f}" for n in names)] for line in lines]
    rows.append(["**total** (`usd_per_million`)", *(f"**{results[n].usd_per_million:.4f}**" for n in names)])
    return header, rows


def _columns_markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A table whose columns are consumers (ours' column in bold)."""
    bold = {i for i, name in enumerate(header) if name == "ours"}
    return [
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
        *(
            "| "
            + " | ".join(f"**{c}**" if i in bold and not c.startswith("**") else c for i, c in enumerate(row))
            + " |"
            for row in rows
        ),
    ]


def notes(info: RunInfo, results: Mapping[str, Figures]) -> list[str]:
    def each(value: Callable[[Figures], str]) -> str:
        return ", ".join(f"{fig.name} {value(fig)}" for fig in results.values())

    cap = (
        f"capped by {info.cap_note}: each consumer in its own process, pinned to one core, its cgroup's CPU "
        "quota set to memory / 1,769 MB of that core per 10 ms period (20 ms for 128 MB: the kernel's smallest "
        "quota is 1 ms) before each batch; 1,769 MB and more get the whole core"
        if info.capped
        else f"NOT capped ({info.cap_note}): the capped figures are uncapped runs, not comparable with Lambda's"
    )
    return [
        f"Machine: {info.machine}; {info.cpus} CPUs shared with other work, load average {info.load}; "
        f"{info.date}, {info.elapsed_s:.0f} s for the whole run.",
        f"Lambda CPU: {cap}. The AWS stand-in is another process (bench/http_standin.py) answering over HTTP on "
        f"localhost each call {', '.join(f'{v:g}' for v in info.latency_ms_list)} ms after it arrived, a thread per "
        "connection (no queueing), AWS-shaped success responses; consumers interleaved batch by batch in rotated "
        f"order with memory sizes rotated too, a 50 ms idle gap after every batch, {info.rounds} batches of 10 new "
        "orders per consumer, memory size and latency after one warm-up batch each; medians and p90.",
        "USD per million orders bills, for every consumer alike: the DynamoDB table and index writes and the reads, "
        "SNS and SQS requests each consumer made on moto in the same run (tables created as the construct deploys "
        "them, so the pending index's writes are metered as DynamoDB bills them); the producer's SendMessageBatch "
        f"({ASSUMPTIONS.producer_batch} orders per request) and the event source mapping's ReceiveMessage and "
        "DeleteMessageBatch per batch; Lambda requests and duration at the capped median batch time at that memory "
        f"(per started ms); INIT at the measured cold start on {ASSUMPTIONS.cold_start_rate:.0%} of invocations; "
        "CloudWatch Logs ingestion of the bytes each consumer wrote; and, for a consumer with a reconciler, its "
        f"scheduled runs spread over {ASSUMPTIONS.orders_per_month:,} orders a month. {info.reconciler}",
        f"moto in-process (the last table): correctness (rows, duplicates), calls and request units, the "
        f"consumers interleaved on the same orders, {info.batches} batches at {info.latency_ms:g} ms/call and "
        f"{info.zero_latency_batches} at 0 ms, every message delivered twice; {info.stand_in}. {info.calls_check}",
        "Logs written per message (JSON log lines, EMF metrics), billed at CloudWatch Logs' "
        f"${PRICES.cloudwatch_logs_per_gb_ingested}/GB ingested: "
        + ", ".join(f"{fig.name} {fig.log_bytes_per_msg:.0f} B" for fig in results.values())
        + ".",
        f"Prices ({PRICE_REGION}, list, checked {PRICES_CHECKED}, free tiers ignored): DynamoDB on-demand "
        f"${PRICES.dynamodb_per_million_wru}/M WRU and ${PRICES.dynamodb_per_million_rru}/M RRU, SNS "
        f"${PRICES.sns_per_million_requests}/M requests and SQS ${PRICES.sqs_per_million_requests}/M requests "
        "(each 64 KB chunk of payload one request; a PublishBatch or SendMessageBatch of up to 10 messages one "
        f"request per 64 KB of its whole payload), Lambda arm64 ${PRICES.lambda_arm64_per_gb_second:.10f}/GB-s and "
        f"${PRICES.lambda_per_million_requests}/M requests (the INIT phase billed as duration); the event source "
        "mapping's idle long polls are not per order and are left out.",
        "Request units by DynamoDB's rules (bench/units.py): 1 WRU per KB written, 2 per KB per item in a "
        "transaction, each put or delete of a BatchWriteItem as its single write, failed conditions and cancelled "
        "transactions still consume; an index write for every write that puts an entry into a global secondary "
        "index, takes one out or changes it (2 when an index key changes), 1 WRU per KB of the entry; reads 0.5 "
        "RRU per 4 KB eventually consistent, 1 strongly consistent.",
        f"Cold start: import of the handler module plus its clients (a peer's two boto3 clients; the product, as a "
        f"black box, an invocation with no records), minimum of {info.import_samples} fresh interpreters; the "
        "product loads the checked-hash bytecode its asset ships (compiled the same way for the benchmark's "
        "Python), a peer's handler compiles from source; cold import is the import alone.",
        f"Duplicate rows after every message was delivered twice: {each(lambda f: f'{f.duplicate_rows}')}; "
        f"redelivered notifications per message: {each(lambda f: f'{f.publishes_per_msg_redelivery:g}')}.",
    ]


def print_report(
    info: RunInfo,
    results: Mapping[str, Figures],
    checks: list[Target],
    sweeps: Mapping[float, Mapping[int, MemoryFigures]],
    components: Mapping[str, Mapping[str, float]],
    console: Console,
) -> None:
    for latency, by_memory in sweeps.items():
        header, rows = sweep_rows(by_memory)
        _print_table(console, f"Lambda CPU, batch of 10 new orders @{latency:g} ms/call ({info.command})", header, rows)
    header, rows = component_rows(components)
    _print_table(console, "CPU per record by component (profiled, shares applied to unprofiled CPU)", header, rows)
    header, rows = table_rows(info, results)
    _print_table(console, "moto in-process: calls, units, correctness", header, rows)
    for check in checks:
        mark = "[green]met[/green]" if check.met else "[red]MISSED[/red]"
        console.print(f"  {mark}  {check.name}: {check.detail}")
    console.print(f"  - memory: {info.recommendation}", highlight=False)
    for note in notes(info, results):
        console.print(f"  - {note}", highlight=False)


def _print_table(console: Console, title: str, header: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for index, column in enumerate(header):
        table.add_column(column, justify="left" if index == 0 else "right", overflow="fold")
    for row in rows:
        table.add_row(*(cell.replace("**", "") for cell in row), style="bold" if row[0] == "ours" else None)
    console.print(table)


def _wrap(text: str, bullet: bool = False) -> str:
    """Prose wrapped like the rest of the docs (100 columns)."""
    if bullet:
        return textwrap.fill(text, width=TEXT_WIDTH, initial_indent="- ", subsequent_indent="  ")
    return textwrap.fill(text, width=TEXT_WIDTH)


def _markdown_table(header: list[str], rows: list[list[str]], *, left: tuple[int, ...] = (0,)) -> list[str]:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i in left else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(f"**{c}**" if row[0] == "ours" else c for c in row) + " |" for row in rows]
    return lines


def markdown(
    info: RunInfo,
    results: Mapping[str, Figures],
    checks: list[Target],
    sweeps: Mapping[float, Mapping[int, MemoryFigures]],
    components: Mapping[str, Mapping[str, float]],
) -> str:
    chart = Path(CHART_PATH).relative_to(Path(PAGE_PATH).parent).as_posix()
    lines = [
        PAGE_HEADING,
        "",
        _wrap(
            "Three consumers of the same SQS order batches, measured side by side in one run as Lambda runs them: "
            "each in its own process with the CPU share of its memory size (a cgroup quota), against an AWS "
            "stand-in in another process that answers every call a fixed latency after it arrived. `seed` is the "
            "seed article's algorithm (TransactWriteItems / GetItem / Publish / UpdateItem, one record after the "
            "other), `powertools` is Powertools' `BatchProcessor` + `@idempotent_function` around a conditional "
            "put and a publish, `ours` is the product's handler `order_consumer.handler`, unchanged (`naive`, put "
            "+ publish without idempotency, is a floor: in the moto table and the detail file). The method, and "
            "why in-process figures alone misled, is in [benchmark.md](benchmark.md). Reproduce with:"
        ),
        "",
        "```bash",
        "make bench        # the full run: bench/results.json (+ -detail), the chart, this page, the README's figures",
        'make bench-quick  # the same shape, fewer batches, under 3 minutes; BENCH_ARGS="--out r.json" writes it',
        "```",
        "",
        f"![Batch latency and USD per million orders against Lambda memory, one line per consumer]({chart})",
        "",
        _wrap(f"Memory: {info.recommendation}"),
        "",
    ]
    for latency, by_memory in sweeps.items():
        header, rows = sweep_rows(by_memory)
        lines += [f"Batch of 10 new orders at {latency:g} ms per AWS call, median (p90), by memory size:", ""]
        lines += _markdown_table(header, rows)
        lines += [""]
    header, rows = component_rows(components)
    lines += [
        _wrap(
            "CPU per record by component (a cProfile of every thread on its own CPU clock, aggregated by module; "
            "builtins and generic helpers counted with their callers; the shares applied to the CPU measured "
            f"without the profiler at {info.memory_mb} MB):"
        ),
        "",
    ]
    lines += _markdown_table(header, rows)
    header, rows = cost_rows(results)
    lines += [
        "",
        _wrap(
            f"Every cost of an order at the default memory ({info.memory_mb} MB), by the same rules for every "
            "consumer (`usd_breakdown` in results.json; how each line is counted: below):"
        ),
        "",
    ]
    lines += _columns_markdown_table(header, rows)
    fixed = info.fixed_monthly_usd
    if fixed:
        lines += [
            "",
            _wrap(
                f"Fixed per month, whatever the volume (the default pipeline's template, CloudWatch list prices, "
                f"free tiers ignored): alarm metrics ${fixed['alarm_metrics']:.2f}, dashboard "
                f"${fixed['dashboards']:.2f}, custom metrics ${fixed['custom_metrics']:.2f}: "
                f"${fixed['total']:.2f} per pipeline."
            ),
        ]
    header, rows = table_rows(info, results)
    lines += ["", _wrap("Calls, request units, cost and correctness, on moto in-process in the same run:"), ""]
    lines += _markdown_table(header, rows, left=(0, 3, 4))
    lines += ["", "Targets (ours against the peers of the same run, 5 ms per call):", ""]
    lines += [_wrap(f"{'met' if c.met else '**missed**'}: {c.name} ({c.detail})", bullet=True) for c in checks]
    lines += ["", "How these were measured:", ""]
    lines += [_wrap(note, bullet=True) for note in notes(info, results)]
    return "\n".join(lines) + "\n"


def write_page(page: Path, text: str) -> None:
    """Write ``docs/performance.md`` (the whole page is the run's)."""
    page.write_text(text, encoding="utf-8")


def headline(results: Mapping[str, Any]) -> str:
    """The README's headline figures, from ``bench/results.json`` alone (so a test can recompute them)."""
    memory = results["default_memory_mb"]
    consumers = results["consumers"]
    capped = results["lambda_cpu"][str(memory)]
    names = [n for n in LAMBDA_CPU_CONSUMERS if n in consumers and n in capped["consumers"]]
    latency = _number(results["latency_ms_per_call"])
    fixed = results["fixed_monthly_usd"]
    rows = [
        (
            f"batch of 10 new orders, {latency} ms per AWS call, median ms"
            + ("" if capped["capped"] else " (CPU NOT capped)"),
            [f"{capped['consumers'][n]['batch10_ms']:.0f}" for n in names],
        ),
        (
            "USD per million orders (`usd_per_million`), the sum of:",
            [f"{consumers[n]['usd_per_million']:.2f}" for n in names],
        ),
        *(
            (f"&nbsp;&nbsp;{line.replace('_', ' ')}", [f"{consumers[n]['usd_breakdown'][line]:.4f}" for n in names])
            for line in consumers[names[0]]["usd_breakdown"]
        ),
        ("AWS calls per message, first delivery", [f"{consumers[n]['calls_per_msg_first']:g}" for n in names]),
        ("cold start (import + clients), ms", [f"{consumers[n]['cold_start_ms']:.0f}" for n in names]),
        ("cold import, ms", [f"{consumers[n]['cold_import_ms']:.0f}" for n in names]),
        ("duplicate rows, every message delivered twice", [f"{consumers[n]['duplicate_rows']:,}" for n in names]),
    ]
    lines = [
        HEADLINE_START,
        f"| at {memory:,} MB | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
        *(f"| {label} | " + " | ".join(values) + " |" for label, values in rows),
        "",
        "Not per order (the default pipeline, any volume, free tiers ignored): "
        + ", ".join(f"{name.replace('_', ' ')} ${value:.2f}" for name, value in fixed.items() if name != "total")
        + f", ${fixed['total']:.2f} a month in all (`fixed_monthly_usd`).",
        HEADLINE_END,
    ]
    return "\n".join(lines) + "\n"


def update_headline(readme: Path, block: str) -> None:
    """Replace the README's headline block (between its markers), or append it when there is none."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(HEADLINE_START), text.find(HEADLINE_END)
    if start != -1 and end > start:
        updated = text[:start] + block + text[end + len(HEADLINE_END) :].removeprefix("\n")
    else:
        updated = text.rstrip("\n") + "\n\n" + block
    readme.write_text(updated, encoding="utf-8")
