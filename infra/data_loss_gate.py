"""The data-loss gate (``make diff``): ``order-pipeline upgrade-check`` on every stage of this repository's app.

Each stage of the app, synthesized from the working tree, is checked against the CloudFormation
snapshot of that stage *at the base the change merges into* (``BASE``, default: the merge-base of
``HEAD`` and ``main``; read with ``git show``, so refreshing the snapshots in the same change does
not silence the gate). The check is the shipped command's, run as a team runs it::

    order-pipeline upgrade-check --before <base snapshot> --after <stage template> \\
        --name prod/OrderPipeline --acknowledged infra/destructive-changes.acknowledged

(the snapshots are ``snapshot_template``'s, which the command reads as a "before"). A stage fails
where a replacement or removal can lose data (exit 1), unless a line of :data:`ACKNOWLEDGEMENTS`
acknowledges it::

    # <stack> <logical id> <reason>   (stack as cdk names it, e.g. prod/OrderPipeline; * = every stage)
    prod/OrderPipeline PipelineOrderRecordsTable1509BD64 re-keyed by id; rows copied by the 2027-01 migration

Development tool (not installed): ``python -m data_loss_gate [--base REF] [--assembly DIR]``. Exit
codes: 0 passed, 1 a stage can lose data, 2 the gate could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from idempotent_order_pipeline.sandbox.cdk_cli import cdk_cli_environment

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The committed acknowledgements of deliberate destructive changes (one reasoned line each).
ACKNOWLEDGEMENTS = REPO_ROOT / "infra" / "destructive-changes.acknowledged"
#: The snapshot of each stage of app.py (relative to the repository root).
STAGE_SNAPSHOTS: Mapping[str, str] = {
    "dev": "tests/infra/__snapshots__/test_stage_snapshots/test_snapshot_dev_stage.json",
    "prod": "tests/infra/__snapshots__/test_snapshots/test_snapshot_prod_stage.json",
}
#: Where the gate synthesizes and keeps each stage's base snapshot and report (git-ignored; emptied at every run).
WORK_DIR = REPO_ROOT / "cdk.out" / "data-loss-gate"
#: The CDK CLI pinned in package.json.
CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"
#: The shipped command, run with this interpreter (the venv that has the library and its ``ops`` extra).
UPGRADE_CHECK = (sys.executable, "-m", "idempotent_order_pipeline.cli", "upgrade-check")


class GateError(RuntimeError):
    """The gate could not run (no base, no CDK CLI, a synth that failed, a check that could not run)."""


@dataclass(frozen=True)
class StageResult:
    stack: str
    exit_code: int
    output: str


def synthesize(out_dir: Path) -> Path:
    """``cdk synth`` of the app (every stage) into ``out_dir``."""
    command = [str(CDK_CLI), "synth", "--all", "--quiet", "--no-notices", "--ci", "--output", str(out_dir)]
    completed = subprocess.run(  # noqa: S603 - the pinned CLI, arguments built here
        command, capture_output=True, text=True, env=cdk_cli_environment(os.environ), cwd=REPO_ROOT, timeout=600
    )
    if completed.returncode != 0:
        raise GateError(
            f"`cdk synth` failed (exit {completed.returncode}):\n{(completed.stdout + completed.stderr)[-3000:]}"
        )
    return out_dir


def stage_stacks(assembly: Path) -> dict[str, tuple[str, Path]]:
    """Each stage of the assembly: its one stack's display name (``prod/OrderPipeline``) and template."""
    stages: dict[str, tuple[str, Path]] = {}
    manifest = json.loads((assembly / "manifest.json").read_text())
    for artifact in manifest["artifacts"].values():
        if artifact["type"] != "cdk:cloud-assembly":
            continue
        nested = assembly / artifact["properties"]["directoryName"]
        stage = artifact.get("displayName") or artifact["properties"]["directoryName"].removeprefix("assembly-")
        for stack in json.loads((nested / "manifest.json").read_text())["artifacts"].values():
            if stack["type"] == "aws:cloudformation:stack":
                stages[stage] = (stack["displayName"], nested / stack["properties"]["templateFile"])
    return stages


