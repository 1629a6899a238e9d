"""The data-loss gate: the CDK CLI's diff against the base's snapshot fails on a stateful replacement.

Each case diffs a real synthesized assembly (``cdk diff --app DIR --template SNAPSHOT``) against the
default configuration's masked template, the form the snapshots are committed in.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

import data_loss_gate as gate
from idempotent_order_pipeline import IdempotentOrderPipeline
from tests.infra.synth import Synthesized, SynthesizedApp, logical_id
from tests.infra.test_snapshots import masked

STACK = "TestStack"


@pytest.fixture(scope="module")
def base(default_pipeline: Synthesized) -> dict[str, Any]:
    """The default pipeline's template as its committed snapshot (asset hashes masked)."""
    return masked(default_pipeline.template_json)


def synth_test_stack(outdir: Path, construct_id: str, **props: Any) -> Path:
    """A ``TestStack`` holding one pipeline (the base's stack name: some logical ids contain it)."""
    app = cdk.App(outdir=str(outdir))
    IdempotentOrderPipeline(cdk.Stack(app, STACK), construct_id, **props)
    app.synth()
    return outdir


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The construct id "Orders" instead of "Pipeline"."""
    return synth_test_stack(tmp_path_factory.mktemp("renamed"), "Orders")


@pytest.fixture(scope="module")
def resized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """memory_size=1024 instead of the default."""
    return synth_test_stack(tmp_path_factory.mktemp("resized"), "Pipeline", memory_size=1024)


def run(assembly: Path, stack: str, base: dict[str, Any], tmp_path: Path) -> list[gate.Finding]:
    return diff(assembly, stack, base, tmp_path)[0]


def diff(assembly: Path, stack: str, base: dict[str, Any], tmp_path: Path) -> tuple[list[gate.Finding], str]:
    """The gate's ``cdk diff`` of ``stack`` in ``assembly`` against the snapshot ``base``."""
    current = json.loads((assembly / f"{stack}.template.json").read_text())
    return gate.diff_stack(assembly, stack, gate.comparable_snapshot(base, current), tmp_path)


