"""`make mutation`: mutmut over the consumer core, under the fast consumer and reconciler tests.

mutmut 3 names a mutant after the module its file path spells, and its trampolines compare that name
with the running function's ``__module__``; the asset's modules are imported as
``idempotent_order_pipeline._lambda_asset.order_consumer...`` (pyproject's pytest pythonpath is
``infra``), so mutmut runs from a staging directory, ``.mutation/``, holding the package at its top
level, the tests, bench and pyproject.toml (whose ``[tool.mutmut]`` names the core files and the tests).

    python tools/mutation.py run [--max-children N] [--sample K --seed S] [--reuse]   # stage, run, report
    python tools/mutation.py report                                        # report the last run
    python tools/mutation.py rerun [--max-children N] NAME...              # the named mutants, under today's tests

``--sample K`` runs the first K mutants of all of them shuffled by ``random.Random(S)`` (the report says
so); ``--reuse`` keeps the staging directory, its mutants, test stats and results, and runs only the
mutants without a result (after an interrupted run). ``rerun`` copies the tests into the staging
directory again (the mutated code stays as staged) and runs the named mutants (mutmut's globs allowed):
the survivors of a run, under the tests written for them; mutmut collects the new tests' stats first.
The report lists per module killed / total, and every survivor with its diff.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / ".mutation"
PACKAGE = "idempotent_order_pipeline"
#: mutmut's exit codes (mutmut/__main__.py's status_by_exit_code) folded to the report's outcomes.
KILLED = {1, 3}
SURVIVED = {0}
TIMEOUT = {-24, 24, 36, 152, 255}
#: Not a kill of the tests: a type checker's, which make mutation does not configure.
TYPE_CHECK = {37}
NO_TESTS = {5, 33}


def _mutmut(args: list[str], python: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """mutmut, run by the test stack's interpreter with the mutation venv's packages importable."""
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    # As its console script does: under ``python -m mutmut`` the trampolines' ``import mutmut.__main__``
    # would run mutmut's main module a second time (and fail setting multiprocessing's start method).
    launcher = "import sys; from mutmut.__main__ import cli; sys.argv[0] = 'mutmut'; cli()"
    return subprocess.run(  # noqa: S603 - fixed argv
        [str(python), "-c", launcher, *args], cwd=STAGE, env=env, text=True, check=False
    )


def stage() -> None:
    """A fresh .mutation/: the package at its top level, the tests, bench, pyproject.toml."""
    shutil.rmtree(STAGE, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for source, target in ((ROOT / "infra" / PACKAGE, PACKAGE), (ROOT / "tests", "tests"), (ROOT / "bench", "bench")):
        shutil.copytree(source, STAGE / target, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", STAGE / "pyproject.toml")


def refresh_tests() -> None:
    """The staging directory's tests replaced by the repository's (the mutated package stays as staged)."""
    shutil.rmtree(STAGE / "tests")
    shutil.copytree(ROOT / "tests", STAGE / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _config() -> dict[str, list[str]]:
    config: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["mutmut"]
    return config


def _metas() -> dict[str, dict[str, int | None]]:
    """Every mutant's exit code, by the mutated file's path (relative to the staging directory)."""
    out: dict[str, dict[str, int | None]] = {}
    for path in _config()["only_mutate"]:
        meta = STAGE / "mutants" / (path + ".meta")
        if meta.exists():
            out[path] = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    return out


def _outcome(code: int | None) -> str:
    if code is None:
        return "not run"
    if code in KILLED:
        return "killed"
    if code in SURVIVED:
        return "survived"
    if code in TIMEOUT:
        return "timeout"
    if code in NO_TESTS:
        return "no tests"
    return f"exit {code}"


def report(python: Path, site: Path, sampled: set[str] | None) -> int:
    """Per module: killed, survived, timeout, no tests; then every survivor's diff. Returns the killed percentage."""
    metas = _metas()
    totals: Counter[str] = Counter()
    survivors: list[str] = []
    print(f"{'module':<60} {'killed':>7} {'survived':>8} {'timeout':>7} {'no tests':>8} {'total':>6}")
    for path, codes in metas.items():
        counts: Counter[str] = Counter()
        for name, code in codes.items():
            if sampled is not None and name not in sampled:
                continue
            outcome = _outcome(code)
            counts[outcome] += 1
            if outcome in ("survived", "no tests"):
                survivors.append(name)
        total = sum(counts.values())
        totals.update(counts)
        short = path.removeprefix(f"{PACKAGE}/_lambda_asset/")
        print(
            f"{short:<60} {counts['killed']:>7} {counts['survived']:>8} {counts['timeout']:>7}"
            f" {counts['no tests']:>8} {total:>6}"
        )
    total = sum(totals.values())
    # A timeout is a kill: the mutant made the tests run past mutmut's CPU limit (an endless loop).
    killed = totals["killed"] + totals["timeout"]
    score = 100 * killed / total if total else 0.0
    print(
        f"{'all':<60} {totals['killed']:>7} {totals['survived']:>8} {totals['timeout']:>7}"
        f" {totals['no tests']:>8} {total:>6}"
    )
    print(f"killed {killed}/{total} = {score:.1f} % (timeouts count as killed)")
    if not_run := totals["not run"]:
        print(f"{not_run} mutants not run")
    by_function: defaultdict[str, list[str]] = defaultdict(list)
    for name in survivors:
        by_function[name.partition("__mutmut_")[0]].append(name)
    for names in by_function.values():
        for name in names:
            print(f"\n--- survivor {name}")
            _mutmut(["show", name], python, site)
    return int(score)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["run", "report", "rerun"])
    parser.add_argument("names", nargs="*", help="rerun: the mutants to run again")
    parser.add_argument(
        "--python", type=Path, default=ROOT / ".venv" / "bin" / "python", help="the test stack's interpreter"
    )
    parser.add_argument("--site", type=Path, help="the mutation venv's site-packages (default: .venv-mutation's)")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--sample", type=int, help="run this many mutants, drawn at random")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument(
        "--reuse", action="store_true", help="keep .mutation/ (its mutants and test stats) from the last run"
    )
    args = parser.parse_intermixed_args()
    site = args.site or next((ROOT / ".venv-mutation" / "lib").glob("python3*/site-packages"))
    sample_file = STAGE / "sample.json"
    if args.command == "rerun":
        if not args.names or not _metas():
            parser.error("rerun needs the names of mutants of a staged run")
        refresh_tests()
        return _mutmut(["run", "--max-children", str(args.max_children), *args.names], args.python, site).returncode
    if args.command == "run":
        if not args.reuse:
            stage()
        names: list[str] = []
        sample_file.unlink(missing_ok=True)
        if args.sample:
            # Generate the mutants (a run of nothing), then draw the sample from them.
            if not _metas():
                _mutmut(["run", "--max-children", str(args.max_children), "nothing.matches*"], args.python, site)
            every = sorted(name for codes in _metas().values() for name in codes)
            # A prefix of a seeded shuffle: a uniform sample, and a smaller sample is part of a larger one.
            shuffled = random.Random(args.seed).sample(every, len(every))  # noqa: S311 - reproducible, not a secret
            names = sorted(shuffled[: args.sample])
            sample_file.write_text(json.dumps({"seed": args.seed, "of": len(every), "names": names}), "utf-8")
            if args.reuse:  # only what has no result yet
                finished = {name for codes in _metas().values() for name, code in codes.items() if code is not None}
                names = [name for name in names if name not in finished]
        if names or not args.sample:  # no names: mutmut runs every mutant
            done = _mutmut(["run", "--max-children", str(args.max_children), *names], args.python, site)
            if done.returncode:
                return done.returncode
    sampled = None
    if sample_file.exists():
        sample = json.loads(sample_file.read_text("utf-8"))
        sampled = set(sample["names"])
        print(f"sampled run: {len(sampled)} of {sample['of']} mutants, random.Random({sample['seed']})")
    report(args.python, args.site or site, sampled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
