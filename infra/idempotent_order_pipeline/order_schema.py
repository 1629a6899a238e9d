"""The ``order_schema`` prop: checked at synth, compiled to Python code, shipped with the function.

* **Checked at synth** (:func:`schema_problems`): the schema must be a JSON object valid against its
  dialect's meta-schema (``jsonschema``'s ``check_schema``); every problem names ``order_schema`` and
  the schema path (``$.properties.amount.type``). Dialects: draft 2020-12 (also when ``$schema`` is
  absent), draft-07, draft-06 and draft-04.
* **Compiled** (:func:`validator_code`): ``fastjsonschema`` (the validator Powertools' validation
  utility uses) generates the validator as Python code at synth. Its generator speaks draft-04 to
  draft-07, so a 2020-12 schema is first written in draft-07 terms (:func:`as_draft07`): ``prefixItems``
  and ``items`` become ``items`` and ``additionalItems``, ``dependentRequired`` and ``dependentSchemas``
  become ``dependencies``, a ``$ref`` with other keywords beside it becomes an ``allOf``. The keywords
  draft-07 has no equivalent for (``unevaluatedProperties``, ``unevaluatedItems``, ``$dynamicRef``,
  ``minContains``, ...) and references outside the schema (synthesis never calls the network) are
  errors at synth, never silently ignored. ``format`` is asserted (as Powertools does).
* **Shipped** (:func:`asset_directory`): a copy of the consumer's asset with the generated module
  (``order_consumer/order_schema_validator.py``, importing nothing but
  :mod:`order_consumer.contract.order_schema`), so the asset needs nothing else and the environment's
  4 KB limit does not apply.
* **The producer's check** (:func:`compile_order_schema`): the same generated code, run on the same
  message body, so a bad order is refused before sending with the consumer's message. The operator
  CLI finds the schema in the deployed template (the function's discovery metadata,
  :mod:`idempotent_order_pipeline.discovery`).

``jsonschema`` and ``fastjsonschema`` are imported only when a schema is given.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import order_schema as runtime
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.order_schema import OrderSchema

PROP = "order_schema"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
#: ``$schema`` values accepted (with or without the trailing ``#``), by name.
DIALECTS = {
    "https://json-schema.org/draft/2020-12/schema": "draft 2020-12",
    "http://json-schema.org/draft-07/schema": "draft-07",
    "http://json-schema.org/draft-06/schema": "draft-06",
    "http://json-schema.org/draft-04/schema": "draft-04",
}
#: 2020-12 keywords draft-07 cannot express: an error at synth, never ignored.
UNSUPPORTED_KEYWORDS = (
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "minContains",
    "maxContains",
    "$anchor",
    "$vocabulary",
)
# Where subschemas sit: one schema, a list of schemas, or a mapping of names to schemas.
_ONE = (
    "items",
    "additionalItems",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
)
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: The import the generated code starts with (its exception classes), and what it becomes in the asset.
_GENERATED_IMPORT = re.compile(r"^from fastjsonschema import [\w, ]+$", flags=re.MULTILINE)
_ASSET_IMPORT = "from .contract.order_schema import JsonSchemaValueException, JsonSchemaValuesException"
_ASSET_PACKAGE = "idempotent_order_pipeline._lambda_asset.order_consumer"


def dialect(schema: Mapping[str, Any]) -> str | None:
    """The dialect's name (``draft 2020-12`` when ``$schema`` is absent), None for one not supported."""
    uri = schema.get("$schema", DRAFT_2020_12)
    return DIALECTS.get(uri.rstrip("#")) if isinstance(uri, str) else None


def _path(parts: Sequence[str | int]) -> str:
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)


def _subschemas(schema: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], Any]]:
    """(relative path, subschema) for every direct subschema of ``schema``."""
    found: list[tuple[tuple[str | int, ...], Any]] = []
    for key in _ONE:
        if key in schema and not isinstance(schema[key], list):
            found.append(((key,), schema[key]))
    for key in (*_LIST, "items"):
        if isinstance(schema.get(key), list):
            found.extend(((key, index), sub) for index, sub in enumerate(schema[key]))
    for key in _MAP:
        if isinstance(schema.get(key), Mapping):
            found.extend(((key, name), sub) for name, sub in schema[key].items())
    dependencies = schema.get("dependencies")
    if isinstance(dependencies, Mapping):
        found.extend((("dependencies", name), sub) for name, sub in dependencies.items() if isinstance(sub, Mapping))
    return found


def _compile_problems(schema: Mapping[str, Any], is_2020: bool) -> list[str]:
    """What the compiled validator cannot do: keywords without a draft-07 form, references outside the schema."""
    problems: list[str] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), schema)]
    while stack:
        where, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            problems.append(
                f"{PROP}: {_path((*where, '$ref'))}: {ref!r} is outside the schema; only references into the "
                "schema itself (#/...) are allowed (synthesis never calls the network)"
            )
        if is_2020:
            for keyword in UNSUPPORTED_KEYWORDS:
                if keyword in node:
                    problems.append(
                        f"{PROP}: {_path((*where, keyword))}: {keyword} is not supported by the compiled validator "
                        "(draft-07 has no equivalent); express the rule with other keywords"
                    )
        stack.extend(((*where, *part), sub) for part, sub in _subschemas(node))
    return problems