@pytest.mark.slow
def test_changing_the_order_tables_key_fails_the_gate(
    default_pipeline: Synthesized, base: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the default assembly with order_records re-keyed by "id"
    assembly = tmp_path / "rekeyed"
    shutil.copytree(default_pipeline.template_path.parent, assembly)
    table = logical_id(default_pipeline.stack, default_pipeline.pipeline.order_records_table)
    template = json.loads((assembly / f"{STACK}.template.json").read_text())
    template["Resources"][table]["Properties"]["KeySchema"] = [{"AttributeName": "id", "KeyType": "HASH"}]
    template["Resources"][table]["Properties"]["AttributeDefinitions"] = [{"AttributeName": "id", "AttributeType": "S"}]
    (assembly / f"{STACK}.template.json").write_text(json.dumps(template))
    # WHEN the gate diffs it against the base snapshot
    findings, output = diff(assembly, STACK, base, tmp_path)
    verdict = gate.judge(findings, [])
    # THEN it fails on that table, because the key schema requires replacement
    assert not verdict.passed
    [finding] = verdict.blocking
    assert (finding.logical_id, finding.impact, finding.properties) == (table, "requires replacement", ("KeySchema",))
    assert "requires replacement: changed KeySchema" in finding.describe()
    # AND the diff's lines about that table are there for the report
    assert any("KeySchema (requires replacement)" in line for line in gate.diff_block(output, table))


@pytest.mark.slow
def test_renaming_the_construct_id_fails_the_gate(renamed: Path, base: dict[str, Any], tmp_path: Path) -> None:
    # GIVEN the construct id "Orders" instead of "Pipeline" (every logical id changes)
    # WHEN the gate diffs it against the base snapshot
    verdict = gate.judge(run(renamed, STACK, base, tmp_path), [])
    # THEN both tables, both queues, the topic and the log group are removed (the defaults retain them all)
    assert not verdict.passed
    removed = {(f.resource_type, f.logical_id.rstrip("0123456789ABCDEF"), f.impact) for f in verdict.blocking}
    assert removed == {
        ("AWS::DynamoDB::Table", "PipelineProcessedEventsTable", "orphan"),
        ("AWS::DynamoDB::Table", "PipelineOrderRecordsTable", "orphan"),
        ("AWS::SQS::Queue", "PipelineQueue", "orphan"),
        ("AWS::SQS::Queue", "PipelineDeadLetterQueue", "orphan"),
        ("AWS::SNS::Topic", "PipelineTopic", "orphan"),
        ("AWS::Logs::LogGroup", "PipelineFunctionLogGroup", "orphan"),
        ("AWS::Logs::LogGroup", "PipelineReconciliationLogGroup", "orphan"),
    }
    assert "renamed construct id" in verdict.blocking[0].describe()


@pytest.mark.slow
def test_changing_a_queue_to_fifo_fails_the_gate(
    fifo_pipeline: Synthesized, base: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN fifo=True (both queues and the topic become FIFO)
    # WHEN the gate diffs it against the default's snapshot
    verdict = gate.judge(run(fifo_pipeline.template_path.parent, STACK, base, tmp_path), [])
    # THEN the queues and the topic would be replaced, FifoQueue / FifoTopic being why
    assert not verdict.passed
    replaced = {(f.resource_type, f.impact): f.properties for f in verdict.blocking}
    assert "FifoQueue" in replaced[("AWS::SQS::Queue", "requires replacement")]
    assert "FifoTopic" in replaced[("AWS::SNS::Topic", "requires replacement")]


@pytest.mark.slow
def test_changing_the_memory_size_passes_the_gate(resized: Path, base: dict[str, Any], tmp_path: Path) -> None:
    # GIVEN memory_size=1024 instead of the default (1769)
    # WHEN the gate diffs it against the base snapshot
    findings, output = diff(resized, STACK, base, tmp_path)
    # THEN nothing is destructive, and the diff did see the change
    assert findings == []
    assert gate.judge(findings, []).passed
    assert "MemorySize" in output


def test_an_acknowledged_change_passes_and_an_unreasoned_acknowledgement_is_refused() -> None:
    # GIVEN a blocking finding
    finding = gate.Finding("prod/OrderPipeline", "AWS::DynamoDB::Table", "Rows1234", "requires replacement")
    # WHEN a reasoned line acknowledges it (for one stage, or for every stage)
    for stack in ("prod/OrderPipeline", "*"):
        acks = gate.read_acknowledgements(f"# comment\n{stack} Rows1234 re-keyed; rows copied by the migration job\n")
        verdict = gate.judge([finding], acks)
        # THEN the gate passes and says why
        assert verdict.passed
        assert verdict.acknowledged[0][1].reason == "re-keyed; rows copied by the migration job"
    # AND an acknowledgement of another stage does not count
    assert not gate.judge([finding], gate.read_acknowledgements("dev/OrderPipeline Rows1234 a good reason\n")).passed
    # AND a line without a reason is an error
    with pytest.raises(gate.GateError, match="expected '<stack> <logical id> <reason>'"):
        gate.read_acknowledgements("prod/OrderPipeline Rows1234\n")


def test_a_stateless_replacement_is_reported_but_allowed() -> None:
    finding = gate.Finding("prod/OrderPipeline", "AWS::IAM::Role", "Role1", "requires replacement")
    verdict = gate.judge([finding], [])
    assert verdict.passed
    assert verdict.stateless == [finding]


def test_unmask_restores_only_the_hashes_the_snapshot_masked(default_pipeline: Synthesized) -> None:
    # GIVEN the default template and its masked snapshot
    current = default_pipeline.template_json
    # WHEN the snapshot is made comparable with the current template
    restored = gate.comparable_snapshot(masked(current), current)
    # THEN it is the current template again
    assert restored == current
    # AND a real difference beside a hash stays
    changed = json.loads(json.dumps(masked(current)).replace("<asset-hash>.zip", "<asset-hash>-old.zip"))
    assert gate.comparable_snapshot(changed, current) != current


@pytest.mark.slow
def test_the_gate_passes_the_app_against_its_committed_snapshots(
    synthesized_app: SynthesizedApp, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # GIVEN app.py's synthesized stages and the snapshots committed at HEAD
    # WHEN the gate runs as `make diff BASE=HEAD` does
    code = gate.main(["--base", "HEAD", "--assembly", str(synthesized_app.outdir), "--work-dir", str(tmp_path / "w")])
    # THEN every stage was compared, and nothing is lost
    output = capsys.readouterr().out
    assert code == 0, output
    assert "prod/OrderPipeline: compared with" in output
    assert set(gate.STAGE_SNAPSHOTS) == set(synthesized_app.stages)
    assert "The data-loss gate passed" in output


def test_make_test_runs_the_gate() -> None:
    # GIVEN the Makefile, WHEN its test target is read (its prerequisites and its recipe's lines, where
    # a sub-make runs the lint, the gate and the tool venvs two at a time)
    makefile = (gate.REPO_ROOT / "Makefile").read_text()
    test_target = re.search(r"^test: (.*?) ##.*\n((?:\t.*\n)+)", makefile, re.M)
    diff_recipe = re.search(r"^diff: .*\n\t(.*)\n", makefile, re.M)
    assert test_target is not None
    # THEN the gate (make diff) is one of its steps, before the tests
    prerequisites = test_target[1].split()
    sub_make = next((line.split() for line in test_target[2].splitlines() if "$(MAKE)" in line), [])
    assert "diff" in prerequisites + sub_make
    assert diff_recipe is not None
    assert "-m data_loss_gate" in diff_recipe[1]
