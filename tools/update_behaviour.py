"""Write infra/idempotent_order_pipeline/update_behaviour.json: which property changes replace a resource.

``order-pipeline upgrade-check`` decides from two templates alone, without AWS, whether CloudFormation
replaces a resource. It needs each resource type's update behaviour, which CloudFormation's resource
schemas state: a property in ``createOnlyProperties`` cannot change in place ("Update requires:
Replacement"), one in ``conditionalCreateOnlyProperties`` may ("Some interruptions or replacement",
depending on the change). cfn-lint ships those schemas (the test stack's pinned cfn-lint, us-east-1);
the wheel must not depend on cfn-lint (41 MB), so this script extracts the types the library's
constructs and a team's stacks around them make (:data:`TYPES`) into a small table shipped with the
package. ``tests/infra/test_update_behaviour.py`` checks the table is what this script writes today and
that it covers every type of every snapshot.

Where the schemas say less than CloudFormation's resource specification, :data:`SPECIFICATION`
adds the specification's ``UpdateType: Immutable`` properties (cited there).

    .venv/bin/python tools/update_behaviour.py          # rewrite the table
    .venv/bin/python tools/update_behaviour.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from importlib import metadata, resources
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "infra" / "idempotent_order_pipeline" / "update_behaviour.json"
REGION = "us-east-1"
#: The resource types the table covers: those of IdempotentOrderPipeline, IdempotentSubscriber, their
#: options (VPC endpoints, SnapStart, a customer-managed key) and the stacks around them in this
#: repository and its docs.
TYPES = (
    "AWS::CloudWatch::Alarm",
    "AWS::CloudWatch::CompositeAlarm",
    "AWS::CloudWatch::Dashboard",
    "AWS::DynamoDB::GlobalTable",
    "AWS::DynamoDB::Table",
    "AWS::EC2::FlowLog",
    "AWS::EC2::RouteTable",
    "AWS::EC2::SecurityGroup",
    "AWS::EC2::SecurityGroupEgress",
    "AWS::EC2::SecurityGroupIngress",
    "AWS::EC2::Subnet",
    "AWS::EC2::SubnetRouteTableAssociation",
    "AWS::EC2::VPC",
    "AWS::EC2::VPCEndpoint",
    "AWS::Events::Rule",
    "AWS::IAM::ManagedPolicy",
    "AWS::IAM::Policy",
    "AWS::IAM::Role",
    "AWS::KMS::Alias",
    "AWS::KMS::Key",
    "AWS::Lambda::Alias",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::Lambda::EventSourceMapping",
    "AWS::Lambda::Function",
    "AWS::Lambda::LayerVersion",
    "AWS::Lambda::Permission",
    "AWS::Lambda::Version",
    "AWS::Logs::LogGroup",
    "AWS::S3::Bucket",
    "AWS::SNS::Subscription",
    "AWS::SNS::Topic",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
    "AWS::SSM::Parameter",
)
#: Replacing properties the CloudFormation resource specification marks ``UpdateType: Immutable``
#: where the registry schema lists them as conditional or not at all.
SPECIFICATION: Mapping[str, tuple[str, ...]] = {
    # Resource specification, AWS::DynamoDB::Table: KeySchema and LocalSecondaryIndexes are Immutable
    # (the schema lists KeySchema as conditionally create-only, LocalSecondaryIndexes not at all).
    "AWS::DynamoDB::Table": ("KeySchema", "LocalSecondaryIndexes"),
}


def _paths(pointers: list[str] | None) -> list[str]:
    """Schema pointers (``/properties/KeySchema``, ``/properties/A/B``) as property paths (``KeySchema``, ``A/B``)."""
    return sorted({pointer.removeprefix("/properties/") for pointer in pointers or []})


def build() -> dict[str, Any]:
    """The table from the installed cfn-lint's schemas."""
    schemas = resources.files("cfnlint") / "data" / "schemas"
    providers = json.loads((schemas / "providers" / f"{REGION}.json").read_text())
    date = json.loads((schemas / "version.json").read_text()).get("schema_date", "?")
    types: dict[str, Any] = {}
    for type_name in TYPES:
        schema = json.loads((schemas / "resources" / f"{providers[type_name]}.json").read_text())
        replace = set(_paths(schema.get("createOnlyProperties")))
        may_replace = set(_paths(schema.get("conditionalCreateOnlyProperties")))
        replace |= set(SPECIFICATION.get(type_name, ()))
        types[type_name] = {"replace": sorted(replace), "may_replace": sorted(may_replace - replace)}
    return {
        "source": f"CloudFormation resource schemas ({REGION}, {date}) as cfn-lint {metadata.version('cfn-lint')} "
        f"ships them, written by tools/update_behaviour.py",
        "types": types,
    }


def render(table: Mapping[str, Any]) -> str:
    """The table as JSON, one line per type (a reviewable diff when the schemas change)."""
    lines = [
        f"  {json.dumps(name)}: {json.dumps(rules, sort_keys=True)}" for name, rules in sorted(table["types"].items())
    ]
    return '{\n "source": ' + json.dumps(table["source"]) + ',\n "types": {\n' + ",\n".join(lines) + "\n }\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed table is out of date")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        if not TABLE.exists() or TABLE.read_text() != text:
            print(f"{TABLE.relative_to(REPO)} is out of date: run {Path(__file__).relative_to(REPO)}", file=sys.stderr)
            return 1
        return 0
    TABLE.write_text(text)
    print(f"wrote {TABLE.relative_to(REPO)} ({len(TYPES)} types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
