"""The ``order_schema`` prop: checked at synth, compiled to Python code, shipped with the function.

* **One document** (:func:`schema_text`): the schema becomes one JSON text at synth (ASCII, so no
  encoding can change it). The generated validator is compiled from that text and carries it
  (``SCHEMA_JSON``, ``SCHEMA_SHA256``); the function's discovery metadata carries the same text and
  hash as strings (:mod:`idempotent_order_pipeline.discovery`), which the CDK's bridge to Node passes
  through unchanged (it drops ``null`` and rounds integers above 2**53 in objects, and cannot carry a
  key named ``__proto__``); the producer and the CLI read it back, check the hash and compile the
  same text into the same code.
* **Checked at synth** (:func:`schema_problems`): the schema must be a JSON object valid against its
  dialect's meta-schema (``jsonschema``'s ``check_schema``), and one the generator can compile
  completely; every problem names ``order_schema`` and the schema path (``$.properties.amount.type``).
  Dialects: draft 2020-12 (also when ``$schema`` is absent), draft-07, draft-06 and draft-04.
* **Compiled** (:func:`validator_code`): :mod:`idempotent_order_pipeline.schema_codegen` generates the
  validator as Python code that speaks the schema's own dialect (no rewrite into another one), with
  exact numbers, ECMA-262 regexes and asserted formats; what it cannot do is refused at synth.
* **Shipped** (:func:`asset_directory`): a copy of the consumer's asset with the generated module
  (``order_consumer/order_schema_validator.py``, importing the standard library and
  ``order_consumer.contract`` only), so the asset needs nothing else and the environment's 4 KB limit
  does not apply.
* **The producer's check** (:func:`compile_order_schema`): the same generated code, run on the same
  message body, so a bad order is refused before sending with the consumer's message.

``jsonschema`` is imported only when a schema is given.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from idempotent_order_pipeline import schema_codegen
from idempotent_order_pipeline._lambda_asset.order_consumer.contract import order_schema as runtime
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.order_schema import OrderSchema

PROP = schema_codegen.PROP
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
#: ``$schema`` values accepted (with or without the trailing ``#``), by name.
DIALECTS = {
    "https://json-schema.org/draft/2020-12/schema": schema_codegen.DRAFT_2020_12,
    "http://json-schema.org/draft-07/schema": schema_codegen.DRAFT_07,
    "http://json-schema.org/draft-06/schema": schema_codegen.DRAFT_06,
    "http://json-schema.org/draft-04/schema": schema_codegen.DRAFT_04,
}
#: The formats the validator asserts (any other ``format`` is refused at synth).
ASSERTED_FORMATS = tuple(schema_codegen.FORMATS)
_ASSET_PACKAGE = "idempotent_order_pipeline._lambda_asset.order_consumer"


def dialect(schema: Mapping[str, Any]) -> str | None:
    """The dialect's name (``draft 2020-12`` when ``$schema`` is absent), None for one not supported."""
    uri = schema.get("$schema", DRAFT_2020_12)
    return DIALECTS.get(uri.rstrip("#")) if isinstance(uri, str) else None


def schema_text(schema: Mapping[str, Any]) -> str:
    """The schema as the one JSON text every side compiles (ASCII, compact, keys in the given order).

    Raises:
        ValueError: the schema has no JSON form (a set, a NaN, a non-string key, ...).
    """
    return json.dumps(schema, ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def schema_sha256(text: str) -> str:
    """The hash the template carries beside :func:`schema_text`, checked by whoever reads it back."""
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _meta_problems(schema: Mapping[str, Any], name: str) -> list[str]:
    from jsonschema import validators  # the meta-schemas; only when a schema is given

    validator_class = validators.validator_for(schema, default=validators.Draft202012Validator)
    meta = validator_class(validator_class.META_SCHEMA)
    return [
        f"{PROP}: invalid JSON Schema ({name}) at {error.json_path}: {error.message}"[:500]
        for error in sorted(meta.iter_errors(schema), key=lambda error: [str(part) for part in error.path])
    ]


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
        text = schema_text(schema)
    except (TypeError, ValueError) as exc:
        return [f"{PROP}: not JSON: {exc}"]
    except RecursionError:
        return [f"{PROP}: nested too deeply to be written as JSON"]
    return _meta_problems(schema, name) or _code(text, name)[1]


def _code(text: str, name: str) -> tuple[str, list[str]]:
    try:
        return schema_codegen.generate(text, name)
    except RecursionError:
        return "", [f"{PROP}: nested too deeply for the validator"]


def validator_code(schema: Mapping[str, Any]) -> str:
    """The validator of a checked schema as the Python module the asset ships.

    Raises:
        ValueError: the schema cannot be compiled (every problem, each naming ``order_schema``).
    """
    return validator_code_from_text(schema_text(schema), dialect(schema) or schema_codegen.DRAFT_2020_12)


def validator_code_from_text(text: str, name: str | None = None) -> str:
    """The validator module for the schema's JSON text (as the template carries it)."""
    if name is None:
        parsed = schema_codegen.parse_schema_text(text)
        name = (dialect(parsed) if isinstance(parsed, Mapping) else None) or schema_codegen.DRAFT_2020_12
    code, problems = _code(text, name)
    if problems:
        raise ValueError("; ".join(problems))
    return code


def compile_order_schema(schema: Mapping[str, Any] | str) -> OrderSchema:
    """The schema's validator in this process, from the same generated code the consumer runs.

    ``schema`` is the schema (a dict) or its JSON text (as :func:`schema_text` wrote it, e.g. read back
    from a deployed template).

    Raises:
        ValueError: the schema cannot be an order schema (every problem, each naming ``order_schema``).
    """
    document = json.loads(schema) if isinstance(schema, str) else schema
    problems = schema_problems(document)
    if problems:
        raise ValueError("; ".join(problems))
    text = schema if isinstance(schema, str) else schema_text(schema)
    code = validator_code_from_text(text)
    name = f"{_ASSET_PACKAGE}.{runtime.VALIDATOR_MODULE}_{hashlib.sha256(code.encode()).hexdigest()[:16]}"
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__package__ = (
            _ASSET_PACKAGE  # the generated code's relative import resolves to this distribution's asset
        )
        exec(compile(code, f"<{PROP} validator>", "exec"), module.__dict__)  # noqa: S102 - code generated from the schema
        sys.modules.setdefault(name, module)
    return OrderSchema(module.validate, text)


def asset_directory(schema: Mapping[str, Any], outdir: Path | None = None) -> Path:
    """A copy of the consumer's asset root with the schema's generated validator in the package.

    The copy is made under ``outdir`` (default: a new temporary directory); the CDK hashes its content,
    so the same schema gives the same asset.
    """
    from idempotent_order_pipeline import asset  # the CDK's: at synth only (the producer imports this module)

    root = Path(tempfile.mkdtemp(prefix="order-pipeline-asset-", dir=outdir))
    shutil.copytree(asset.lambda_asset_path(), root, dirs_exist_ok=True, ignore=asset.copy_ignore)
    package = root / "order_consumer"
    (package / f"{runtime.VALIDATOR_MODULE}.py").write_text(validator_code(schema), encoding="utf-8")
    return root
