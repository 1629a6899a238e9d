"""The data-loss gate (``make diff``): ``order-pipeline upgrade-check`` of every stage against the base's snapshot.

What the check decides is tested in ``test_upgrade_check.py``; here, that the gate runs the shipped
command on each stage of this repository's app, and that ``make test`` runs the gate.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import data_loss_gate as gate
from idempotent_order_pipeline.testing import snapshot_template
from tests.infra.synth import SynthesizedApp, logical_id


@pytest.mark.slow
def test_the_gate_passes_the_app_against_its_committed_snapshots(
    synthesized_app: SynthesizedApp, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # GIVEN app.py's synthesized stages and the snapshots committed at HEAD
    # WHEN the gate runs as `make diff BASE=HEAD` does
    code = gate.main(["--base", "HEAD", "--assembly", str(synthesized_app.outdir), "--work-dir", str(tmp_path / "w")])
    # THEN every stage was checked by upgrade-check, and nothing can be lost
    output = capsys.readouterr().out
    assert code == 0, output
    assert set(gate.STAGE_SNAPSHOTS) == set(synthesized_app.stages)
    for stack in ("dev/OrderPipeline", "prod/OrderPipeline"):
        assert f"{stack}: upgrade-check against " in output
        assert f"  upgrade-check: {stack}: 0 replaced, 0 removed; no data can be lost; " in output
    assert "The data-loss gate passed" in output


@pytest.mark.slow
def test_the_gate_fails_a_stage_whose_table_is_rekeyed(synthesized_app: SynthesizedApp, tmp_path: Path) -> None:
    # GIVEN the prod stage's snapshot as the base, and its template with the order table re-keyed
    prod = synthesized_app.stages["prod"]
    before = tmp_path / "before.json"
    before.write_text(json.dumps(snapshot_template(prod.stack)))
    table = logical_id(prod.stack, prod.pipeline.order_records_table)
    template = copy.deepcopy(prod.template_json)
    template["Resources"][table]["Properties"]["KeySchema"] = [{"AttributeName": "id", "KeyType": "HASH"}]
    after = tmp_path / "after.json"
    after.write_text(json.dumps(template))
    # WHEN the gate checks the stage, without and with an acknowledgement
    failed = gate.check_stage("prod/OrderPipeline", before, after, tmp_path / "none")
    acknowledged = tmp_path / "acknowledged"
    acknowledged.write_text(f"prod/OrderPipeline {table} re-keyed by id; the rows are copied first\n")
    passed = gate.check_stage("prod/OrderPipeline", before, after, acknowledged)
    # THEN it fails on that table, and passes once the change is acknowledged with its reason
    assert failed.exit_code == 1
    assert f"DATA-LOSS replaced: {table} (AWS::DynamoDB::Table): KeySchema changed: " in failed.output
    assert passed.exit_code == 0, passed.output
    assert "; acknowledged: re-keyed by id; the rows are copied first" in passed.output


def test_make_test_runs_the_gate_and_the_gate_runs_upgrade_check() -> None:
    # GIVEN the Makefile, WHEN its test target is read (its prerequisites and its recipe's lines, where
    # sub-makes run the installs, then the lint, the gate, the runtime's tests and the pytest run at once)
    makefile = (gate.REPO_ROOT / "Makefile").read_text()
    test_target = re.search(r"^test:(.*?) ##.*\n((?:\t.*\n)+)", makefile, re.M)
    tiers_target = re.search(r"^test-tiers:.*\n((?:\t.*\n)+)", makefile, re.M)
    diff_recipe = re.search(r"^diff: .*\n\t(.*)\n", makefile, re.M)
    assert test_target is not None
    assert tiers_target is not None
    # THEN the gate (make diff) is one of its steps, in the same make as the pytest run (test-tiers): a
    # failing gate fails make test
    steps = [line.split() for line in test_target[2].splitlines()]
    sub_makes = [step for step in steps if "$(MAKE)" in step]
    assert [step for step in sub_makes if "diff" in step and "test-tiers" in step]
    assert "pytest" in tiers_target[1]
    assert diff_recipe is not None
    assert "-m data_loss_gate" in diff_recipe[1]
    # AND the gate's check is the shipped command
    assert gate.UPGRADE_CHECK[-3:] == ("-m", "idempotent_order_pipeline.cli", "upgrade-check")
