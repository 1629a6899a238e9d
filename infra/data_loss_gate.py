"""The data-loss gate (``make diff``): would this change replace or remove a stateful resource?

Each stage of the app, synthesized from the working tree, is compared with the CloudFormation
snapshot of that stage *at the base the change merges into* (``BASE``, default: the merge-base of
``HEAD`` and ``main``; read with ``git show``, so refreshing the snapshots in the same change does
not silence the gate). The comparison is the CDK CLI's own: ``cdk diff --template <base snapshot>
--fail-on destructive``, whose findings (``will be replaced``, ``will be destroyed``, ``will be
orphaned``) this module reads. A finding on a stateful resource (:data:`STATEFUL_TYPES`) fails
the gate, with the properties that force the replacement, unless a line of
:data:`ACKNOWLEDGEMENTS` acknowledges it::

    # <stack> <logical id> <reason>   (stack as cdk names it, e.g. prod/OrderPipeline; * = every stage)
    prod/OrderPipeline PipelineOrderRecordsTable1509BD64 re-keyed by id; rows copied by the 2027-01 migration

Snapshots mask asset hashes and the bootstrap version; where the current template has the value
the mask hides, it is put back before the comparison, so only real changes remain.

Development tool (not installed): ``python -m data_loss_gate [--base REF] [--assembly DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from idempotent_order_pipeline.sandbox.cdk_cli import cdk_cli_environment

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The committed acknowledgements of deliberate destructive changes (one reasoned line each).
ACKNOWLEDGEMENTS = REPO_ROOT / "infra" / "destructive-changes.acknowledged"
#: The snapshot of each stage of app.py (relative to the repository root).
STAGE_SNAPSHOTS: Mapping[str, str] = {
    "dev": "tests/infra/__snapshots__/test_stage_snapshots/test_snapshot_dev_stage.json",
    "prod": "tests/infra/__snapshots__/test_snapshots/test_snapshot_prod_stage.json",
}
#: Resources whose replacement or removal loses data or breaks producers and subscribers.
STATEFUL_TYPES = frozenset(
    {
        "AWS::DynamoDB::Table",
        "AWS::DynamoDB::GlobalTable",
        "AWS::SQS::Queue",
        "AWS::SNS::Topic",
        "AWS::Logs::LogGroup",
        "AWS::KMS::Key",
        "AWS::S3::Bucket",
    }
)
#: Where the gate synthesizes and keeps each stage's full diff (git-ignored; emptied at every run).
WORK_DIR = REPO_ROOT / "cdk.out" / "data-loss-gate"
#: The CDK CLI pinned in package.json.
CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"
ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")
ASSET_MASK = "<asset-hash>"
BOOTSTRAP_MASK = "<bootstrap-version>"
# `cdk diff --fail-on destructive` ends with one line per finding:
#   "  prod/OrderPipeline (prod-OrderPipeline): AWS::SQS::Queue Pipeline/Queue PipelineQueueC13966F5 will be replaced"
_FINDING = re.compile(
    r"^\s+(?P<stack>\S+)(?: \([^)]*\))?: (?P<type>[A-Za-z0-9]+::\S+) (?:(?P<path>\S+) )?(?P<logical>\S+) "
    r"(?P<impact>will be replaced|may be replaced|will be destroyed|will be orphaned)"
)
# A resource's block in the diff: "[~] AWS::SQS::Queue Pipeline/Queue PipelineQueueC13966F5 replace".
_BLOCK = re.compile(r"^\[[~+\-]\] (?P<type>\S+) (?P<rest>.+)$")
_BLOCK_IMPACTS = (" replace", " may be replaced", " destroy", " orphan")
_REPLACING_PROPERTY = re.compile(
    r"─ \[[~+\-]\] (?P<property>\S+) \((?P<why>requires replacement|may cause replacement)\)"
)
IMPACT_WORDS = {
    "will be replaced": "requires replacement",
    "may be replaced": "may require replacement",
    "will be destroyed": "destroy",
    "will be orphaned": "orphan",
}


class GateError(RuntimeError):
    """The gate could not run (no base, no CDK CLI, a synth or diff that failed)."""


@dataclass(frozen=True)
class Finding:
    """A destructive change the CDK CLI reported for one resource."""

    stack: str
    resource_type: str
    logical_id: str
    impact: str  # "requires replacement", "may require replacement", "destroy" or "orphan"
    construct_path: str | None = None
    properties: tuple[str, ...] = ()

    @property
    def stateful(self) -> bool:
        return self.resource_type in STATEFUL_TYPES

    def describe(self) -> str:
        where = f", {self.construct_path}" if self.construct_path else ""
        what = f"{self.stack} {self.logical_id} ({self.resource_type}{where})"
        if self.impact == "destroy":
            why = "removed from the template: deleted, with its data"
        elif self.impact == "orphan":
            why = "removed from the template: kept in the account (DeletionPolicy Retain) but no longer used"
        else:
            changed = ", ".join(self.properties) or "(see the diff)"
            why = (
                f"changed {changed}: a new, empty resource takes its place (the old one is deleted, or kept "
                "outside the stack under UpdateReplacePolicy Retain)"
            )
        if self.impact in ("destroy", "orphan"):
            why += "; a renamed construct id or path gives a new logical id, i.e. a new, empty resource"
        return f"{what}: {self.impact}: {why}"


@dataclass(frozen=True)
class Acknowledgement:
    stack: str
    logical_id: str
    reason: str

    def covers(self, finding: Finding) -> bool:
        return self.logical_id == finding.logical_id and self.stack in ("*", finding.stack)


@dataclass
class Verdict:
    """What the gate decided for a set of findings."""

    blocking: list[Finding] = field(default_factory=list)
    acknowledged: list[tuple[Finding, Acknowledgement]] = field(default_factory=list)
    stateless: list[Finding] = field(default_factory=list)
    unused: list[Acknowledgement] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.blocking


def read_acknowledgements(text: str) -> list[Acknowledgement]:
    """Parse the acknowledgements file; a line without a reason is an error (it must say why)."""
    acknowledgements: list[Acknowledgement] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or len(parts[2].split()) < 2:
            raise GateError(
                f"{ACKNOWLEDGEMENTS.name}:{number}: {raw.strip()!r}: expected '<stack> <logical id> <reason>', "
                "the reason saying why losing or replacing the resource is acceptable"
            )
        acknowledgements.append(Acknowledgement(stack=parts[0], logical_id=parts[1], reason=parts[2]))
    return acknowledgements


def judge(findings: Sequence[Finding], acknowledgements: Sequence[Acknowledgement]) -> Verdict:
    """Stateful findings block unless acknowledged; the others are only reported."""
    verdict = Verdict()
    used: set[int] = set()
    for finding in findings:
        if not finding.stateful:
            verdict.stateless.append(finding)
            continue
        matching = [(i, a) for i, a in enumerate(acknowledgements) if a.covers(finding)]
        if matching:
            used.add(matching[0][0])
            verdict.acknowledged.append((finding, matching[0][1]))
        else:
            verdict.blocking.append(finding)
    verdict.unused = [a for i, a in enumerate(acknowledgements) if i not in used]
    return verdict


def unmask(old: Any, new: Any) -> Any:
    """``old`` (a snapshot) with each masked asset hash replaced by the value ``new`` has there,
    when ``new`` differs from it only by that hash."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {key: unmask(value, new.get(key)) for key, value in old.items()}
    if isinstance(old, list) and isinstance(new, list):
        return [unmask(item, new[i] if i < len(new) else None) for i, item in enumerate(old)]
    if isinstance(old, str) and ASSET_MASK in old and isinstance(new, str) and ASSET_HASH.sub(ASSET_MASK, new) == old:
        return new
    return old


