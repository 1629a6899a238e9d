"""The construct marks its resources so the operator CLI can find every pipeline of a stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from constructs import Construct

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline.discovery import METADATA_KEY, ROLES, pipelines_in
from tests.infra.synth import SynthesizedApp, logical_id


@pytest.fixture(scope="module")
def two_pipelines(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, dict[str, IdempotentOrderPipeline]]:
    """A stack of two pipelines, one nested one level deeper, in a stage (as an adopter's app may be)."""
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("two")))
    stack = cdk.Stack(cdk.Stage(app, "prod"), "Shop")
    group = Construct(stack, "Sales")
    pipelines = {
        "Orders": IdempotentOrderPipeline(stack, "Orders"),
        "Returns": IdempotentOrderPipeline(group, "Returns", fifo=True),
    }
    app.synth()
    return stack, pipelines


def _template(stack: cdk.Stack) -> dict[str, Any]:
    stage = cdk.Stage.of(stack)
    assert stage is not None
    template: dict[str, Any] = json.loads((Path(stage.outdir) / stack.template_file).read_text())
    return template


def test_every_role_of_every_pipeline_is_marked_with_its_path_in_the_stack(
    two_pipelines: tuple[cdk.Stack, dict[str, IdempotentOrderPipeline]],
) -> None:
    # GIVEN a stack with two pipelines
    stack, pipelines = two_pipelines
    # WHEN its template is synthesized
    resources = _template(stack)["Resources"]
    # THEN each pipeline's six role resources carry {pipeline: path in the stack, role}
    for path, pipeline in (("Orders", pipelines["Orders"]), ("Sales/Returns", pipelines["Returns"])):
        for role in ROLES:
            resource = resources[logical_id(stack, getattr(pipeline, role))]
            assert resource["Metadata"][METADATA_KEY] == {"pipeline": path, "role": role}
    # AND nothing else is marked
    marked = [r for r in resources.values() if METADATA_KEY in r.get("Metadata", {})]
    assert len(marked) == 2 * len(ROLES)


def test_the_marks_map_each_role_to_its_physical_id(
    two_pipelines: tuple[cdk.Stack, dict[str, IdempotentOrderPipeline]],
) -> None:
    # GIVEN the template and physical ids as a deployed stack would list them
    stack, pipelines = two_pipelines
    template = _template(stack)
    physical = {logical: f"physical-{logical}" for logical in template["Resources"]}
    # WHEN the pipelines are read from it
    found = pipelines_in(template, physical)
    # THEN there are both, sorted by path, each role pointing at the construct's resource
    assert [(p.path, p.construct_id) for p in found] == [("Orders", "Orders"), ("Sales/Returns", "Returns")]
    returns = found[1]
    assert returns.physical_ids == {
        role: f"physical-{logical_id(stack, getattr(pipelines['Returns'], role))}" for role in ROLES
    }
    # AND a pipeline is selected by id, path in the stack or full path
    assert [returns.matches(s) for s in ("Returns", "Sales/Returns", "prod/Shop/Sales/Returns", "Orders")] == [
        True,
        True,
        True,
        False,
    ]


def test_app_stage_marks_its_pipeline(synthesized_app: SynthesizedApp) -> None:
    # GIVEN app.py's prod stage, WHEN its template is read, THEN its one pipeline is found
    template = synthesized_app.stages["prod"].template_json
    [pipeline] = pipelines_in(template, {logical: logical for logical in template["Resources"]})
    assert pipeline.path == "Pipeline"
    assert set(pipeline.physical_ids) == set(ROLES)
