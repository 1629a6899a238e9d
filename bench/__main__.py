"""``python -m bench [--quick]``: run the benchmark, print the tables, write the results.

``make bench`` runs the full benchmark and writes ``bench/results.json`` (the contract's shape),
``bench/results-detail.json``, the chart ``docs/memory-sweep.png``, the page ``docs/performance.md``
and the README's headline figures, all from one run. ``make bench-quick`` runs fewer batches and
writes nothing unless asked (``--out``, ``--page``, ``--readme``, ``--chart``).

One run: cold starts in fresh interpreters; the consumers on moto in-process (correctness, calls,
request units); the Lambda-CPU sweep, each consumer in its own capped process against the HTTP
stand-in, over the memory sizes at 5 and 10 ms per call; a profiled run for CPU by component.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import random
import sys
import time
from pathlib import Path

from rich.console import Console

from bench import capped, chart, coldstart, deployment, report, summary
from bench.cgroups import cpu_share
from bench.orders import OrderSource
from bench.prices import ReconcilerRun, fixed_monthly
from bench.run import (
    CONSUMERS,
    REPO_ROOT,
    StandIn,
    construct_memory_mb,
    measure,
    measure_reconciler,
    stand_in_note,
    warm_up,
)

FULL = {"batches": 30, "zero_latency_batches": 10, "import_samples": 15, "rounds": 15, "profile_batches": 5}
QUICK = {"batches": 3, "zero_latency_batches": 1, "import_samples": 8, "rounds": 2, "profile_batches": 2}
#: Scheduled reconciler runs measured (at the latency, then at 0 ms), full and quick.
RECONCILER_RUNS = {"full": 5, "quick": 1}


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches and samples (under 3 minutes)")
    parser.add_argument("--latency-ms", type=float, default=5.0, help="moto run: round trip per AWS call (default 5)")
    parser.add_argument("--batches", type=int, help="moto run: batches of 10 per consumer at the latency")
    parser.add_argument("--zero-latency-batches", type=int, help="moto run: batches of 10 at 0 ms")
    parser.add_argument("--import-samples", type=int, help="fresh interpreters per cold start")
    parser.add_argument("--rounds", type=int, help="capped run: batches per consumer, memory size and latency")
    parser.add_argument("--profile-batches", type=int, help="profiled batches per consumer (CPU by component)")
    parser.add_argument(
        "--memory",
        type=int,
        action="append",
        help=f"capped run: a memory size (MB), repeatable (default {capped.MEMORY_SIZES})",
    )
    parser.add_argument(
        "--capped-latency-ms",
        type=float,
        action="append",
        help=f"capped run: a latency per call (ms), repeatable (default {capped.LATENCIES_MS}; the first counts)",
    )
    parser.add_argument("--no-caps", action="store_true", help="do not try cgroups (the run is labelled uncapped)")
    parser.add_argument("--out", type=Path, help="results JSON (default: bench/results.json, none with --quick)")
    parser.add_argument(
        "--page", type=Path, help=f"performance page to write (default: {report.PAGE_PATH}, none with --quick)"
    )
    parser.add_argument(
        "--readme", type=Path, help="README whose headline figures to update (default: README.md, none with --quick)"
    )
    parser.add_argument("--chart", type=Path, help=f"chart PNG (default: {report.CHART_PATH}, none with --quick)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated orders")
    return parser.parse_args(argv)


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.system()} {platform.release()} {platform.machine()}, {model or 'unknown CPU'}"


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    preset = QUICK if args.quick else FULL
    batches = args.batches or preset["batches"]
    zero_batches = args.zero_latency_batches or preset["zero_latency_batches"]
    import_samples = args.import_samples or preset["import_samples"]
    rounds = args.rounds or preset["rounds"]
    profile_batches = args.profile_batches or preset["profile_batches"]
    memory_sizes = tuple(sorted(set(args.memory))) if args.memory else capped.MEMORY_SIZES
    latencies = tuple(args.capped_latency_ms) if args.capped_latency_ms else capped.LATENCIES_MS
    out = args.out or (None if args.quick else REPO_ROOT / "bench" / "results.json")
    page = args.page or (None if args.quick else REPO_ROOT / report.PAGE_PATH)
    readme = args.readme or (None if args.quick else REPO_ROOT / "README.md")
    chart_path = args.chart or (None if args.quick else REPO_ROOT / report.CHART_PATH)
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 220)
    status = Console(file=sys.stderr, highlight=False)
    started = time.perf_counter()
    load_before = _load()
    memory_mb, memory_source = construct_memory_mb()
    if memory_mb not in memory_sizes:
        memory_sizes = tuple(sorted({*memory_sizes, memory_mb}))

    def say(text: str) -> None:
        status.print(f"[{time.perf_counter() - started:5.0f} s] {text}")

    def progress(latency_ms: float, done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            say(f"moto, {latency_ms:g} ms/call: {done}/{total} batches of 10 through each consumer")

    # 1. cold starts, interleaved so that a busy moment hits every consumer alike
    roots = [REPO_ROOT / "lambdas", REPO_ROOT]
    cold: dict[str, list[coldstart.ImportTime]] = {name: [] for name in CONSUMERS}
    for _ in range(import_samples):
        for name in CONSUMERS:
            cold[name] += coldstart.import_times(name, roots, samples=1)
    say(f"cold start: {import_samples} fresh interpreters per consumer")

    # 2. moto in-process: correctness, calls, request units, on tables as the construct deploys them
    deployed = deployment.load()
    say("synthesized the default pipeline: tables, reconciler schedule, alarms")
    source, rng = OrderSource(args.seed), random.Random(args.seed)  # noqa: S311 - test data
    stand_in = StandIn(deployed)
    try:
        warm_up(stand_in, source, rng)
        at_latency = measure(
            stand_in, latency_ms=args.latency_ms, batches=batches, source=source, rng=rng, progress=progress
        )
        at_zero = measure(stand_in, latency_ms=0, batches=zero_batches, source=source, rng=rng, progress=progress)
        reconciliation = measure_reconciler(
            stand_in, latency_ms=args.latency_ms, runs=RECONCILER_RUNS["quick" if args.quick else "full"]
        )
    finally:
        stand_in.close()

    # 3. Lambda CPU: capped processes against the HTTP stand-in
    run = capped.CappedRun(try_caps=not args.no_caps)
    say(f"capped run: {run.cap_note}; workers on core {run.worker_cpu}, stand-in on {run.standin_cpus}")
    try:
        sweep = run.sweep(
            rounds=rounds, memory_sizes=memory_sizes, latencies_ms=latencies, source=source, rng=rng, progress=say
        )
        shares = run.profile(batches=profile_batches, latency_ms=latencies[0], source=source, rng=rng)
    finally:
        run.close()
    say("capped run done, cgroups removed")

    contract_latency = latencies[0]
    billed = {name: sweep.settings[contract_latency][memory_mb][name].median_ms for name in CONSUMERS}
    reconciler_memory = deployed["reconciler"]["memory_mb"]
    # The run's CPU stretches by the reconciler's CPU share; its waits on AWS do not.
    reconciler_ms = reconciliation.run_ms + reconciliation.cpu_ms * (1 / cpu_share(reconciler_memory) - 1)
    reconcilers = {
        "ours": ReconcilerRun(
            memory_mb=reconciler_memory,
            every_s=deployed["reconciler"]["every_s"],
            billed_ms=reconciler_ms,
            init_ms=min(sample.start_wall_ms for sample in cold["ours"]),
            rru=reconciliation.rru_per_run,
            log_bytes=reconciliation.log_bytes_per_run,
            wru=reconciliation.wru_per_run,
            rru_per_order=reconciliation.rru_per_order,
            wru_per_order=reconciliation.wru_per_order,
        )
    }
    results = {
        name: summary.figures(
            name, at_latency[name], at_zero[name], cold[name], memory_mb, billed[name], reconcilers.get(name)
        )
        for name in CONSUMERS
    }
    by_latency = {latency: summary.lambda_cpu(sweep, results, latency) for latency in latencies}
    cpu_per_record = {
        name: fig.cpu_ms_per_record for name, fig in by_latency[contract_latency][memory_mb].consumers.items()
    }
    components = summary.components_per_record(shares, cpu_per_record)
    checks = summary.targets(results, by_latency[contract_latency], memory_mb)
    _, recommendation = summary.recommend_memory(by_latency[contract_latency], memory_mb)
    calls_check = summary.calls_agreement(results, by_latency[contract_latency])
    info = report.RunInfo(
        command="make bench-quick" if args.quick else "make bench",
        date=dt.date.today().isoformat(),
        latency_ms=args.latency_ms,
        batches=batches,
        zero_latency_batches=zero_batches,
        import_samples=import_samples,
        memory_mb=memory_mb,
        memory_source=memory_source,
        stand_in=stand_in_note(stand_in.transact_fix),
        versions={
            "python": sys.version.split()[0],
            **{
                package: importlib.metadata.version(package)
                for package in ("boto3", "botocore", "moto", "aws-lambda-powertools")
            },
        },
        cpus=os.cpu_count() or 0,
        load=f"{load_before} at the start, {_load()} at the end",
        elapsed_s=time.perf_counter() - started,
        machine=_machine(),
        capped=sweep.capped,
        cap_note=sweep.cap_note,
        rounds=rounds,
        latency_ms_list=latencies,
        recommendation=recommendation,
        calls_check=calls_check,
        reconciler=(
            f"The reconciler (every {deployed['reconciler']['every_s'] // 60} minutes at "
            f"{reconciler_memory} MB, as the default template says), measured on an index with nothing new over "
            f"{reconciliation.runs} run(s): "
            + " + ".join(f"{op} x{count:g}" for op, count in reconciliation.calls_per_run.items())
            + f", {reconciliation.rru_per_run:g} RRU, {reconciliation.wru_per_run:g} WRU (the checkpoints), "
            f"{reconciliation.log_bytes_per_run:.0f} log bytes and "
            f"{reconciliation.run_ms:.0f} ms per run ({reconciliation.cpu_ms:.0f} ms of it CPU, stretched by "
            f"its CPU share to {reconciler_ms:.0f} ms billed); plus, per order, what a run reading sent "
            f"orders' entries adds: {reconciliation.rru_per_order:g} RRU, {reconciliation.wru_per_order:g} WRU "
            "(its index entry and its status, read once behind the checkpoints; TTL deletes it free)."
        ),
        fixed_monthly_usd=fixed_monthly(deployed),
    )
    report.print_report(info, results, checks, by_latency, components, console)
    contract = report.contract_json(
        args.latency_ms,
        results,
        default_memory_mb=memory_mb,
        lambda_cpu=by_latency[contract_latency],
        fixed_monthly_usd=fixed_monthly(deployed),
    )
    if out is not None:
        report.write_json(out, contract)
        detail = report.details_json(info, results, checks, report.sweep_json(sweep, by_latency, components))
        report.write_json(out.with_name(out.stem + "-detail.json"), detail)
        say(f"wrote {out} and {out.with_name(out.stem + '-detail.json')}")
    if chart_path is not None:
        at_contract = by_latency[contract_latency]
        sizes = sorted(at_contract)
        names = [n for n in summary.LAMBDA_CPU_CONSUMERS if all(n in at_contract[m].consumers for m in sizes)]
        chart.draw(
            chart_path,
            memory_sizes=sizes,
            batch_ms={n: [at_contract[m].consumers[n].batch10_ms for m in sizes] for n in names},
            usd_per_million={n: [at_contract[m].consumers[n].usd_per_million for m in sizes] for n in names},
            default_memory_mb=memory_mb,
            title=f"Batch of 10 new orders at {contract_latency:g} ms per AWS call, by Lambda memory "
            f"({'CPU capped by cgroup' if sweep.capped else 'UNCAPPED'})",
            subtitle=f"{info.command}, {info.date}; {info.cpus} shared CPUs, load average {info.load}",
        )
        say(f"drew {chart_path}")
    if page is not None:
        report.write_page(page, report.markdown(info, results, checks, by_latency, components))
        say(f"wrote {page}")
    if readme is not None:
        report.update_headline(readme, report.headline(contract))
        say(f"updated the headline figures of {readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
