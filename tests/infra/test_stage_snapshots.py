"""The dev stage's CloudFormation snapshot (the prod stage's is in test_snapshots.py).

The data-loss gate (``make diff``, ``infra/data_loss_gate.py``) compares every stage of the app
with its snapshot at the base branch, so each stage has one. Refresh with ``make snapshot-update``.
"""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from idempotent_order_pipeline.testing import snapshot_template
from tests.infra.synth import SynthesizedApp


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_snapshot_dev_stage(synthesized_app: SynthesizedApp, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN the dev stage as app.py builds it from cdk.json
    # WHEN snapshot_template makes it a snapshot
    # THEN it matches the reviewed snapshot
    assert snapshot_template(synthesized_app.stages["dev"].stack) == snapshot_json
