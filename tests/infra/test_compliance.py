"""cdk-nag (AwsSolutions + Serverless), cfn-lint and checkov on every synthesized configuration."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

import app
from idempotent_order_pipeline import compliance
from idempotent_order_pipeline.subscriber import findings as subscriber_findings
from tests.infra.policies import policy_documents
from tests.infra.synth import REPO, Synthesized, logical_id

CONFIGURATIONS = ["default", "fifo", "cmk", "brownfield", "snapstart", "schema", "app-dev", "app-prod"]
# cfn-lint findings accepted, each with its reason:
# - W3005 "dependency already enforced by a GetAtt": aws-cdk-lib's Function always adds an explicit
#   DependsOn on its role next to the Role GetAtt. Redundant, harmless, and not ours to remove.
ACCEPTED_CFN_LINT_RULES = {"W3005"}
# Commercial regions with arm64 Lambda and the Powertools layer: the env-agnostic templates must be
# valid in each of them.
LINT_REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2"]


#: The page that lists every acknowledged finding with its reason.
COMPLIANCE_PAGE = REPO / "docs" / "compliance.md"
#: checkov runs from its own virtualenv (requirements-checkov.txt; `make venv` creates it).
CHECKOV = Path(os.environ.get("CHECKOV", REPO / ".venv-checkov" / "bin" / "checkov"))
SHIPPED_CHECKOV_REASONS = {s.check_id: s.reason for s, _ in compliance.CHECKOV_SUPPRESSIONS}
# Every reason a skip in a synthesized template may carry: the pipeline's, the subscriber's and the
# worked app's own (app.py's counter table), each written where its resource is made.
ACCEPTED_CHECKOV_REASONS: dict[str, set[str]] = {}
for _suppression in (
    *(s for s, _ in compliance.CHECKOV_SUPPRESSIONS),
    *subscriber_findings.CHECKOV_SUPPRESSIONS,
    *app.APP_CHECKOV_SUPPRESSIONS,
):
    ACCEPTED_CHECKOV_REASONS.setdefault(_suppression.check_id, set()).add(_suppression.reason)


def documented_acknowledgements() -> set[str]:
    """The cdk-nag rule ids listed in docs/compliance.md."""
    page = COMPLIANCE_PAGE.read_text()
    return set(re.findall(r"`((?:AwsSolutions|Serverless)-[A-Za-z0-9]+(?:\[[^\]`]+\])?)`", page))


def documented_checkov_rows() -> dict[str, str]:
    """checkov check id -> the reason in docs/compliance.md's table."""
    page = COMPLIANCE_PAGE.read_text()
    return {
        check_id: reason.strip()
        for check_id, reason in re.findall(r"^\| `(CKV_AWS_\d+)` \| [^|]+ \| ([^|]+) \|$", page, re.M)
    }


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_cdk_nag_finds_nothing_unacknowledged(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a configuration synthesized with the AwsSolutions and Serverless packs (cdk-nag 3.x as a
    # validation plugin in this venv; 2.x as Aspects in make test-min's)
    synthesized = all_configurations[configuration]
    # WHEN its findings are read
    # THEN something was checked and acknowledged, and nothing is left unacknowledged
    assert synthesized.nag_acknowledged
    assert synthesized.nag_findings == []


@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_every_acknowledgement_has_a_reason_listed_in_the_docs(
    all_configurations: dict[str, Synthesized], configuration: str
) -> None:
    # GIVEN the findings acknowledged in a configuration
    acknowledged = all_configurations[configuration].nag_acknowledged
    # WHEN they are compared with the docs' list
    # THEN each carries a reason, and each rule is explained in docs/compliance.md
    assert acknowledged
    for rule, reason in acknowledged:
        assert len(reason) > 40, rule
    assert {rule for rule, _ in acknowledged} <= documented_acknowledgements()


@pytest.mark.slow
@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_cfn_lint_passes(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a synthesized template
    template_path: Path = all_configurations[configuration].template_path
    # WHEN cfn-lint checks it (errors and warnings) in several regions
    matches = lint_file(template_path, config=ManualArgs(regions=LINT_REGIONS))
    # THEN it finds nothing but the accepted, justified warnings
    unexpected = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id not in ACCEPTED_CFN_LINT_RULES]
    assert unexpected == []


@pytest.fixture(scope="module")
def checkov_report(all_configurations: dict[str, Synthesized], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One checkov run (CloudFormation framework, every check) over every configuration's template."""
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} not found: run `make venv` (it creates .venv-checkov from requirements-checkov.txt)")
    directory = tmp_path_factory.mktemp("checkov")
    for name in CONFIGURATIONS:
        shutil.copy(all_configurations[name].template_path, directory / f"{name}.json")
    completed = subprocess.run(  # noqa: S603 - a fixed executable from the repository's venv
        [str(CHECKOV), "--directory", str(directory), "--framework", "cloudformation", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # checkov exits 1 when a check fails; the report says which.
    assert completed.returncode in (0, 1), completed.stderr[-2000:]
    return json.loads(completed.stdout)


def checkov_results(report: Any, configuration: str, kind: str) -> list[dict[str, Any]]:
    return [check for check in report["results"][kind] if Path(check["file_path"]).name == f"{configuration}.json"]


@pytest.mark.slow
@pytest.mark.parametrize("configuration", CONFIGURATIONS)
def test_checkov_finds_nothing_without_a_shipped_reason(checkov_report: Any, configuration: str) -> None:
    # GIVEN checkov's report on a configuration's template
    failed = checkov_results(checkov_report, configuration, "failed_checks")
    skipped = checkov_results(checkov_report, configuration, "skipped_checks")
    passed = checkov_results(checkov_report, configuration, "passed_checks")
    # WHEN its findings are read
    # THEN nothing failed, the template parsed, and every skip is one the construct ships, with its reason
    assert [f"{c['check_id']} {c['resource']}" for c in failed] == []
    assert checkov_report["results"]["parsing_errors"] == []
    assert passed
    for check in skipped:
        assert check["check_result"]["suppress_comment"] in ACCEPTED_CHECKOV_REASONS[check["check_id"]], check[
            "resource"
        ]


@pytest.mark.slow
def test_checkov_skips_follow_the_key(checkov_report: Any, cmk_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline (no key) and the CMK one
    default_skips = {
        (c["check_id"], c["resource"].split(".")[0])
        for c in checkov_results(checkov_report, "default", "skipped_checks")
    }
    cmk_skips = {c["check_id"] for c in checkov_results(checkov_report, "cmk", "skipped_checks")}
    cmk_passed = {c["check_id"] for c in checkov_results(checkov_report, "cmk", "passed_checks")}
    # WHEN the encryption checks are compared
    # THEN without a key they are skipped with the reason; with one they pass on their own
    assert {
        ("CKV_AWS_27", "AWS::SQS::Queue"),
        ("CKV_AWS_119", "AWS::DynamoDB::Table"),
        ("CKV_AWS_158", "AWS::Logs::LogGroup"),
    } <= default_skips
    assert {"CKV_AWS_27", "CKV_AWS_119", "CKV_AWS_158"} <= cmk_passed
    assert cmk_skips == {"CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115", "CKV_AWS_173"}


def test_checkov_suppressions_are_metadata_on_the_narrowest_resource(cmk_pipeline: Synthesized) -> None:
    # GIVEN the CMK pipeline
    resources = cmk_pipeline.template_json["Resources"]
    function = resources[logical_id(cmk_pipeline.stack, cmk_pipeline.pipeline.function)]
    queue = resources[logical_id(cmk_pipeline.stack, cmk_pipeline.pipeline.queue)]
    # WHEN the resources' metadata is read
    # THEN the function carries its four skips, each with id and comment; the queue carries none
    assert function["Metadata"]["checkov"] == {
        "skip": [
            {"id": check_id, "comment": SHIPPED_CHECKOV_REASONS[check_id]}
            for check_id in ("CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115", "CKV_AWS_173")
        ]
    }
    assert "checkov" not in queue.get("Metadata", {})


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            compliance.PipelineFacts(customer_managed_key=False, function_in_vpc=False, reserved_concurrency=False),
            [
                "CKV_AWS_27",
                "CKV_AWS_119",
                "CKV_AWS_158",
                "CKV_AWS_116",
                "CKV_AWS_116",  # the reconciler's
                "CKV_AWS_117",
                "CKV_AWS_115",
                "CKV_AWS_115",  # the reconciler's: it has no reserved concurrency of its own
                "CKV_AWS_173",
            ],
        ),
        (
            compliance.PipelineFacts(customer_managed_key=True, function_in_vpc=True, reserved_concurrency=True),
            ["CKV_AWS_116", "CKV_AWS_116", "CKV_AWS_115", "CKV_AWS_111", "CKV_AWS_173"],
        ),
    ],
)
def test_a_suppression_applies_only_where_its_reason_holds(
    facts: compliance.PipelineFacts, expected: list[str]
) -> None:
    # GIVEN a pipeline's facts (key, VPC, reserved concurrency)
    # WHEN the applicable suppressions are listed
    # THEN a VPC, reserved concurrency or a key each removes the skip it makes unnecessary
    assert [s.check_id for s in compliance.applicable(facts)] == expected


def test_docs_table_lists_every_checkov_suppression_with_its_reason() -> None:
    # GIVEN the suppressions the construct ships
    # WHEN the table of docs/compliance.md is read
    rows = documented_checkov_rows()
    # THEN it has one row per check id, with the same reason
    assert rows == SHIPPED_CHECKOV_REASONS


def test_log_group_is_encrypted_with_the_customer_managed_key(cmk_pipeline: Synthesized) -> None:
    # GIVEN a pipeline with encryption_key
    stack = cmk_pipeline.stack
    key = logical_id(stack, stack.node.find_child("PipelineKey"))
    resources = cmk_pipeline.template_json["Resources"]
    log_group = resources[logical_id(stack, cmk_pipeline.pipeline.node.find_child("FunctionLogGroup"))]
    # WHEN the log group and the key policy are read
    statements = {s.get("Sid"): s for s in resources[key]["Properties"]["KeyPolicy"]["Statement"]}
    # THEN the log group uses the key, and the key lets this region's CloudWatch Logs use it for
    # this account's log groups only (the encryption context names the log group)
    assert log_group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    statement = statements["LetCloudWatchLogsEncryptThePipelineLogGroup"]
    assert statement["Principal"] == {
        "Service": {"Fn::Join": ["", ["logs.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]]}
    }
    assert statement["Action"] == [
        "kms:Encrypt",
        "kms:Decrypt",
        "kms:ReEncryptFrom",
        "kms:ReEncryptTo",
        "kms:GenerateDataKey",
        "kms:GenerateDataKeyWithoutPlaintext",
        "kms:DescribeKey",
    ]
    assert statement["Condition"] == {
        "ArnLike": {
            "kms:EncryptionContext:aws:logs:arn": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":logs:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        ":log-group:*",
                    ],
                ]
            }
        }
    }


def test_log_group_without_a_key_is_not_encrypted_with_one(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    log_group = default_pipeline.template_json["Resources"][
        logical_id(default_pipeline.stack, default_pipeline.pipeline.node.find_child("FunctionLogGroup"))
    ]
    # WHEN its encryption is read
    # THEN CloudWatch Logs' own encryption applies (no key to depend on)
    assert "KmsKeyId" not in log_group["Properties"]


def test_an_imported_key_warns_that_its_policy_must_allow_cloudwatch_logs() -> None:
    # GIVEN a pipeline with an imported key (its policy cannot be changed by this stack)
    import aws_cdk as cdk
    from aws_cdk import aws_kms
    from aws_cdk.assertions import Annotations, Match

    from idempotent_order_pipeline import IdempotentOrderPipeline

    stack = cdk.Stack(cdk.App(), "ImportedKeyStack")
    key = aws_kms.Key.from_key_arn(
        stack, "Key", "arn:aws:kms:eu-west-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    )
    IdempotentOrderPipeline(stack, "Pipeline", encryption_key=key)
    # WHEN the annotations are read
    # THEN a warning says what the key's owner must allow
    Annotations.from_stack(stack).has_warning(
        "/ImportedKeyStack/Pipeline",
        Match.string_like_regexp("encryption_key is imported: its key policy must let logs"),
    )


# ---- parliament: every IAM policy document -----------------------------------------------------------

#: parliament runs from its own virtualenv (requirements-parliament.lock; `make venv` creates it).
PARLIAMENT_PYTHON = Path(os.environ.get("PARLIAMENT_PYTHON", REPO / ".venv-parliament" / "bin" / "python"))
POLICY_CONFIGURATIONS = [*CONFIGURATIONS, "trust"]


@dataclass(frozen=True)
class PolicyFinding:
    """A parliament finding this design answers: its issue, on which documents, and why it stands."""

    issue: str
    #: A regular expression on ``<logical id>.<property>`` of the documents it holds for.
    documents: str
    reason: str


#: Every parliament finding on the synthesized policies, explained (docs/compliance.md lists them too).
POLICY_FINDINGS = (
    PolicyFinding(
        "MALFORMED",
        r"\.AssumeRolePolicyDocument$",
        "A role's trust policy names who may assume it and never a Resource; parliament reads every document "
        "as an identity policy, which must have one.",
    ),
    PolicyFinding(
        "RESOURCE_STAR",
        r"\.KeyPolicy$",
        'In a key policy, Resource "*" is the key itself: a key policy can name nothing else.',
    ),
    PolicyFinding(
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        r"\.KeyPolicy$",
        "The account root's kms:* statement (aws-cdk-lib's default key policy): it lets the account's IAM "
        "policies grant the key, and without it the key could not be managed at all.",
    ),
    PolicyFinding(
        "UNKNOWN_CONDITION_FOR_ACTION",
        r"\.KeyPolicy$",
        "The CloudWatch Logs statement as its user guide writes it: every action, DescribeKey included, under "
        "kms:EncryptionContext:aws:logs:arn.",
    ),
    PolicyFinding(
        "MISMATCHED_TYPE",
        r"\.KeyPolicy$",
        "kms:EncryptionContext:aws:logs:arn and :aws:sqs:arn hold ARNs, compared with ArnLike as the CloudWatch "
        "Logs user guide does; parliament types every encryption-context key as a string.",
    ),
    PolicyFinding(
        "RESOURCE_MISMATCH",
        r"RoleDefaultPolicy[0-9A-F]{8}\.PolicyDocument$",
        "The network-interface actions on arn:aws:ec2:<region>:<account>:*/*, the form the Lambda developer "
        "guide gives (every resource id of the account and region); parliament expects one ARN per resource type.",
    ),
    PolicyFinding(
        "RESOURCE_MISMATCH",
        r"DynamoDbEndpoint[0-9A-F]{8}\.PolicyDocument$",
        "The DynamoDB gateway endpoint allows every action on this account's tables of the region: actions on "
        "global tables or on no table (ListTables, DescribeEndpoints) are not allowed through it, which is what "
        "parliament reports.",
    ),
)


@pytest.fixture(scope="module")
def policy_findings(
    all_configurations: dict[str, Synthesized], trust_boundaries: Synthesized, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One parliament run over every policy document of every configuration, and the documents."""
    if not PARLIAMENT_PYTHON.exists():
        pytest.fail(f"{PARLIAMENT_PYTHON} not found: run `make venv` (it creates .venv-parliament)")
    configurations = {**all_configurations, "trust": trust_boundaries}
    documents = {
        f"{name}:{document_name}": document
        for name in POLICY_CONFIGURATIONS
        for document_name, document in policy_documents(configurations[name].template_json).items()
    }
    path = tmp_path_factory.mktemp("parliament") / "policies.json"
    path.write_text(json.dumps(documents), encoding="utf-8")
    completed = subprocess.run(  # noqa: S603 - a fixed interpreter from the repository's venv, our script
        [str(PARLIAMENT_PYTHON), str(REPO / "tools" / "policy_lint.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return {"documents": documents, "findings": json.loads(completed.stdout)}


def explanation(finding: dict[str, Any]) -> PolicyFinding | None:
    document = finding["policy"].split(":", 1)[1]
    for known in POLICY_FINDINGS:
        if known.issue == finding["issue"] and re.search(known.documents, document):
            return known
    return None


@pytest.mark.slow
def test_parliament_finds_nothing_unexplained(policy_findings: dict[str, Any]) -> None:
    # GIVEN parliament's findings on every identity, resource, key, trust and endpoint policy of every
    # configuration (dev, prod, a CMK, a VPC with the endpoints, same-account and cross-account grants)
    documents, findings = policy_findings["documents"], policy_findings["findings"]
    kinds = {name.rsplit(".", 1)[1] for name in documents}
    assert {"PolicyDocument", "KeyPolicy", "AssumeRolePolicyDocument"} <= kinds
    assert any("Endpoint" in name for name in documents)
    # WHEN each is matched with the findings this design answers
    unexplained = [finding for finding in findings if explanation(finding) is None]
    # THEN none is left unexplained, and every explanation is still needed
    assert unexplained == []
    used = {explanation(finding) for finding in findings}
    assert [known for known in POLICY_FINDINGS if known not in used] == []


@pytest.mark.slow
def test_parliament_reports_an_unconditioned_wildcard_it_is_not_told_about(tmp_path: Path) -> None:
    # GIVEN an identity policy allowing every SQS action on every queue, and one naming an action that
    # does not exist
    if not PARLIAMENT_PYTHON.exists():
        pytest.fail(f"{PARLIAMENT_PYTHON} not found: run `make venv` (it creates .venv-parliament)")
    path = tmp_path / "policies.json"
    statement = {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}
    typo = {"Effect": "Allow", "Action": "sqs:SendMesage", "Resource": "arn:aws:sqs:eu-west-1:123456789012:q"}
    path.write_text(
        json.dumps(
            {
                "x:Wide.PolicyDocument": {"Version": "2012-10-17", "Statement": [statement]},
                "x:Typo.PolicyDocument": {"Version": "2012-10-17", "Statement": [typo]},
            }
        )
    )
    # WHEN the linter runs on them
    completed = subprocess.run(  # noqa: S603 - a fixed interpreter from the repository's venv, our script
        [str(PARLIAMENT_PYTHON), str(REPO / "tools" / "policy_lint.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    findings = json.loads(completed.stdout)
    # THEN it reports both, and neither is among the explained findings
    assert {(f["policy"], f["issue"]) for f in findings} >= {
        ("x:Wide.PolicyDocument", "RESOURCE_STAR"),
        ("x:Typo.PolicyDocument", "UNKNOWN_ACTION"),
    }
    assert [f for f in findings if explanation(f) is not None] == []


def documented_policy_findings() -> list[tuple[str, str]]:
    """(issue, reason) of each row of docs/compliance.md's parliament table."""
    section = COMPLIANCE_PAGE.read_text(encoding="utf-8").split("## parliament", 1)[1]
    return [
        (row[0].strip("` "), row[2].strip())
        for line in section.splitlines()
        if line.startswith("| `")
        for row in [line.strip("|").split(" | ")]
    ]


def test_docs_list_every_explained_policy_finding_with_its_reason() -> None:
    # GIVEN the explained parliament findings
    # WHEN docs/compliance.md's parliament table is read
    # THEN it lists each, in order, with the same reason
    assert documented_policy_findings() == [(known.issue, known.reason) for known in POLICY_FINDINGS]
