"""How a deployed stack tells which of its resources belong to which ``IdempotentOrderPipeline``.

The construct marks each resource an operator needs with CloudFormation resource metadata::

    "Metadata": {"idempotent_order_pipeline": {"pipeline": "Shop/Orders", "role": "queue"}}

``pipeline`` is the construct's path inside its stack (the same in every stage), ``role`` is the
construct attribute the resource is (:data:`ROLES`). The stack itself then says where every
pipeline is: its template (``GetTemplate``) holds the marks by logical id, its resources
(``ListStackResources``) the physical ids. No output, export or tag is needed, so any number of
pipelines fit in one stack, and an app names its outputs as it likes.

A pipeline with an ``order_schema`` carries the schema in its function's mark too, as its one JSON
text and that text's SHA-256 (``"order_schema": "{...}", "order_schema_sha256": "..."``): the
producer client and ``order-pipeline send`` check orders against it before sending. The text is the
one the consumer's validator was generated from (``idempotent_order_pipeline.order_schema.schema_text``);
a string passes the CDK's bridge to Node unchanged, where an object would lose its ``null`` values,
round integers above 2**53 and fail on a key named ``__proto__``. A reader checks the hash and refuses
a schema that does not match it. The template is where it fits: the CLI reads it already, a template
holds up to 1 MB (a stack output 1,024 characters, a tag 256, an SSM parameter 8 KB), and the
function's asset (the same schema, compiled) could only be read through a code download URL.

:func:`mark` runs at synth (called once by the construct); :func:`pipelines_in` reads a deployed
template on the operator's side and imports nothing of the CDK.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from idempotent_order_pipeline.construct import IdempotentOrderPipeline

#: The resource metadata key (one per marked resource).
METADATA_KEY = "idempotent_order_pipeline"
#: The function's mark holds the pipeline's ``order_schema`` (its JSON text) under this key (absent: no schema).
ORDER_SCHEMA_KEY = "order_schema"
#: ... and the SHA-256 of that text (hex) under this one.
ORDER_SCHEMA_SHA256_KEY = "order_schema_sha256"
#: The marked roles: construct attribute -> what its CloudFormation physical id is.
ROLES: Mapping[str, str] = {
    "queue": "queue URL",
    "dead_letter_queue": "queue URL",
    "processed_events_table": "table name",
    "order_records_table": "table name",
    "topic": "topic ARN",
    "function": "function name",
}


def mark(pipeline: IdempotentOrderPipeline) -> None:
    """Add the discovery metadata to the pipeline's queue, DLQ, tables, topic and function."""
    stack_path = _stack_path(pipeline)
    path = pipeline.node.path.removeprefix(f"{stack_path}/") if stack_path else pipeline.node.path
    schema = pipeline.order_schema
    for role in ROLES:
        resource = getattr(pipeline, role).node.default_child
        if resource is None:
            # An existing resource handed in (``existing_queue=...``): it lives elsewhere, so the
            # operator CLI finds it through the function's environment and event source instead.
            continue
        marked: dict[str, Any] = {"pipeline": path, "role": role}
        if role == "function" and schema is not None:
            from idempotent_order_pipeline.order_schema import schema_sha256, schema_text

            text = schema_text(schema)
            marked[ORDER_SCHEMA_KEY] = text
            marked[ORDER_SCHEMA_SHA256_KEY] = schema_sha256(text)
        resource.add_metadata(METADATA_KEY, marked)


def _stack_path(pipeline: IdempotentOrderPipeline) -> str:
    from aws_cdk import Stack  # here, not at the top: the CLI imports this module without the CDK

    return Stack.of(pipeline).node.path


