"""The run's one build of the distributions (tests.sources.shared_distributions), which the walk-through, the
installed-package tests and the release tests share: built once, by one process, from a copy of the sources,
and never left half-built."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.sources import DISTRIBUTION_SOURCES, shared_distributions

#: What the stand-in builder writes: the two files ``python -m build`` makes.
BUILT = ("example-1.0-py3-none-any.whl", "example-1.0.tar.gz")


class Builder:
    """A stand-in for ``python -m build`` that records each source it was given."""

    def __init__(self, fail: bool = False, seconds: float = 0.0) -> None:
        self.sources: list[Path] = []
        self.fail = fail
        self.seconds = seconds

    def __call__(self, source: Path, out: Path) -> None:
        self.sources.append(source)
        assert sorted(path.name for path in source.iterdir()) == sorted(DISTRIBUTION_SOURCES)
        out.mkdir()
        (out / BUILT[0]).write_text("partial")
        time.sleep(self.seconds)
        if self.fail:
            raise RuntimeError("python -m build failed")
        (out / BUILT[1]).write_text("sdist")


def test_the_first_caller_builds_from_a_copy_of_the_sources_and_later_callers_reuse_it(tmp_path: Path) -> None:
    # GIVEN a run's shared directory and a builder
    builder = Builder()
    # WHEN two tests ask for the distributions
    first = shared_distributions(tmp_path, build=builder)
    second = shared_distributions(tmp_path, build=builder)
    # THEN one build ran, from a copy of the distribution's sources outside this checkout
    assert len(builder.sources) == 1
    assert not builder.sources[0].is_relative_to(Path(__file__).resolve().parents[1])
    # AND both got the same directory, holding what the build wrote and nothing else
    assert first == second
    assert sorted(path.name for path in first.iterdir()) == sorted(BUILT)
    # AND the copy of the sources is gone: only the distributions and the lock remain
    assert sorted(path.name for path in tmp_path.iterdir()) == ["distributions", "distributions.lock"]


def test_concurrent_callers_wait_for_the_one_build_and_see_it_complete(tmp_path: Path) -> None:
    # GIVEN a build that takes a while, and four callers at once (as pytest-xdist's workers may be)
    builder = Builder(seconds=0.3)
    seen: list[list[str]] = []

    def ask() -> None:
        seen.append(sorted(path.name for path in shared_distributions(tmp_path, build=builder).iterdir()))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    # WHEN they all ask
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # THEN one build ran, and every caller saw both files: none saw the build half-done
    assert len(builder.sources) == 1
    assert seen == [sorted(BUILT)] * 4


def test_a_failed_build_leaves_nothing_and_the_next_caller_builds_again(tmp_path: Path) -> None:
    # GIVEN a build that fails after writing part of its output
    with pytest.raises(RuntimeError, match="python -m build failed"):
        shared_distributions(tmp_path, build=Builder(fail=True))
    # THEN nothing of it is left for another caller to take as the distributions
    assert sorted(path.name for path in tmp_path.iterdir()) == ["distributions.lock"]
    # WHEN the next caller asks
    builder = Builder()
    built = shared_distributions(tmp_path, build=builder)
    # THEN it builds, and gets the complete distributions
    assert len(builder.sources) == 1
    assert sorted(path.name for path in built.iterdir()) == sorted(BUILT)
