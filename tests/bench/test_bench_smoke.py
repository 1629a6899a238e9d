"""The bench runs end to end with tiny numbers and writes results, chart, page and README figures, in shape.

Speed is never asserted here (the machine is shared); only that the run works, the JSON has the
results contract's shape (today's keys, then the added ones), and the counts each peer's algorithm
implies. The product consumer is a black box whose calls change with its version: for it, the moto
counts must equal what the HTTP stand-in saw, and a redelivery must cost one call per record. The
run is a subprocess, as ``make bench`` is: a fresh interpreter, whose product handler no other test
has configured.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.prices import PRICES, OrderCost
from bench.report import headline
from bench.summary import MAX_USD_RATIO_SEED

# Runs the benchmark end to end in a subprocess.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
TODAY_FIELDS = {
    "batch10_ms",
    "per_1000_ms",
    "calls_per_msg_first",
    "calls_per_msg_redelivery",
    "wru_per_msg",
    "rru_per_msg",
    "usd_per_million",
    "cold_import_ms",
    "duplicate_rows",
}
#: The cost fields added to each consumer: the index writes apart, and every cost line.
COST_FIELDS = {"index_wru_per_msg", "usd_breakdown"}
#: Import plus clients, the figure issue 21's cold-start target compares (the README shows it).
COLD_START_FIELDS = {"cold_start_ms"}
LAMBDA_CPU_FIELDS = {"batch10_ms", "batch10_p90_ms", "cpu_ms_per_record", "usd_per_million"}
MEMORY_SIZES = (512,)
# (calls first, calls redelivery, WRU first, RRU first, RRU redelivery, SNS requests), from each peer's algorithm:
EXPECTED = {
    # put + publish, every time
    "naive": (2, 2, 1, 0, 0, 1),
    # transaction (2 items x 2) + publish + update (1); again: cancelled transaction + eventually consistent get
    "seed": (3, 2, 5, 0, 0.5, 1),
    # put in-progress + put order + publish + update; again: the failed conditional put
    "powertools": (4, 1, 3, 0, 0, 1),
}


def _default_memory() -> int:
    from idempotent_order_pipeline.construct import IdempotentOrderPipeline

    default: int = inspect.signature(IdempotentOrderPipeline.__init__).parameters["memory_size"].default
    return default


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One tiny run: one batch per consumer and setting, 512 MB and the default memory, 5 ms/call."""
    directory = tmp_path_factory.mktemp("bench")
    readme = directory / "README.md"
    readme.write_text("# Top\n\nintro\n", encoding="utf-8")
    out, chart, page = directory / "results.json", directory / "sweep.png", directory / "performance.md"
    command = [sys.executable, "-m", "bench", "--quick", "--batches", "1", "--zero-latency-batches", "1"]
    command += ["--import-samples", "1", "--rounds", "1", "--profile-batches", "1", "--capped-latency-ms", "5"]
    command += [arg for size in MEMORY_SIZES for arg in ("--memory", str(size))]
    command += ["--out", str(out), "--page", str(page), "--readme", str(readme), "--chart", str(chart)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(REPO_ROOT / p) for p in ("", "lambdas", "infra"))}
    # WHEN the bench runs with tiny numbers, as make bench runs it
    completed = subprocess.run(  # noqa: S603 - our own interpreter and module
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return {
        "results": json.loads(out.read_text(encoding="utf-8")),
        "details": json.loads((directory / "results-detail.json").read_text(encoding="utf-8")),
        "page": page.read_text(encoding="utf-8"),
        "readme": readme.read_text(encoding="utf-8"),
        "chart": chart.read_bytes(),
        "stdout": completed.stdout,
    }


def test_results_keep_todays_keys_and_add_exactly_the_new_ones(run: dict[str, Any]) -> None:
    results = run["results"]
    assert list(results) == [
        "latency_ms_per_call",
        "consumers",
        "default_memory_mb",
        "lambda_cpu",
        "ours_calls_per_batch_of_10_new",
        "fixed_monthly_usd",
        "cost_assumptions",
    ]
    assert results["latency_ms_per_call"] == 5
    assert list(results["consumers"]) == ["naive", "seed", "powertools", "ours"]
    for name, figures in results["consumers"].items():
        assert set(figures) == TODAY_FIELDS | COST_FIELDS | COLD_START_FIELDS, name
        numbers = [value for key, value in figures.items() if key != "usd_breakdown"]
        assert all(isinstance(value, int | float) and not isinstance(value, bool) for value in numbers)
        assert isinstance(figures["duplicate_rows"], int), name


@pytest.mark.parametrize("name", ["naive", "seed", "powertools", "ours"])
def test_usd_per_million_is_the_sum_of_its_breakdown(run: dict[str, Any], name: str) -> None:
    # GIVEN a consumer's cost line items in results.json
    figures = run["results"]["consumers"][name]
    breakdown = figures["usd_breakdown"]
    # THEN they are the same lines for every consumer, and they add up to usd_per_million
    assert list(breakdown) == list(OrderCost.__dataclass_fields__)
    assert round(sum(breakdown.values()), 4) == figures["usd_per_million"]


def test_every_cost_is_billed_by_the_same_rules(run: dict[str, Any]) -> None:
    consumers, details = run["results"]["consumers"], run["details"]["consumers"]
    for name, figures in consumers.items():
        breakdown = figures["usd_breakdown"]
        # THEN the index line is the metered index writes, the logs line the bytes written, for everyone
        assert breakdown["dynamodb_index_writes"] == pytest.approx(
            figures["index_wru_per_msg"] * PRICES.dynamodb_per_million_wru, abs=1e-4
        ), name
        assert breakdown["cloudwatch_logs"] == pytest.approx(
            details[name]["log_bytes_per_msg"] * 1e6 / 1e9 * PRICES.cloudwatch_logs_per_gb_ingested, abs=2e-4
        ), name
        # THEN what every SQS consumer pays alike is the same, and INIT is billed from the cold start
        assert breakdown["sqs_producer_sends"] == consumers["ours"]["usd_breakdown"]["sqs_producer_sends"] > 0
        assert breakdown["sqs_receives_and_deletes"] == consumers["ours"]["usd_breakdown"]["sqs_receives_and_deletes"]
        assert breakdown["lambda_init"] > 0, name
    # THEN the peers have no index and no reconciler; ours has both (its pending index is deployed)
    for name in ("naive", "seed", "powertools"):
        assert consumers[name]["index_wru_per_msg"] == 0, name
        assert consumers[name]["usd_breakdown"]["reconciler"] == 0, name
    assert consumers["ours"]["usd_breakdown"]["reconciler"] > 0


def test_fixed_monthly_costs_are_listed_apart(run: dict[str, Any]) -> None:
    fixed = run["results"]["fixed_monthly_usd"]
    # THEN alarms, dashboard and custom metrics are listed with their total, not in usd_per_million
    assert set(fixed) == {"alarm_metrics", "dashboards", "custom_metrics", "total"}
    assert fixed["total"] == pytest.approx(fixed["alarm_metrics"] + fixed["dashboards"] + fixed["custom_metrics"])
    assert fixed["alarm_metrics"] > 0
    assert run["results"]["cost_assumptions"]["cold_start_rate"] > 0


def test_lambda_cpu_has_one_entry_per_swept_memory_size_and_the_default(run: dict[str, Any]) -> None:
    results = run["results"]
    default = results["default_memory_mb"]
    # THEN every swept size and the default are keys (strings), in ascending order
    assert list(results["lambda_cpu"]) == [str(m) for m in sorted({*MEMORY_SIZES, default})]
    for memory, entry in results["lambda_cpu"].items():
        assert set(entry) == {"cpu_share", "capped", "latency_ms_per_call", "consumers"}, memory
        assert entry["cpu_share"] == round(int(memory) / 1769, 3)
        assert isinstance(entry["capped"], bool)
        assert entry["latency_ms_per_call"] == 5
        assert list(entry["consumers"]) == ["seed", "powertools", "ours"]
        for name, figures in entry["consumers"].items():
            assert set(figures) == LAMBDA_CPU_FIELDS, (memory, name)
            assert 0 < figures["batch10_ms"] <= figures["batch10_p90_ms"], (memory, name)
            assert figures["cpu_ms_per_record"] > 0, (memory, name)
            assert figures["usd_per_million"] > 0, (memory, name)


def test_default_memory_comes_from_the_construct(run: dict[str, Any]) -> None:
    assert run["results"]["default_memory_mb"] == _default_memory()


def test_usd_bills_the_capped_batch_at_the_default_memory(run: dict[str, Any]) -> None:
    results = run["results"]
    at_default = results["lambda_cpu"][str(results["default_memory_mb"])]["consumers"]
    for name in ("seed", "powertools", "ours"):
        assert results["consumers"][name]["usd_per_million"] == at_default[name]["usd_per_million"], name
        detail = run["details"]["consumers"][name]
        assert detail["usd_billed_batch_ms"] == at_default[name]["batch10_ms"], name


def test_the_capped_run_says_whether_it_was_capped(run: dict[str, Any]) -> None:
    sweep = run["details"]["lambda_cpu_sweep"]
    capped = run["results"]["lambda_cpu"]["512"]["capped"]
    assert sweep["capped"] is capped
    if capped:
        # THEN the kernel held the quota of each size's share (512 MB: 28.9 % of a core per 10 ms)
        assert sweep["quotas_applied"]["512"] == {"quota_us": 2894, "period_us": 10_000, "share_of_one_core": 0.2894}
        default = str(run["results"]["default_memory_mb"])
        assert sweep["quotas_applied"][default]["share_of_one_core"] == pytest.approx(
            min(1.0, int(default) / 1769), abs=0.001
        )
        assert "cgroup v" in sweep["caps"]
    else:
        assert "NOT capped" in run["page"]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_calls_and_units_match_each_peers_algorithm(run: dict[str, Any], name: str) -> None:
    figures = run["results"]["consumers"][name]
    details = run["details"]["consumers"][name]
    calls_first, calls_again, wru, rru, rru_again, sns_requests = EXPECTED[name]
    assert figures["calls_per_msg_first"] == calls_first
    assert figures["calls_per_msg_redelivery"] == calls_again
    assert figures["wru_per_msg"] == wru
    assert figures["rru_per_msg"] == rru
    assert details["rru_per_msg_redelivery"] == rru_again
    assert details["sns_billed_requests_per_msg"] == sns_requests
    assert details["publishes_per_msg_first"] == 1


def test_ours_calls_agree_between_moto_and_the_http_stand_in(run: dict[str, Any]) -> None:
    results, details = run["results"], run["details"]
    calls = results["ours_calls_per_batch_of_10_new"]
    assert calls == results["consumers"]["ours"]["calls_per_msg_first"] * 10
    for memory in results["lambda_cpu"]:
        seen = details["lambda_cpu_sweep"]["by_latency_ms"]["5"][memory]["calls_per_batch_seen_by_http_stand_in"]
        assert seen["ours"] == calls, memory
        for name, (calls_first, *_rest) in EXPECTED.items():
            assert seen[name] == calls_first * 10, (memory, name)
    # THEN a batch of 10 duplicates costs one call (one transaction, cancelled: each record's reasons say
    # it exists), and every new order is notified once
    assert results["consumers"]["ours"]["calls_per_msg_redelivery"] == 0.1
    assert details["consumers"]["ours"]["publishes_per_msg_first"] == 1


def test_only_naive_duplicates_rows_and_notifications(run: dict[str, Any]) -> None:
    consumers, details = run["results"]["consumers"], run["details"]["consumers"]
    # GIVEN every message was delivered twice: 2 batches of 10 per consumer
    assert consumers["naive"]["duplicate_rows"] == details["naive"]["redelivered_messages"] == 20
    assert details["naive"]["publishes_per_msg_redelivery"] == 1
    for name in ("seed", "powertools", "ours"):
        assert consumers[name]["duplicate_rows"] == 0, name
        assert details[name]["publishes_per_msg_redelivery"] == 0, name


def test_cpu_is_broken_down_by_component(run: dict[str, Any]) -> None:
    components = run["details"]["lambda_cpu_sweep"]["cpu_ms_per_record_by_component"]
    assert set(components) == {"naive", "seed", "powertools", "ours"}
    at_default = run["results"]["lambda_cpu"][str(run["results"]["default_memory_mb"])]["consumers"]
    for name in ("seed", "powertools", "ours"):
        # THEN the components add up to the measured CPU per record, botocore's HTTP stack among them
        assert sum(components[name].values()) == pytest.approx(at_default[name]["cpu_ms_per_record"], rel=0.02)
        assert components[name]["HTTP (urllib3, http.client)"] > 0
        assert components[name]["signing"] > 0
    assert components["powertools"]["Powertools"] > 0


def test_cold_start_is_import_plus_clients(run: dict[str, Any]) -> None:
    for name, details in run["details"]["consumers"].items():
        assert details["cold_start_ms"] >= details["cold_import_ms"] > 0, name


def test_targets_are_the_performance_goals_in_order(run: dict[str, Any]) -> None:
    names = [t["target"] for t in run["details"]["targets"]]
    assert [n.split(":")[0] for n in names] == [
        f"batch of 10 at the default memory ({_default_memory()} MB)",
        f"batch of 10 at the default memory ({_default_memory()} MB)",
        "batch of 10 at 512 MB",
        "CPU per record",
        "calls per batch of 10 new orders",
        "batch of 10 duplicates",
        "USD per million orders at the default memory",
        "cold start (import + clients)",
    ]


def test_the_targets_compare_cost_at_1_00_and_cold_start_at_0_80(run: dict[str, Any]) -> None:
    # GIVEN the run's targets and the figures they compare
    targets = {t["target"].split(":")[0]: t for t in run["details"]["targets"]}
    consumers, details = run["results"]["consumers"], run["details"]["consumers"]
    usd, start = targets["USD per million orders at the default memory"], targets["cold start (import + clients)"]
    # THEN cost is ours against 1.00x the seed's (issue 32), every line counted, and the detail states the floor
    assert f"ours <= {MAX_USD_RATIO_SEED:.2f}x seed" in usd["target"]
    assert MAX_USD_RATIO_SEED == 1.00
    assert usd["met"] == (consumers["ours"]["usd_per_million"] <= 1.00 * consumers["seed"]["usd_per_million"])
    assert "for any consumer" in usd["detail"]
    # AND cold start is import plus clients against 0.80x the Powertools consumer's
    assert "ours <= 0.80x powertools" in start["target"]
    assert start["met"] == (details["ours"]["cold_start_ms"] <= 0.80 * details["powertools"]["cold_start_ms"])
    assert consumers["ours"]["cold_start_ms"] == details["ours"]["cold_start_ms"]


def test_page_states_machine_load_caps_and_shows_the_chart(run: dict[str, Any], tmp_path: Path) -> None:
    # GIVEN the performance page the tiny run wrote
    page = run["page"]
    # THEN it is the whole page: how it was run, on what, capped or not, the chart beside it, the tables
    assert page.startswith("# Performance\n")
    assert "make bench" in page
    assert "load average" in page
    assert "Machine:" in page
    assert ("capped by cgroup" in page) or ("NOT capped" in page)
    assert "![Batch latency and USD per million orders" in page
    assert "(memory-sweep.png)" in page
    assert "| **ours** |" in page
    # THEN it shows every cost line for every consumer, and the fixed monthly cost apart
    assert "| USD per million orders | naive | seed | powertools | ours |" in page
    assert "| dynamodb index writes |" in page
    assert "Fixed per month" in page
    # THEN the chart is a PNG
    assert run["chart"].startswith(b"\x89PNG\r\n\x1a\n")


def test_readme_gets_the_headline_figures_of_the_results_it_wrote(run: dict[str, Any]) -> None:
    # GIVEN the README the tiny run updated, and the results.json it wrote
    # THEN the README holds exactly the headline block recomputed from that results.json
    assert run["readme"] == "# Top\n\nintro\n\n" + headline(run["results"])