@dataclass(frozen=True)
class DiscoveredPipeline:
    """One pipeline of a deployed stack: its construct path and the physical id of each role."""

    path: str
    physical_ids: Mapping[str, str] = field(default_factory=dict)
    logical_ids: Mapping[str, str] = field(default_factory=dict)
    #: The pipeline's ``order_schema`` (None: it has none, or it is refused: see ``order_schema_problem``).
    order_schema: Mapping[str, Any] | None = None
    #: Its JSON text, as the consumer's validator was generated from it.
    order_schema_text: str | None = None
    #: Why the mark's schema is refused (its hash does not match, it is not JSON text); None: it is not.
    order_schema_problem: str | None = None

    @property
    def construct_id(self) -> str:
        """The last part of the path (``Orders`` for ``Shop/Orders``)."""
        return self.path.rsplit("/", 1)[-1]

    def matches(self, selector: str) -> bool:
        """Whether ``--pipeline selector`` could name this pipeline: its path in the stack, a full
        path ending with it (``dev/Shop/Orders``), or its construct id. :func:`select` decides
        between several candidates."""
        selector = selector.strip("/")
        return selector in (self.path, self.construct_id) or selector.endswith(f"/{self.path}")


def select(pipelines: Sequence[DiscoveredPipeline], selector: str) -> list[DiscoveredPipeline]:
    """The pipelines ``--pipeline selector`` names, by the most exact spelling that names any.

    1. the pipeline whose path in the stack is the selector (``Sales/Orders``, or ``Orders`` for a
       pipeline at the stack's top level);
    2. else the pipeline whose path ends the selector, a full path with the stage and stack in front
       (``prod/Shop/Sales/Orders``): the longest such path, the most specific;
    3. else the pipelines whose construct id is the selector (``Orders``).

    So pipelines ``Orders`` and ``Sales/Orders`` in one stack are each selected by their path. More
    than one result means the selector is ambiguous (``Orders`` for ``Sales/Orders`` and
    ``Returns/Orders``); none, that it names no pipeline.
    """
    selector = selector.strip("/")
    exact = [p for p in pipelines if p.path == selector]
    if exact:
        return exact
    by_full_path = [p for p in pipelines if selector.endswith(f"/{p.path}")]
    if by_full_path:
        longest = max(len(p.path) for p in by_full_path)
        return [p for p in by_full_path if len(p.path) == longest]
    return [p for p in pipelines if p.construct_id == selector]


def pipelines_in(template: Mapping[str, Any], physical_ids: Mapping[str, str]) -> list[DiscoveredPipeline]:
    """Every marked pipeline of a deployed template, sorted by path.

    ``physical_ids`` maps logical ids to physical ids (``ListStackResources``); a marked resource
    the stack did not create (yet) is left out of ``physical_ids`` but kept in ``logical_ids``.
    """
    found: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    schemas: dict[str, tuple[Mapping[str, Any] | None, str | None, str | None]] = {}
    for logical_id, resource in (template.get("Resources") or {}).items():
        metadata = resource.get("Metadata") if isinstance(resource, Mapping) else None
        marked = metadata.get(METADATA_KEY) if isinstance(metadata, Mapping) else None
        if not isinstance(marked, Mapping) or marked.get("role") not in ROLES:
            continue
        path, role = marked.get("pipeline"), marked["role"]
        if not isinstance(path, str):
            continue
        physical, logical = found.setdefault(path, ({}, {}))
        if role == "function" and ORDER_SCHEMA_KEY in marked:
            schemas[path] = _schema_of(logical_id, marked)
        logical[role] = logical_id
        if logical_id in physical_ids:
            physical[role] = physical_ids[logical_id]
    return [
        DiscoveredPipeline(path, physical, logical, *schemas.get(path, (None, None, None)))
        for path, (physical, logical) in sorted(found.items())
    ]


def _schema_of(logical_id: str, marked: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None, str | None]:
    """(schema, its text, None), or (None, None, why it is refused), from a function's mark."""
    text, expected = marked.get(ORDER_SCHEMA_KEY), marked.get(ORDER_SCHEMA_SHA256_KEY)
    where = f"the order_schema in {logical_id}'s {METADATA_KEY} metadata"
    if not isinstance(text, str):
        return None, None, f"{where} is not its JSON text (a template written by another version): redeploy the stack"
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != expected:
        return (
            None,
            None,
            f"{where} does not match its {ORDER_SCHEMA_SHA256_KEY}: refusing a schema that is not the consumer's",
        )
    try:
        schema = json.loads(text)
    except ValueError as exc:
        return None, None, f"{where} is not JSON: {exc}"
    if not isinstance(schema, Mapping):
        return None, None, f"{where} is not a JSON object"
    return schema, text, None
