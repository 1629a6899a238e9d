"""Helpers for a team's own tests of stacks that use the library (no test framework imported).

:func:`snapshot_template` is the template of a stack as a snapshot test compares it, with syrupy::

    from syrupy.extensions.json import JSONSnapshotExtension
    from idempotent_order_pipeline.testing import snapshot_template

    def test_shop(snapshot):
        assert snapshot_template(build_shop_stack()) == snapshot.use_extension(JSONSnapshotExtension)

or with plain pytest against a committed JSON file. docs/construct.md ("Snapshot tests") says what
it masks and expands, and how an upgrade of the library shows in the diff.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from idempotent_order_pipeline.templates import ASSET_MASK, BOOTSTRAP_MASK, normalized

if TYPE_CHECKING:
    from aws_cdk import Stack

__all__ = ["ASSET_MASK", "BOOTSTRAP_MASK", "normalized", "snapshot_template"]


def snapshot_template(stack: Stack) -> dict[str, Any]:
    """``stack``'s synthesized template, JSON-ready: asset hashes and S3 keys masked (the library version
    kept), the bootstrap version masked, JSON-string bodies such as a dashboard's expanded into objects
    (tokens kept), every mapping's keys sorted (:func:`idempotent_order_pipeline.templates.normalized`).

    Synthesizes the stack's app (as ``aws_cdk.assertions.Template.from_stack`` does).
    """
    from aws_cdk.assertions import Template

    return normalized(Template.from_stack(stack).to_json())
