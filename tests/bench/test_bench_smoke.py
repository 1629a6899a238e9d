"""The bench runs end to end with tiny numbers and writes results in the contract's shape.

Speed is never asserted here (the machine is shared); only that the run works, the JSON has issue 7's
shape, and the counts the stand-in meters are the ones each consumer's algorithm implies.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.__main__ import main

CONTRACT_FIELDS = {
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
LATENCY_MS = 2
# (calls first, calls redelivery, WRU first, RRU first, RRU redelivery), from each algorithm:
EXPECTED = {
    # put + publish, every time
    "naive": (2, 2, 1, 0, 0),
    # transaction (2 items x 2) + publish + update (1); again: cancelled transaction + eventually consistent get
    "seed": (3, 2, 5, 0, 0.5),
    # put in-progress + put order + publish + update; again: the failed conditional put
    "powertools": (4, 1, 3, 0, 0),
    # transaction + publish + update; again: the cancelled transaction alone
    "ours": (3, 1, 5, 0, 0),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One tiny run: a batch per consumer at 2 ms/call and one at 0 ms, one import sample."""
    directory = tmp_path_factory.mktemp("bench")
    readme = directory / "README.md"
    readme.write_text("# Top\n\nintro\n", encoding="utf-8")
    out = directory / "results.json"
    # WHEN the bench runs with tiny numbers
    status = main(
        [
            "--quick",
            "--latency-ms",
            str(LATENCY_MS),
            "--batches",
            "1",
            "--zero-latency-batches",
            "1",
            "--import-samples",
            "1",
            "--out",
            str(out),
            "--readme",
            str(readme),
        ]
    )
    assert status == 0
    return {
        "results": json.loads(out.read_text(encoding="utf-8")),
        "details": json.loads((directory / "results-detail.json").read_text(encoding="utf-8")),
        "readme": readme.read_text(encoding="utf-8"),
    }


def test_results_have_exactly_the_contract_shape(run: dict[str, Any]) -> None:
    results = run["results"]
    assert set(results) == {"latency_ms_per_call", "consumers"}
    assert results["latency_ms_per_call"] == LATENCY_MS
    assert list(results["consumers"]) == ["naive", "seed", "powertools", "ours"]
    for name, figures in results["consumers"].items():
        assert set(figures) == CONTRACT_FIELDS, name
        assert all(isinstance(value, int | float) and not isinstance(value, bool) for value in figures.values())
        assert isinstance(figures["duplicate_rows"], int), name


@pytest.mark.parametrize("name", list(EXPECTED))
def test_calls_and_units_match_each_algorithm(run: dict[str, Any], name: str) -> None:
    figures = run["results"]["consumers"][name]
    details = run["details"]["consumers"][name]
    calls_first, calls_again, wru, rru, rru_again = EXPECTED[name]
    assert figures["calls_per_msg_first"] == calls_first
    assert figures["calls_per_msg_redelivery"] == calls_again
    assert figures["wru_per_msg"] == wru
    assert figures["rru_per_msg"] == rru
    assert details["rru_per_msg_redelivery"] == rru_again
    assert details["publishes_per_msg_first"] == 1


def test_only_naive_duplicates_rows_and_notifications(run: dict[str, Any]) -> None:
    consumers, details = run["results"]["consumers"], run["details"]["consumers"]
    # GIVEN every message was delivered twice: 2 batches of 10 per consumer
    assert consumers["naive"]["duplicate_rows"] == details["naive"]["redelivered_messages"] == 20
    assert details["naive"]["publishes_per_msg_redelivery"] == 1
    for name in ("seed", "powertools", "ours"):
        assert consumers[name]["duplicate_rows"] == 0, name
        assert details[name]["publishes_per_msg_redelivery"] == 0, name


def test_values_are_sane(run: dict[str, Any]) -> None:
    for name, figures in run["results"]["consumers"].items():
        assert figures["batch10_ms"] > 0, name
        # one batch of 10, scaled to 1,000 messages
        assert figures["per_1000_ms"] == pytest.approx(figures["batch10_ms"] * 100, rel=0.01), name
        assert figures["cold_import_ms"] > 0, name
        # at least the DynamoDB writes and the notification, at list prices
        assert figures["usd_per_million"] > figures["wru_per_msg"] * 0.625 + 0.5, name
    # the injected latency is on the clock: seed makes 30 calls one after the other
    assert run["results"]["consumers"]["seed"]["batch10_ms"] >= 30 * LATENCY_MS


def test_details_state_prices_stand_in_and_targets(run: dict[str, Any]) -> None:
    details = run["details"]
    assert details["prices"]["checked"]
    assert details["prices"]["region"] == "us-east-1"
    assert "fresh tables per measured batch" in details["run"]["stand_in"]
    assert details["run"]["lambda_memory_mb"] > 0
    assert [t["target"].split(":")[0] for t in details["targets"]] == [
        "batch of 10",
        "batch of 10",
        "redelivery of a processed message",
        "USD per million orders",
        "cold import",
    ]
    for figures in details["consumers"].values():
        assert figures["moto_ms_per_call"]["median"] > 0


def test_readme_gets_the_section_with_the_command(run: dict[str, Any]) -> None:
    readme = run["readme"]
    assert readme.startswith("# Top\n\nintro\n\n## Performance\n")
    assert "make bench" in readme
    assert "| **ours** |" in readme