def comparable_snapshot(snapshot: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot ready to diff against ``current``: hashes and the bootstrap version unmasked."""
    result: dict[str, Any] = unmask(dict(snapshot), dict(current))
    for section, name in (("Parameters", "BootstrapVersion"), ("Rules", "CheckBootstrapVersion")):
        if result.get(section, {}).get(name) == BOOTSTRAP_MASK and name in current.get(section, {}):
            result[section][name] = current[section][name]
    return result


def parse_diff(output: str) -> list[Finding]:
    """The findings of ``cdk diff --fail-on destructive`` output, with the properties that force
    each replacement (read from the resource's block of the diff)."""
    reasons: dict[str, list[str]] = {}
    current: str | None = None
    for line in output.splitlines():
        block = _BLOCK.match(line)
        if block:
            rest = block["rest"]
            for suffix in _BLOCK_IMPACTS:
                rest = rest.removesuffix(suffix)
            current = rest.split()[-1]
            continue
        if not line.startswith((" ├", " └", " │", "   ")):
            current = None
            continue
        replacing = _REPLACING_PROPERTY.search(line)
        if current is not None and replacing:
            reasons.setdefault(current, []).append(replacing["property"])
    findings = []
    for line in output.splitlines():
        match = _FINDING.match(line)
        if match:
            findings.append(
                Finding(
                    stack=match["stack"],
                    resource_type=match["type"],
                    logical_id=match["logical"],
                    impact=IMPACT_WORDS[match["impact"]],
                    construct_path=match["path"],
                    properties=tuple(reasons.get(match["logical"], ())),
                )
            )
    return findings


def diff_block(output: str, logical_id: str) -> list[str]:
    """The lines of ``cdk diff`` output about one resource (its header and its property tree)."""
    lines: list[str] = []
    for line in output.splitlines():
        if lines and not line.startswith((" ├", " └", " │", "   ")):
            break
        if lines or (_BLOCK.match(line) and f" {logical_id}" in line):
            lines.append(line)
    return lines


def cdk_environment() -> dict[str, str]:
    """The CLI's environment, without colour codes in the diff the gate parses."""
    return {**cdk_cli_environment(os.environ), "FORCE_COLOR": "0", "NO_COLOR": "1"}


def diff_stack(
    assembly: Path, stack: str, old_template: Mapping[str, Any], work_dir: Path
) -> tuple[list[Finding], str]:
    """``cdk diff --template`` of one stack of a synthesized assembly against an old template."""
    work_dir.mkdir(parents=True, exist_ok=True)
    old_path = work_dir / f"{stack.replace('/', '_')}.base.json"
    old_path.write_text(json.dumps(old_template, indent=1))
    command = [str(CDK_CLI), "diff", "--app", str(assembly), "--template", str(old_path), stack]
    command += ["--fail-on", "destructive", "--no-notices", "--ci", "--context-lines", "1"]
    completed = subprocess.run(  # noqa: S603 - the pinned CLI, arguments built here
        command, capture_output=True, text=True, env=cdk_environment(), cwd=work_dir, timeout=300
    )
    output = completed.stdout + completed.stderr
    findings = parse_diff(output)
    if completed.returncode not in (0, 1) or (completed.returncode == 1 and not findings):
        raise GateError(f"`cdk diff` of {stack} failed (exit {completed.returncode}):\n{output[-3000:]}")
    return findings, output


def synthesize(out_dir: Path) -> Path:
    """``cdk synth`` of the app (every stage) into ``out_dir``."""
    command = [str(CDK_CLI), "synth", "--all", "--quiet", "--no-notices", "--ci", "--output", str(out_dir)]
    completed = subprocess.run(  # noqa: S603
        command, capture_output=True, text=True, env=cdk_environment(), cwd=REPO_ROOT, timeout=600
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


def base_snapshot(base: str, path: str) -> dict[str, Any] | None:
    """The snapshot at ``base``, or None if the base has none (a new stage)."""
    try:
        snapshot: dict[str, Any] = json.loads(git("show", f"{base}:{path}"))
    except GateError:
        return None
    return snapshot


def run_gate(base: str, assembly: Path, acknowledgements: Sequence[Acknowledgement], work_dir: Path) -> Verdict:
    """Diff every stage against its snapshot at ``base``, print the report, return the verdict."""
    findings: list[Finding] = []
    outputs: dict[str, str] = {}
    for stage, (stack, template_path) in sorted(stage_stacks(assembly).items()):
        snapshot_path = STAGE_SNAPSHOTS.get(stage)
        if snapshot_path is None:
            raise GateError(f"stage {stage!r} has no snapshot in STAGE_SNAPSHOTS ({__file__}): add one")
        snapshot = base_snapshot(base, snapshot_path)
        if snapshot is None:
            print(f"{stack}: no snapshot at {base[:12]} ({snapshot_path}): a new stage, nothing to compare")
            continue
        current = json.loads(template_path.read_text())
        stage_findings, output = diff_stack(assembly, stack, comparable_snapshot(snapshot, current), work_dir)
        (work_dir / f"{stage}.diff.txt").write_text(output)
        outputs[stack] = output
        print(f"{stack}: compared with {snapshot_path} at {base[:12]}: {len(stage_findings)} destructive change(s)")
        findings += stage_findings
    verdict = judge(findings, acknowledgements)
    for finding in verdict.stateless:
        print(f"  note (stateless, allowed): {finding.describe()}")
    for finding, acknowledgement in verdict.acknowledged:
        print(f"  ACKNOWLEDGED: {finding.describe()}\n    because: {acknowledgement.reason}")
    for acknowledgement in verdict.unused:
        print(f"  note: acknowledgement of {acknowledgement.stack} {acknowledgement.logical_id} matches nothing now")
    for finding in verdict.blocking:
        print(f"  DATA LOSS: {finding.describe()}")
        for line in diff_block(outputs.get(finding.stack, ""), finding.logical_id):
            print(f"      {line}")
    if verdict.blocking:
        print(
            f"\nThe data-loss gate failed: {len(verdict.blocking)} stateful resource(s) would be replaced or removed "
            f"(full diffs in {work_dir}). Undo the change (keep construct ids, keys and queue types), or, if it is "
            f"deliberate, add one line per resource to {ACKNOWLEDGEMENTS.relative_to(REPO_ROOT)}: "
            "'<stack> <logical id> <reason>'."
        )
    else:
        print("The data-loss gate passed: no stateful resource is replaced or removed.")
    return verdict


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
        text = args.acknowledgements.read_text() if args.acknowledgements.exists() else ""
        acknowledgements = read_acknowledgements(text)
        work_dir = args.work_dir
        shutil.rmtree(work_dir, ignore_errors=True)
        work_dir.mkdir(parents=True)
        assembly = args.assembly or synthesize(work_dir / "cdk.out")
        verdict = run_gate(base, assembly, acknowledgements, work_dir)
    except GateError as exc:
        print(f"data-loss gate: {exc}", file=sys.stderr)
        return 2
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
