"""What deploying today's construct over a release's changes in CloudFormation, per release.

``tests/compat/templates/<release>/<configuration>.json`` are the releases' templates, synthesized
from their commits by ``tools/release_templates.py``; today's are synthesized here the same way.
``upgrade-check`` decides what is replaced or removed; docs/upgrading.md ("What changes in the
template") says why, release by release.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from idempotent_order_pipeline.upgrade_check import find_changes, judge
from tests.compat.released import RELEASE_COMMITS

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = Path(__file__).resolve().parent / "templates"
sys.path.insert(0, str(REPO / "tools"))
import release_templates  # noqa: E402


@pytest.fixture(scope="module")
def today(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Today's template of each configuration, synthesized as the releases' were."""
    work = tmp_path_factory.mktemp("today")
    return {
        name: release_templates.synthesize(REPO, code, work / name)
        for name, code in release_templates.CONFIGURATIONS.items()
    }


def released(release: str, configuration: str) -> dict[str, Any]:
    template: dict[str, Any] = json.loads((TEMPLATES / release / f"{configuration}.json").read_text())
    return template


def test_every_release_has_its_templates() -> None:
    # GIVEN the releases named by commit / THEN each has a template of every configuration
    for release in RELEASE_COMMITS:
        assert {path.stem for path in (TEMPLATES / release).glob("*.json")} == set(release_templates.CONFIGURATIONS)


@pytest.mark.slow
@pytest.mark.parametrize("configuration", ["default", "cmk"])
def test_upgrading_from_0_2_0_replaces_and_removes_nothing(
    today: dict[str, dict[str, Any]], configuration: str
) -> None:
    # GIVEN 0.2.0's template and today's, with and without a customer-managed key
    # WHEN upgrade-check compares them
    changes = find_changes(released("0.2.0", configuration), today[configuration])
    # THEN nothing is replaced or removed: with a key, the event source mapping keeps 0.2.0's logical id
    # (before event_source.QueueEventSource it moved to ...EventSourceQueue..., a removal and an addition
    # that Lambda refuses while the first mapping exists)
    assert changes == []


@pytest.mark.slow
@pytest.mark.parametrize("configuration", ["default", "cmk"])
def test_upgrading_from_0_1_0_replaces_only_the_alarms(today: dict[str, dict[str, Any]], configuration: str) -> None:
    # GIVEN 0.1.0's template and today's
    # WHEN upgrade-check compares them
    verdicts = judge(find_changes(released("0.1.0", configuration), today[configuration]))
    # THEN the only replacements are alarms, whose names changed (safe), and nothing is removed
    assert verdicts
    assert {(v.change.resource_type, v.change.action, v.change.causes) for v in verdicts} == {
        ("AWS::CloudWatch::Alarm", "replaced", ("AlarmName changed",))
    }
    assert not any(v.loses_data for v in verdicts)
