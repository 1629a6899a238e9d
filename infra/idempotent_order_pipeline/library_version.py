"""The library's version in the synthesized template, so that a snapshot or a ``cdk diff`` shows it moved.

Each ``IdempotentOrderPipeline`` and ``IdempotentSubscriber`` records itself in its stack's template
``Metadata`` section (one call at construction)::

    "Metadata": {
      "idempotent_order_pipeline": {
        "version": "0.3.0.dev0",
        "constructs": {"Orders": "IdempotentOrderPipeline", "Shipper": "IdempotentSubscriber"}
      }
    }

``constructs`` maps each construct's path inside its stack to its class. One entry per stack, not one
per resource: an upgrade of the library is one changed line in a snapshot or a ``cdk diff``, next to
the functions' code whose asset hashes :func:`idempotent_order_pipeline.testing.snapshot_template`
masks. The template's ``Metadata`` section is free-form for CloudFormation and changes nothing deployed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from idempotent_order_pipeline import __version__
from idempotent_order_pipeline.discovery import METADATA_KEY

if TYPE_CHECKING:
    from constructs import Construct

#: The key of the version inside :data:`~idempotent_order_pipeline.discovery.METADATA_KEY`'s entry.
VERSION_KEY = "version"
#: The key of the constructs recorded (path inside the stack -> class name).
CONSTRUCTS_KEY = "constructs"


def mark_library_version(construct: Construct) -> None:
    """Record the library's version and ``construct`` (its path and class) in its stack's template metadata."""
    from aws_cdk import Stack  # here, not at the top: upgrade-check reads templates without the CDK

    stack = Stack.of(construct)
    recorded: dict[str, Any] = dict((stack.template_options.metadata or {}).get(METADATA_KEY) or {})
    constructs = dict(recorded.get(CONSTRUCTS_KEY) or {})
    path = construct.node.path.removeprefix(f"{stack.node.path}/") if stack.node.path else construct.node.path
    constructs[path] = type(construct).__name__
    stack.add_metadata(METADATA_KEY, {VERSION_KEY: __version__, CONSTRUCTS_KEY: constructs})


def library_version_of(template: Mapping[str, Any]) -> str | None:
    """The library version a synthesized or deployed template records (None: none, e.g. before 0.3.0)."""
    metadata = template.get("Metadata")
    entry = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
    version = entry.get(VERSION_KEY) if isinstance(entry, Mapping) else None
    return version if isinstance(version, str) else None
