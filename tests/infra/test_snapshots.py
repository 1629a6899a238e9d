"""CloudFormation snapshots, one per meaningful configuration, as readable JSON.

A PR that changes the construct shows here, line by line, what changes in CloudFormation. Asset
hashes (they change with any Lambda code edit) and the bootstrap version check (it changes with the
CDK version) are masked. Refresh after a deliberate change with ``make snapshot-update``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tests.infra.synth import Synthesized, SynthesizedApp

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def masked(template: dict[str, Any]) -> dict[str, Any]:
    """The template with asset hashes and the bootstrap version replaced by placeholders."""

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            return ASSET_HASH.sub("<asset-hash>", value)
        if isinstance(value, list):
            return [mask(item) for item in value]
        if isinstance(value, dict):
            return {key: mask(item) for key, item in value.items()}
        return value

    result: dict[str, Any] = mask(copy.deepcopy(template))
    if "BootstrapVersion" in result.get("Parameters", {}):
        result["Parameters"]["BootstrapVersion"] = "<bootstrap-version>"
    if "CheckBootstrapVersion" in result.get("Rules", {}):
        result["Rules"]["CheckBootstrapVersion"] = "<bootstrap-version>"
    return result


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_masking_hides_only_hashes_and_the_bootstrap_version(default_pipeline: Synthesized) -> None:
    # GIVEN the default template
    result = masked(default_pipeline.template_json)
    # WHEN it is masked
    text = str(result)
    # THEN no asset hash or bootstrap version is left, and everything else is
    assert not ASSET_HASH.search(text)
    assert "<asset-hash>.zip" in text
    assert result["Rules"]["CheckBootstrapVersion"] == "<bootstrap-version>"
    assert result["Resources"].keys() == default_pipeline.template_json["Resources"].keys()


def test_snapshot_default(default_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN every prop at its default
    # WHEN the template is masked
    # THEN it matches the reviewed snapshot
    assert masked(default_pipeline.template_json) == snapshot_json


def test_snapshot_fifo(fifo_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN fifo=True
    # WHEN the template is masked
    # THEN it matches the reviewed snapshot
    assert masked(fifo_pipeline.template_json) == snapshot_json


def test_snapshot_cmk_and_alarm_action(cmk_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN a customer managed key, an alarm action and non-default batching
    # WHEN the template is masked
    # THEN it matches the reviewed snapshot
    assert masked(cmk_pipeline.template_json) == snapshot_json


def test_snapshot_brownfield(brownfield_pipeline: Synthesized, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN an existing queue, DLQ, tables and CMK (imported), a VPC with endpoints and overrides
    # WHEN the template is masked
    # THEN it matches the reviewed snapshot
    assert masked(brownfield_pipeline.template_json) == snapshot_json


def test_snapshot_prod_stage(synthesized_app: SynthesizedApp, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN the prod stage as app.py builds it from cdk.json
    # WHEN the template is masked
    # THEN it matches the reviewed snapshot
    assert masked(synthesized_app.stages["prod"].template_json) == snapshot_json
