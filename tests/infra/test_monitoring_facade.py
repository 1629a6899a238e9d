"""docs/operations.md's cdk-monitoring-constructs example, run as written: the facade raises the pipeline's alarms."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch

from idempotent_order_pipeline.monitoring import ALARM_KEYS, SCHEMA_ALARM_KEYS
from tests.infra.synth import REPO, resources_of_type

#: TreatMissingData as CloudFormation spells it.
CLOUDFORMATION_MISSING_DATA = {
    aws_cloudwatch.TreatMissingData.BREACHING: "breaching",
    aws_cloudwatch.TreatMissingData.NOT_BREACHING: "notBreaching",
    aws_cloudwatch.TreatMissingData.IGNORE: "ignore",
    aws_cloudwatch.TreatMissingData.MISSING: "missing",
}


def facade_example() -> str:
    page = (REPO / "docs" / "operations.md").read_text()
    section = page.split("\n## Monitoring with cdk-monitoring-constructs\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


def test_the_documented_facade_raises_every_alarm_the_construct_leaves_to_it(tmp_path: Path) -> None:
    # GIVEN the example of docs/operations.md, writing its cloud assembly under tmp_path
    code = facade_example().replace("cdk.App()", f"cdk.App(outdir={str(tmp_path)!r})")
    namespace: dict[str, Any] = {}
    # WHEN it runs as written
    exec(compile(code, "docs/operations.md", "exec"), namespace)  # noqa: S102  (our own docs)
    stack: cdk.Stack = namespace["stack"]
    pipeline = namespace["pipeline"]
    template = json.loads((tmp_path / stack.template_file).read_text())
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm")
    # THEN the construct created none, and the facade created one per alarm definition, with the
    # construct's threshold, periods, missing-data treatment and description (the runbook link included)
    assert dict(pipeline.alarms) == {}
    # (the example's pipeline has no order_schema, so no schema_violations alarm)
    assert set(pipeline.alarm_definitions) == set(ALARM_KEYS) - set(SCHEMA_ALARM_KEYS)
    assert len(alarms) == len(ALARM_KEYS) - len(SCHEMA_ALARM_KEYS)
    by_description = {alarm["Properties"]["AlarmDescription"]: alarm["Properties"] for alarm in alarms.values()}
    for key, definition in pipeline.alarm_definitions.items():
        properties = by_description[definition.description]
        assert f"Runbook ({key})" in definition.description
        assert properties["Threshold"] == definition.threshold, key
        assert properties["EvaluationPeriods"] == definition.evaluation_periods, key
        assert properties["DatapointsToAlarm"] == definition.datapoints_to_alarm, key
        assert properties["TreatMissingData"] == CLOUDFORMATION_MISSING_DATA[definition.treat_missing_data], key
    # AND the facade's own dashboards hold the metrics
    assert resources_of_type(template, "AWS::CloudWatch::Dashboard")
