"""The order schema at run time: the compiled validator a pipeline's asset carries, and what a violation says.

With the construct's ``order_schema`` prop, the construct generates the schema's validator as Python
code at synth (``fastjsonschema``'s code generator, the one Powertools' validation utility uses) and
ships it in the function's asset as ``order_consumer/order_schema_validator.py``: no size limit that
matters (unlike the environment's 4 KB), no compilation at a cold start, and nothing to import but
this module (the generated code raises :class:`SchemaRuleError`). Without the prop the file is not
there and the consumer validates nothing but its message contract.

The consumer checks the message body (the order as sent, ``event_id`` included when the producer set
it) after the message contract and before any write; the producer client and ``order-pipeline send``
run the same generated code on the same body before sending (``idempotent_order_pipeline.order_schema``),
so both say the same :func:`violation_message`, which names the JSON path and the rule.

Standard library only: the Lambda asset ships it, and the library imports it from the distribution.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import SchemaViolationError

#: The generated validator's module, in the asset package of a pipeline with an ``order_schema``.
VALIDATOR_MODULE = "order_schema_validator"
#: The root of every path a violation names (``$.items[2].sku``).
ROOT_PATH = "$"


class SchemaRuleError(ValueError):
    """The value at ``name`` (a JSON path) breaks the schema's ``rule``: raised by the generated validator."""

    def __init__(
        self,
        message: str,
        value: Any = None,
        name: str | None = None,
        definition: Any = None,
        rule: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.value = value
        self.name = name
        self.definition = definition
        self.rule = rule


class SchemaRulesError(ValueError):
    """Several rules broken at once (the generator's collect-all mode, which the pipeline does not use)."""

    def __init__(self, errors: list[SchemaRuleError]) -> None:
        self.message = "; ".join(error.message for error in errors)
        super().__init__(self.message)
        self.errors = errors


# The names the generated code imports (fastjsonschema's own, so the code needs no change but its import).
JsonSchemaValueException = SchemaRuleError
JsonSchemaValuesException = SchemaRulesError


def violation_message(error: SchemaRuleError) -> str:
    """What breaks the schema, where: ``$.amount must be bigger than or equal to 0 (rule: minimum)``."""
    return f"the order does not match order_schema: {error.message} (rule: {error.rule or 'unknown'})"[:1000]


@dataclass(frozen=True)
class OrderSchema:
    """A compiled order schema: ``validate`` is the generated function (data, name_prefix=...)."""

    validate: Callable[..., Any]

    def check(self, body: str) -> None:
        """Check a message body (valid JSON: the message contract was checked first).

        Raises:
            SchemaViolationError: the order breaks the schema (the message names the path and the rule).
        """
        try:
            self.validate(json.loads(body), name_prefix=ROOT_PATH)
        except SchemaRuleError as exc:
            raise SchemaViolationError(violation_message(exc)) from None


def load_order_schema(package: str) -> OrderSchema | None:
    """The validator shipped in the asset package ``package``, None when the pipeline has no schema."""
    name = f"{package}.{VALIDATOR_MODULE}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None
    return OrderSchema(module.validate)
