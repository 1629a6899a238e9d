"""cdk-nag (AwsSolutions + Serverless) and cfn-lint on every synthesized configuration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cfnlint.api import ManualArgs, lint_file

from tests.infra.synth import REPO, Synthesized

CONFIGURATIONS = ["default", "fifo", "cmk", "brownfield", "app-dev", "app-prod"]
NAG_PACKS = {"AwsSolutions", "Serverless"}
# cfn-lint findings accepted, each with its reason:
# - W3005 "dependency already enforced by a GetAtt": aws-cdk-lib's Function always adds an explicit
#   DependsOn on its role next to the Role GetAtt. Redundant, harmless, and not ours to remove.
ACCEPTED_CFN_LINT_RULES = {"W3005"}
# Commercial regions with arm64 Lambda and the Powertools layer: the env-agnostic templates must be
# valid in each of them.
LINT_REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2"]


def readme_acknowledgements() -> set[str]:
    """The rule ids listed in README.md's "cdk-nag acknowledgements" section."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## cdk-nag acknowledgements", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`((?:AwsSolutions|Serverless)-[A-Za-z0-9]+(?:\[[^\]`]+\])?)`", section))


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_cdk_nag_finds_nothing_unacknowledged(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a configuration synthesized with the AwsSolutions and Serverless packs
    report = all_configurations[configuration].nag_report
    # WHEN the validation report is read
    reports = {plugin["pluginName"]: plugin for plugin in report["pluginReports"]}
    # THEN every pack that found something succeeded with no violation left (cdk-nag reports a pack
    # only when it has a finding, acknowledged or not: a pack absent here found nothing at all)
    assert set(reports) <= NAG_PACKS
    assert reports
    for name, plugin in reports.items():
        assert plugin["conclusion"] == "success", name
        assert plugin["violations"] == [], name


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_every_acknowledgement_has_a_reason_listed_in_the_readme(
    all_configurations: dict[str, Synthesized], configuration: str
) -> None:
    # GIVEN the findings acknowledged in a configuration
    suppressed = [
        violation
        for plugin in all_configurations[configuration].nag_report["pluginReports"]
        for violation in plugin.get("suppressedViolations", [])
    ]
    # WHEN they are compared with the README's list
    # THEN each carries a reason, and each rule is explained in the README
    assert suppressed
    for violation in suppressed:
        assert len(violation["reason"]) > 40, violation["ruleName"]
    assert {violation["ruleName"] for violation in suppressed} <= readme_acknowledgements()


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_cfn_lint_passes(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a synthesized template
    template_path: Path = all_configurations[configuration].template_path
    # WHEN cfn-lint checks it (errors and warnings) in several regions
    matches = lint_file(template_path, config=ManualArgs(regions=LINT_REGIONS))
    # THEN it finds nothing but the accepted, justified warnings
    unexpected = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id not in ACCEPTED_CFN_LINT_RULES]
    assert unexpected == []
