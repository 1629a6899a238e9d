"""The memory sweep as a chart: batch latency and USD per million orders against memory size.

Two panels side by side, one line per consumer, memory on a log axis with a tick per swept size;
the construct's default memory is marked. Drawn with matplotlib's non-interactive Agg backend, so
no display is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

#: Line colour and marker per consumer (ours drawn last and thickest).
STYLES = {
    "naive": ("#9e9e9e", "x"),
    "seed": ("#1f77b4", "o"),
    "powertools": ("#ff7f0e", "s"),
    "ours": ("#2ca02c", "D"),
}


def draw(
    path: Path,
    *,
    memory_sizes: Sequence[int],
    batch_ms: Mapping[str, Sequence[float]],
    usd_per_million: Mapping[str, Sequence[float]],
    default_memory_mb: int,
    title: str,
    subtitle: str,
) -> None:
    """Write the PNG: per consumer, ``batch_ms[name][i]`` and ``usd_per_million[name][i]`` at ``memory_sizes[i]``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, NullLocator, ScalarFormatter

    figure, (latency_axes, cost_axes) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=100)
    for axes, values, label in (
        (latency_axes, batch_ms, "batch of 10 new orders, median (ms)"),
        (cost_axes, usd_per_million, "USD per million orders"),
    ):
        for name, series in values.items():
            colour, marker = STYLES.get(name, ("#000000", "."))
            axes.plot(
                memory_sizes,
                series,
                label=name,
                color=colour,
                marker=marker,
                linewidth=2.6 if name == "ours" else 1.5,
            )
        axes.set_xscale("log")
        axes.xaxis.set_major_locator(FixedLocator(list(memory_sizes)))
        axes.xaxis.set_minor_locator(NullLocator())
        axes.set_xticklabels([str(m) for m in memory_sizes])
        axes.set_xlabel("Lambda memory (MB); CPU share = memory / 1769 MB of one core")
        axes.set_ylabel(label)
        axes.axvline(default_memory_mb, color="#555555", linestyle=":", linewidth=1)
        axes.annotate(
            f"default {default_memory_mb} MB",
            xy=(default_memory_mb, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(-4, -12),
            textcoords="offset points",
            ha="right",
            fontsize=8,
            color="#555555",
        )
        axes.grid(True, which="major", alpha=0.3)
    latency_axes.set_yscale("log")
    latency_axes.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    latency_axes.yaxis.set_major_formatter(ScalarFormatter())
    latency_axes.yaxis.set_minor_formatter(NullFormatter())
    cost_axes.set_ylim(bottom=0)
    latency_axes.legend()
    figure.suptitle(title, fontsize=12)
    figure.text(0.5, 0.005, subtitle, ha="center", va="bottom", fontsize=8, color="#444444", wrap=True)
    figure.tight_layout(rect=(0, 0.05, 1, 0.95))
    figure.savefig(path, format="png", metadata={"Software": None})
    plt.close(figure)