def git(*args: str) -> str:
    completed = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO_ROOT)  # noqa: S603, S607
    if completed.returncode != 0:
        raise GateError(f"git {' '.join(args)}: {completed.stderr.strip()}")
    return completed.stdout


def default_base() -> str:
    """The merge-base of HEAD and main (or origin/main)."""
    for branch in ("main", "origin/main"):
        try:
            return git("merge-base", "HEAD", branch).strip()
        except GateError:
            continue
    raise GateError("no branch main or origin/main to find the merge-base with: pass BASE=<ref>")


def base_snapshot(base: str, path: str) -> str | None:
    """The snapshot's text at ``base``, or None if the base has none (a new stage)."""
    try:
        return git("show", f"{base}:{path}")
    except GateError:
        return None


def check_stage(stack: str, before: Path, after: Path, acknowledgements: Path) -> StageResult:
    """``order-pipeline upgrade-check`` of one stage, as a team runs it."""
    command = [*UPGRADE_CHECK, "--before", str(before), "--after", str(after), "--name", stack]
    if acknowledgements.exists():
        command += ["--acknowledged", str(acknowledgements)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300)  # noqa: S603
    if completed.returncode not in (0, 1):
        raise GateError(f"upgrade-check of {stack} could not run (exit {completed.returncode}): {completed.stderr}")
    return StageResult(stack, completed.returncode, completed.stdout + completed.stderr)


def run_gate(base: str, assembly: Path, acknowledgements: Path, work_dir: Path) -> list[StageResult]:
    """Check every stage against its snapshot at ``base``; print each stage's report."""
    results: list[StageResult] = []
    for stage, (stack, template_path) in sorted(stage_stacks(assembly).items()):
        snapshot_path = STAGE_SNAPSHOTS.get(stage)
        if snapshot_path is None:
            raise GateError(f"stage {stage!r} has no snapshot in STAGE_SNAPSHOTS ({__file__}): add one")
        snapshot = base_snapshot(base, snapshot_path)
        if snapshot is None:
            print(f"{stack}: no snapshot at {base[:12]} ({snapshot_path}): a new stage, nothing to compare")
            continue
        before = work_dir / f"{stage}.base.json"
        before.write_text(snapshot)
        print(f"{stack}: upgrade-check against {snapshot_path} at {base[:12]}")
        result = check_stage(stack, before, template_path, acknowledgements)
        (work_dir / f"{stage}.upgrade-check.txt").write_text(result.output)
        print("\n".join(f"  {line}" for line in result.output.splitlines()))
        results.append(result)
    failed = [result.stack for result in results if result.exit_code != 0]
    if failed:
        print(
            f"\nThe data-loss gate failed for {', '.join(failed)}: a replacement or removal can lose data "
            f"(DATA-LOSS above). Undo the change (keep construct ids, keys and queue types), or, if it is "
            f"deliberate, add one line per resource to {acknowledgements.name}: '<stack> <logical id> <reason>'."
        )
    else:
        print("The data-loss gate passed: no replacement or removal can lose data.")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_loss_gate", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", default=os.environ.get("BASE") or None, help="git ref (default: $BASE, else the merge-base with main)"
    )
    parser.add_argument("--assembly", type=Path, help="an existing cloud assembly (default: cdk synth the app)")
    parser.add_argument("--acknowledgements", type=Path, default=ACKNOWLEDGEMENTS)
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR, help=f"emptied first (default: {WORK_DIR})")
    args = parser.parse_args(argv)
    try:
        base = git("rev-parse", "--verify", f"{args.base}^{{commit}}").strip() if args.base else default_base()
        work_dir = args.work_dir
        shutil.rmtree(work_dir, ignore_errors=True)
        work_dir.mkdir(parents=True)
        assembly = args.assembly or synthesize(work_dir / "cdk.out")
        results = run_gate(base, assembly, args.acknowledgements, work_dir)
    except GateError as exc:
        print(f"data-loss gate: {exc}", file=sys.stderr)
        return 2
    return 1 if any(result.exit_code for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
