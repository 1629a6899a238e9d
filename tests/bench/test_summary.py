"""The sweep's reading: the memory recommendation and the moto-versus-HTTP call check."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bench.summary import MemoryFigures, SettingFigures, calls_agreement, recommend_memory


def _sweep(ms: dict[int, float], usd: dict[int, float], calls: float = 12) -> dict[int, MemoryFigures]:
    return {
        memory: MemoryFigures(
            memory_mb=memory,
            latency_ms=5,
            cpu_share=memory / 1769,
            capped=True,
            consumers={
                "ours": SettingFigures(
                    batch10_ms=ms[memory],
                    batch10_p90_ms=ms[memory] * 1.1,
                    cpu_ms_per_record=3.2,
                    usd_per_million=usd[memory],
                    calls_per_batch=calls,
                )
            },
        )
        for memory in ms
    }


def test_recommends_the_smallest_size_within_ten_percent_of_the_fastest() -> None:
    # GIVEN a CPU-bound batch: faster up to one vCPU, no faster beyond it
    sweep = _sweep(
        ms={128: 450, 512: 119, 1024: 62, 1769: 40, 3008: 39},
        usd={128: 3.24, 512: 3.28, 1024: 3.29, 1769: 3.30, 3008: 3.33},
    )
    chosen, why = recommend_memory(sweep, default_memory_mb=1769)
    # THEN 1,769 MB is chosen (3,008 MB is only 2.5 % faster), and the words give the figures
    assert chosen == 1769
    assert "default is 1769 MB" in why
    assert "119 ms at 512 MB" in why
    assert "40 ms at 1,769 MB" in why
    assert "3.0x faster for +0.020 USD per million orders" in why


def test_a_flat_curve_recommends_the_smallest_size() -> None:
    sweep = _sweep(ms={128: 160, 512: 155, 1769: 150}, usd={128: 3.0, 512: 3.1, 1769: 3.5})
    assert recommend_memory(sweep, default_memory_mb=512)[0] == 128


def _moto(calls: float) -> Any:
    return SimpleNamespace(calls_per_batch_first=calls)


def test_calls_agree_when_moto_and_the_http_stand_in_counted_the_same() -> None:
    text = calls_agreement({"ours": _moto(12)}, _sweep({512: 1}, {512: 1}, calls=12))
    assert text.startswith("The HTTP stand-in saw the calls")
    assert "ours 12" in text


def test_calls_that_differ_are_named() -> None:
    text = calls_agreement({"ours": _moto(12)}, _sweep({512: 1}, {512: 1}, calls=30))
    assert text.startswith("Calls per batch DIFFER")
    assert "ours moto 12, HTTP [30]" in text
