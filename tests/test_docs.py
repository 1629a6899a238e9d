"""The README is a front door and the docs pages hold the depth, each rule in one place.

The README stays short, links every page of ``docs/``, shares no passage with any of them (a copy
drifts), and its headline figures are the ones ``bench/results.json`` holds. Every relative link of
the README and the pages points at a file that exists.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.report import headline

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
#: "At most about 200 lines": the front door, not the manual.
MAX_README_LINES = 220
#: This many identical non-blank lines in a row, in the README and a page, is a copied passage.
COPIED_RUN = 4
LINK = re.compile(r"\]\(([^)\s]+)\)")


def non_blank_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def shared_runs(first: list[str], second: list[str], length: int) -> list[tuple[str, ...]]:
    """Every run of ``length`` consecutive lines of ``first`` that also occurs in ``second``."""
    runs = {tuple(second[i : i + length]) for i in range(len(second) - length + 1)}
    windows = [tuple(first[i : i + length]) for i in range(len(first) - length + 1)]
    return [window for window in windows if window in runs]


def test_readme_is_a_front_door() -> None:
    # GIVEN the README
    lines = README.read_text(encoding="utf-8").splitlines()
    # THEN it is short, and the two commands come first, in this order
    assert len(lines) <= MAX_README_LINES, len(lines)
    first_block = README.read_text(encoding="utf-8").split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in first_block.splitlines() if line.startswith("make")] == [
        ["make", "demo"],
        ["make", "test"],
    ]


def test_readme_links_every_docs_page() -> None:
    # GIVEN the README's links
    links = {link.split("#", 1)[0] for link in LINK.findall(README.read_text(encoding="utf-8"))}
    # THEN every page of docs/ is among them
    assert PAGES
    missing = [f"docs/{page.name}" for page in PAGES if f"docs/{page.name}" not in links]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_readme_copies_no_passage_of_a_page(page: Path) -> None:
    # GIVEN the README and one page, as non-blank lines
    # WHEN runs of consecutive identical lines are looked for in both
    copied = shared_runs(non_blank_lines(README), non_blank_lines(page), COPIED_RUN)
    # THEN there is none: each passage has one home
    assert copied == [], copied[0]


def test_shared_runs_finds_a_copied_passage() -> None:
    # GIVEN two texts sharing four lines in a row, and three more elsewhere
    first = ["a", "b", "c", "d", "x", "p", "q", "r"]
    second = ["z", "a", "b", "c", "d", "y", "p", "q", "r"]
    # THEN only the run of four is a copy
    assert shared_runs(first, second, 4) == [("a", "b", "c", "d")]


@pytest.mark.parametrize("document", [README, *PAGES], ids=lambda path: path.name)
def test_relative_links_point_at_files_that_exist(document: Path) -> None:
    # GIVEN the relative links of a document (web links and anchors within it aside)
    targets = [
        link.split("#", 1)[0]
        for link in LINK.findall(document.read_text(encoding="utf-8"))
        if not re.match(r"[a-z]+:", link) and not link.startswith("#")
    ]
    # THEN each names a file or directory of the repository
    missing = [target for target in targets if not (document.parent / target).exists()]
    assert missing == []


def test_readme_headline_figures_are_the_results_of_the_benchmark() -> None:
    # GIVEN bench/results.json, as make bench wrote it
    results = json.loads((REPO / "bench" / "results.json").read_text(encoding="utf-8"))
    # WHEN the headline block is recomputed from it
    block = headline(results)
    # THEN the README holds exactly that block
    assert block in README.read_text(encoding="utf-8")


def test_readme_names_every_venv_the_first_run_creates() -> None:
    # GIVEN the Makefile's venv target: the stamps it depends on, each the stamp of one venv directory
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    venvs = dict(re.findall(r"^(\w+)_VENV := (\S+)$", makefile, flags=re.MULTILINE))
    prerequisites = re.search(r"^venv: ([^#]+)##", makefile, flags=re.MULTILINE)
    assert prerequisites is not None
    created = {".venv"} | {
        venvs[name] for name in re.findall(r"\$\((\w+)_STAMP\)", prerequisites.group(1)) if name in venvs
    }
    assert len(created) >= 3
    # WHEN the README's set-up paragraph is read
    after = README.read_text(encoding="utf-8").split("the first run creates", 1)[1]
    paragraph = " ".join(after.split("\n\n")[0].split())
    # THEN it names each of them, and no other venv
    named = set(re.findall(r"`(\.venv[\w-]*)`", paragraph))
    assert named == created, (named, created)