def schema_problems(schema: object) -> list[str]:
    """Every reason ``schema`` cannot be a pipeline's order schema (empty: it can), each naming ``order_schema``."""
    if not isinstance(schema, Mapping):
        return [f"{PROP}={schema!r:.80}: expected a JSON Schema object (a dict)"]
    name = dialect(schema)
    if name is None:
        return [
            f"{PROP}: $.$schema={schema.get('$schema')!r:.120}: allowed {', '.join(sorted(DIALECTS))} "
            "(absent: draft 2020-12)"
        ]
    try:
        json.dumps(schema, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return [f"{PROP}: not JSON: {exc}"]
    from jsonschema import validators  # the meta-schemas; only when a schema is given

    validator_class = validators.validator_for(schema, default=validators.Draft202012Validator)
    meta = validator_class(validator_class.META_SCHEMA)
    problems = [
        f"{PROP}: invalid JSON Schema ({name}) at {error.json_path}: {error.message}"[:500]
        for error in sorted(meta.iter_errors(schema), key=lambda error: list(error.path))
    ]
    return problems or _compile_problems(schema, name == "draft 2020-12")


def as_draft07(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A checked 2020-12 schema in draft-07 terms (what the code generator speaks); other dialects as given."""
    if dialect(schema) != "draft 2020-12":
        return dict(schema)
    translated: dict[str, Any] = _draft07(schema)
    translated["$schema"] = DRAFT_07
    return translated


def _draft07(node: Any) -> Any:
    if isinstance(node, list):
        return [_draft07(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _MAP or key == "dependencies":
            result[key] = {name: _draft07(sub) for name, sub in value.items()}
        elif key in _ONE or key in _LIST:
            result[key] = _draft07(value)
        else:
            result[key] = value
    if "prefixItems" in result:
        prefix = result.pop("prefixItems")
        rest = result.pop("items", None)
        result["items"] = prefix
        if rest is not None:
            result["additionalItems"] = rest
    dependencies = dict(result.pop("dependentRequired", {}))
    dependencies.update(result.pop("dependentSchemas", {}))
    if dependencies:
        result["dependencies"] = {**result.get("dependencies", {}), **dependencies}
    if "$ref" in result and len(result) > 1:
        # 2020-12 applies a $ref's siblings; draft-07 ignores them, unless they sit beside it in an allOf.
        ref = result.pop("$ref")
        kept: dict[str, Any] = {
            key: result.pop(key) for key in ("$schema", "$id", "$defs", "definitions") if key in result
        }
        result = {**kept, "allOf": [{"$ref": ref}, result]}
    return result


def validator_code(schema: Mapping[str, Any]) -> str:
    """The validator of a checked schema as the Python module the asset ships.

    Raises:
        ValueError: the code generator refused the schema (naming ``order_schema``).
    """
    import fastjsonschema  # the code generator; only when a schema is given

    try:
        code = fastjsonschema.compile_to_code(as_draft07(schema), handlers={})
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        raise ValueError(f"{PROP}: the validator cannot be generated: {exc}") from exc
    code, imports = _GENERATED_IMPORT.subn(_ASSET_IMPORT, code)
    if imports != 1 or re.search(r"^\s*(from|import)\s+fastjsonschema\b", code, flags=re.MULTILINE):
        # A generator that imports anything else would make the asset depend on it: refuse, never ship that.
        raise ValueError(f"{PROP}: unexpected code from fastjsonschema {fastjsonschema.VERSION}")
    header = (
        '"""The order schema\'s validator, generated at synth by idempotent_order_pipeline.order_schema '
        '(fastjsonschema.compile_to_code). Do not edit."""\n\n'
    )
    return header + code


def compile_order_schema(schema: Mapping[str, Any]) -> OrderSchema:
    """The schema's validator in this process, from the same generated code the consumer runs.

    Raises:
        ValueError: the schema cannot be an order schema (every problem, each naming ``order_schema``).
    """
    problems = schema_problems(schema)
    if problems:
        raise ValueError("; ".join(problems))
    code = validator_code(schema)
    name = f"{_ASSET_PACKAGE}.{runtime.VALIDATOR_MODULE}_{hashlib.sha256(code.encode()).hexdigest()[:16]}"
    module = types.ModuleType(name)
    module.__package__ = _ASSET_PACKAGE  # the generated code's relative import resolves to this distribution's asset
    exec(compile(code, f"<{PROP} validator>", "exec"), module.__dict__)  # noqa: S102 - code generated from the schema
    sys.modules.setdefault(name, module)
    return OrderSchema(module.validate)


def asset_directory(schema: Mapping[str, Any], outdir: Path | None = None) -> Path:
    """A copy of the consumer's asset root with the schema's generated validator in the package.

    The copy is made under ``outdir`` (default: a new temporary directory); the CDK hashes its content,
    so the same schema gives the same asset.
    """
    from idempotent_order_pipeline import asset  # the CDK's: at synth only (the producer imports this module)

    root = Path(tempfile.mkdtemp(prefix="order-pipeline-asset-", dir=outdir))
    shutil.copytree(
        asset.lambda_asset_path(), root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*asset.ASSET_EXCLUDES)
    )
    package = root / "order_consumer"
    (package / f"{runtime.VALIDATOR_MODULE}.py").write_text(validator_code(schema), encoding="utf-8")
    return root
