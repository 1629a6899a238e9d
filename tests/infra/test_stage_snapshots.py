"""The dev stage's CloudFormation snapshot (the prod stage's is in test_snapshots.py).

The data-loss gate (``make diff``, ``infra/data_loss_gate.py``) compares every stage of the app
with its snapshot at the base branch, so each stage has one. Refresh with ``make snapshot-update``.
"""

from __future__ import annotations

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tests.infra.synth import SynthesizedApp
from tests.infra.test_snapshots import masked


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_snapshot_dev_stage(synthesized_app: SynthesizedApp, snapshot_json: SnapshotAssertion) -> None:
    # GIVEN the dev stage as app.py builds it from cdk.json
    # WHEN the template is masked
    # THEN it matches the reviewed snapshot
    assert masked(synthesized_app.stages["dev"].template_json) == snapshot_json
