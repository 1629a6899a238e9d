"""CloudFormation snapshots, one per meaningful configuration, as readable JSON.

A PR that changes the construct shows here, line by line, what changes in CloudFormation. The
snapshots are what ``idempotent_order_pipeline.testing.snapshot_template`` returns, the helper a team's
own snapshot tests use: asset hashes masked (a code change of the library shows as its version in the
template's Metadata), the bootstrap version masked, the dashboard's body expanded, keys sorted.
Refresh after a deliberate change with ``make snapshot-update``.
"""

from __future__ import annotations

import json
import re

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

import idempotent_order_pipeline
from idempotent_order_pipeline.discovery import METADATA_KEY
from idempotent_order_pipeline.testing import snapshot_template
from tests.infra.synth import Synthesized, SynthesizedApp

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_snapshot_template_masks_hashes_keeps_the_version_and_expands_the_dashboard(
    default_pipeline: Synthesized,
) -> None:
    # GIVEN the default pipeline's stack
    # WHEN snapshot_template makes it a snapshot
    result = snapshot_template(default_pipeline.stack)
    text = json.dumps(result)
    # THEN no asset hash or bootstrap version is left, and every resource is
    assert not ASSET_HASH.search(text)
    assert "<asset-hash>.zip" in text
    assert result["Rules"]["CheckBootstrapVersion"] == "<bootstrap-version>"
    assert result["Resources"].keys() == default_pipeline.template_json["Resources"].keys()
    # AND the library version is kept, with the construct it built
    assert result["Metadata"][METADATA_KEY] == {
        "constructs": {"Pipeline": "IdempotentOrderPipeline"},
        "version": idempotent_order_pipeline.__version__,
    }
    # AND the dashboard's body, a join of JSON text and tokens, is an object with the tokens in place
    [dashboard] = [r for r in result["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    body = dashboard["Properties"]["DashboardBody"]
    assert isinstance(body["widgets"], list)
    assert '"region": {"Ref": "AWS::Region"}' in json.dumps(body)
    # AND every mapping's keys are sorted (a stable order whatever the synth's)
    assert text == json.dumps(json.loads(text, object_pairs_hook=lambda pairs: dict(sorted(pairs))))


def test_snapshot_default(default_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN every prop at its default
    # WHEN snapshot_template makes it a snapshot
    # THEN it matches the reviewed snapshot
    assert snapshot_template(default_pipeline.stack) == snapshot_json


def test_snapshot_fifo(fifo_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN fifo=True
    # WHEN snapshot_template makes it a snapshot
    # THEN it matches the reviewed snapshot
    assert snapshot_template(fifo_pipeline.stack) == snapshot_json


def test_snapshot_cmk_and_alarm_action(cmk_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN a customer managed key, an alarm action and non-default batching
    # WHEN snapshot_template makes it a snapshot
    # THEN it matches the reviewed snapshot
    assert snapshot_template(cmk_pipeline.stack) == snapshot_json


def test_snapshot_brownfield(brownfield_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN an existing queue, DLQ, tables and CMK (imported), a VPC with endpoints and overrides
    # WHEN snapshot_template makes it a snapshot
    # THEN it matches the reviewed snapshot
    assert snapshot_template(brownfield_pipeline.stack) == snapshot_json


def test_snapshot_prod_stage(synthesized_app: SynthesizedApp, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN the prod stage as app.py builds it from cdk.json
    # WHEN snapshot_template makes it a snapshot
    # THEN it matches the reviewed snapshot
    assert snapshot_template(synthesized_app.stages["prod"].stack) == snapshot_json
