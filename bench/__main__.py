"""``python -m bench [--quick]``: run the benchmark, print the table, write the results.

``make bench`` runs the full benchmark and writes ``bench/results.json`` (the issue's shape),
``bench/results-detail.json`` and the README's "Performance" section. ``make bench-quick`` runs fewer
batches and import samples and writes nothing unless asked (``--out``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import random
import sys
import time
from pathlib import Path

from rich.console import Console

from bench import coldstart, report, summary
from bench.orders import OrderSource
from bench.run import CONSUMERS, REPO_ROOT, StandIn, construct_memory_mb, measure, stand_in_note, warm_up

FULL = {"batches": 100, "zero_latency_batches": 100, "import_samples": 25}
QUICK = {"batches": 8, "zero_latency_batches": 4, "import_samples": 5}


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches and samples (under a minute)")
    parser.add_argument("--latency-ms", type=float, default=5.0, help="network round trip per AWS call (default 5)")
    parser.add_argument("--batches", type=int, help="batches of 10 per consumer at the latency (full 100, quick 8)")
    parser.add_argument("--zero-latency-batches", type=int, help="batches of 10 at 0 ms (full 100, quick 4)")
    parser.add_argument("--import-samples", type=int, help="fresh interpreters per cold import (full 25, quick 5)")
    parser.add_argument("--out", type=Path, help="results JSON (default: bench/results.json, none with --quick)")
    parser.add_argument("--readme", type=Path, help="README to update (default: README.md, none with --quick)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated orders")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    preset = QUICK if args.quick else FULL
    batches = args.batches or preset["batches"]
    zero_batches = args.zero_latency_batches or preset["zero_latency_batches"]
    import_samples = args.import_samples or preset["import_samples"]
    out = args.out or (None if args.quick else REPO_ROOT / "bench" / "results.json")
    readme = args.readme or (None if args.quick else REPO_ROOT / "README.md")
    # Logs of the handlers go to a sink while they run; the report goes to the real stdout, wide
    # enough for the table when it is not a terminal (make's output, CI logs).
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 220)
    status = Console(file=sys.stderr, highlight=False)

    def progress(latency_ms: float, done: int, total: int) -> None:
        text = (
            f"{latency_ms:g} ms/call: {done}/{total} batches of 10 through each consumer "
            f"({time.perf_counter() - started:.0f} s since the start)"
        )
        if status.is_terminal:
            status.print(text, end="\n" if done == total else "\r")
        elif done == total or done % 10 == 0:
            status.print(text)

    started = time.perf_counter()
    load_before = " ".join(f"{v:.1f}" for v in os.getloadavg())

    stand_in = StandIn()
    source, rng = OrderSource(args.seed), random.Random(args.seed)  # noqa: S311 - test data
    try:
        phase = time.perf_counter()
        modules = {name: consumer.import_module for name, consumer in stand_in.consumers.items()}
        roots = [REPO_ROOT / "lambdas", REPO_ROOT]
        cold: dict[str, list[coldstart.ImportTime]] = {name: [] for name in CONSUMERS}
        for _ in range(import_samples):  # interleaved, so that a busy moment hits every consumer alike
            for name in CONSUMERS:
                cold[name] += coldstart.import_times(modules[name], roots, samples=1)
        phase_s = time.perf_counter() - phase
        status.print(f"cold import: {import_samples} fresh interpreters per consumer ({phase_s:.0f} s)")
        warm_up(stand_in, source, rng)
        at_latency = measure(
            stand_in, latency_ms=args.latency_ms, batches=batches, source=source, rng=rng, progress=progress
        )
        at_zero = measure(stand_in, latency_ms=0, batches=zero_batches, source=source, rng=rng, progress=progress)
    finally:
        stand_in.close()

    memory_mb, memory_source = construct_memory_mb()
    results = {
        name: summary.figures(name, at_latency[name], at_zero[name], cold[name], memory_mb) for name in CONSUMERS
    }
    checks = summary.targets(results)
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
        load=f"{load_before} at the start, {' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end",
        elapsed_s=time.perf_counter() - started,
    )
    report.print_report(info, results, checks, console)
    if out is not None:
        report.write_json(out, report.contract_json(args.latency_ms, results))
        report.write_json(out.with_name(out.stem + "-detail.json"), report.details_json(info, results, checks))
        status.print(f"wrote {out} and {out.with_name(out.stem + '-detail.json')}")
    if readme is not None:
        report.update_readme(readme, report.markdown(info, results, checks))
        status.print(f"updated the {report.README_HEADING!r} section of {readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
