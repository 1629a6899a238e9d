"""An order schema's validator, generated as Python code that speaks the schema's own dialect.

:func:`generate` turns a JSON Schema (its JSON text, parsed with exact numbers) into the source of
a module whose ``validate(data, path)`` returns every broken rule as ``(path, what, keyword)``. It
reads draft 2020-12 (also when ``$schema`` is absent), draft-07, draft-06 and draft-04 with each
one's meaning: 2020-12's ``prefixItems``, ``dependentRequired``, ``dependentSchemas``,
``minContains``/``maxContains`` and a ``$ref`` that applies beside its siblings; draft-07's array
``items``, ``additionalItems``, ``dependencies`` and a ``$ref`` that replaces its siblings; draft-04's
boolean ``exclusiveMaximum``. No schema is rewritten into another dialect.

What the generated code does:

* **Numbers exactly.** The schema's numbers are ints and :class:`~decimal.Decimal` constants; the data
  it checks has fractions as Decimal (``order_consumer.contract.order_schema.parse_order``);
  ``multipleOf`` is integer arithmetic; ``1.0`` is an integer, ``1.0000000000000000001`` is not.
* **Annotations never decide.** ``default``, ``examples``, ``title``, ``description``, ``deprecated``,
  ``readOnly``, ``writeOnly``, ``$comment`` and the ``content*`` keywords generate nothing: the data
  is never changed, and a verdict never depends on them.
* **JSON's equality** for ``enum``, ``const`` and ``uniqueItems``: ``1 == 1.0``, ``true != 1``.
* **ECMA-262 regexes** (``order_consumer.contract.ecma_regex``) for ``pattern`` and
  ``patternProperties``, searched (not anchored), as JSON Schema says.
* **``format`` asserted**, by the checkers of ``order_consumer.contract.schema_formats``.

What it refuses, each a problem naming ``order_schema`` and the schema path (the construct raises them
together as one ``ValueError``): references outside the schema (synthesis never calls the network)
and ``$id`` inside it, ``unevaluatedProperties``/``unevaluatedItems`` and the dynamic references
(``$dynamicRef``, ``$recursiveRef``), another dialect's keywords (``dependencies`` in 2020-12,
``prefixItems`` in draft-07: each names what to write instead), a ``format`` it does not assert, a
regex it cannot translate, and a ``$ref`` cycle that never reaches into the data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.ecma_regex import UnsupportedRegex, translate
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.schema_formats import FORMATS

__all__ = ["DRAFT_04", "DRAFT_06", "DRAFT_07", "DRAFT_2020_12", "FORMATS", "PROP", "generate", "parse_schema_text"]

PROP = "order_schema"
DRAFT_2020_12 = "draft 2020-12"
DRAFT_07 = "draft-07"
DRAFT_06 = "draft-06"
DRAFT_04 = "draft-04"
#: The generated module's docstring.
GENERATED_DOCSTRING = "The order schema's validator, generated at synth by idempotent_order_pipeline.schema_codegen."
#: Keywords that generate no code (annotations, and containers of subschemas reached by ``$ref``).
ANNOTATIONS = (
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
)
#: Keywords the generated code cannot evaluate: refused, never ignored.
UNSUPPORTED = {
    "unevaluatedProperties": "needs the annotations of every applicator; use additionalProperties",
    "unevaluatedItems": "needs the annotations of every applicator; use items",
    "$dynamicRef": "dynamic references are not supported; use $ref",
    "$dynamicAnchor": "dynamic references are not supported; use $anchor",
    "$recursiveRef": "a draft 2019-09 keyword; use $ref",
    "$recursiveAnchor": "a draft 2019-09 keyword",
}
#: Another dialect's keywords, refused (the schema's author meant a rule), with what to write instead.
_FOREIGN = {
    DRAFT_2020_12: {
        "dependencies": "use dependentRequired (a list) or dependentSchemas (a schema)",
        "additionalItems": "use prefixItems with items",
    },
    DRAFT_07: {
        "prefixItems": "use an items array (with additionalItems)",
        "dependentRequired": "use dependencies",
        "dependentSchemas": "use dependencies",
        "minContains": "not in draft-07",
        "maxContains": "not in draft-07",
        "$anchor": 'use "$id": "#name"',
    },
}
_FOREIGN[DRAFT_06] = {
    **_FOREIGN[DRAFT_07],
    "if": "a draft-07 keyword",
    "then": "a draft-07 keyword",
    "else": "a draft-07 keyword",
}
_FOREIGN[DRAFT_04] = {
    **_FOREIGN[DRAFT_06],
    "const": "a draft-06 keyword; use enum",
    "contains": "a draft-06 keyword",
    "propertyNames": "a draft-06 keyword",
}
#: Keywords whose value is one subschema, a list of them, or a mapping of names to them.
_ONE = ("additionalItems", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Split the generated code into another function past these depths (Python's parser allows 100
# indentation levels and 20 nested blocks).
_MAX_INDENT = 30
_MAX_LOOPS = 6
#: The longest rendering of a schema value (enum, const) in a violation's text.
_MAX_VALUE_TEXT = 200


class _Refused(Exception):
    """A construct of the schema the generator cannot compile (the message says where and why)."""


@dataclass(frozen=True)
class _At:
    """Where generation is: the instance's variable, its JSON path (an expression), the error list."""

    data: str
    path: str
    errs: str
    indent: int
    loops: int
    #: The schema path, for problems.
    where: tuple[str | int, ...]
    #: The instance is the current function's own argument (a ``$ref`` here does not descend).
    in_place: bool


def _schema_path(parts: Sequence[str | int]) -> str:
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)


def _number_text(value: int | Decimal) -> str:
    return str(value)


def _value_text(value: Any) -> str:
    """A schema value as a violation names it (Python's spelling, numbers as written)."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name!r}: {_value_text(item)}" for name, item in value.items()) + "}"
    return repr(value)


class _Generator:
    def __init__(self, root: Any, dialect: str) -> None:
        self.root = root
        self.dialect = dialect
        self.problems: list[str] = []
        self.constants: list[str] = []
        self._constant_names: dict[str, str] = {}
        self.functions: list[list[str]] = []
        self._ref_functions: dict[int, str] = {}
        self._counter = 0
        # In-place calls between ref functions (caller -> callees), for the cycle check.
        self._calls: dict[str, set[str]] = {}
        self._current = "validate"
        self.base = ""
        self.anchors: dict[str, Any] = {}
        if isinstance(root, dict):
            base = root.get("id" if dialect == DRAFT_04 else "$id")
            if isinstance(base, str):
                self.base = urldefrag(base)[0]
        self._collect_anchors(root, ())

    # Names and constants.

    def name(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def constant(self, source: str, prefix: str = "_c") -> str:
        """A module-level constant (computed once at import) for the Python expression ``source``."""
        if source not in self._constant_names:
            name = self.name(prefix)
            self._constant_names[source] = name
            self.constants.append(f"{name} = {source}")
        return self._constant_names[source]

    def number(self, value: int | Decimal) -> str:
        if isinstance(value, int):
            return repr(value)
        return self.constant(f"Decimal({str(value)!r})")

    def problem(self, where: Sequence[str | int], text: str) -> None:
        self.problems.append(f"{PROP}: {_schema_path(where)}: {text}")

    # The schema's shape.

    def _collect_anchors(self, node: Any, where: tuple[str | int, ...]) -> None:
        if not isinstance(node, dict):
            return
        anchor = node.get("$anchor") if self.dialect == DRAFT_2020_12 else None
        if isinstance(anchor, str):
            self.anchors[anchor] = node
        identifier = node.get("id" if self.dialect == DRAFT_04 else "$id")
        if where and isinstance(identifier, str):
            if identifier.startswith("#") and self.dialect != DRAFT_2020_12:
                self.anchors[identifier[1:]] = node
            else:
                self.problem(
                    (*where, "$id"),
                    f"{identifier!r:.120}: an $id inside the schema is not supported; put the subschema in "
                    "$defs and reference it with #/$defs/...",
                )
        for part, sub in _subschemas(node, self.dialect):
            self._collect_anchors(sub, (*where, *part))

    def resolve(self, ref: str) -> Any:
        full = urljoin(self.base, ref) if self.base else ref
        document, fragment = urldefrag(full)
        if document != self.base:
            raise _Refused(
                f"{ref!r:.120} is outside the schema; only references into the schema itself are allowed "
                "(synthesis never calls the network)"
            )
        if not fragment.startswith("/") and fragment:
            if fragment in self.anchors:
                return self.anchors[fragment]
            raise _Refused(f"{ref!r:.120}: no anchor {fragment!r:.80} in the schema")
        node: Any = self.root
        for token in fragment.split("/")[1:] if fragment else []:
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise _Refused(f"{ref!r:.120} points at nothing in the schema")
        if not isinstance(node, dict | bool):
            raise _Refused(f"{ref!r:.120} points at a value that is not a schema")
        return node

    # Code.

    def compile_root(self) -> list[str]:
        lines = ["def validate(data, path='$'):", "    errs = []"]
        at = _At("data", "path", "errs", 1, 0, (), True)
        lines.extend(self.node(self.root, at))
        lines.append("    return errs")
        self._check_cycles()
        return lines

    def function_for(self, schema: Any, where: tuple[str | int, ...], key: int | None) -> str:
        """A function ``name(d, path, errs)`` checking ``schema``; by ``key`` once (a $ref target)."""
        if key is not None and key in self._ref_functions:
            return self._ref_functions[key]
        name = self.name("_v")
        if key is not None:
            self._ref_functions[key] = name
        caller, self._current = self._current, name
        body = self.node(schema, _At("d", "path", "errs", 1, 0, where, True))
        self._current = caller
        self.functions.append([f"def {name}(d, path, errs):", *(body or ["    pass"])])
        return name

    def call(self, function: str, at: _At) -> list[str]:
        if at.in_place:
            self._calls.setdefault(self._current, set()).add(function)
        return [_line(at.indent, f"{function}({at.data}, {at.path}, {at.errs})")]

    def _check_cycles(self) -> None:
        visiting: set[str] = set()
        done: set[str] = set()

        def visit(name: str, chain: list[str]) -> bool:
            if name in visiting:
                return True
            if name in done:
                return False
            visiting.add(name)
            cyclic = any(visit(callee, [*chain, callee]) for callee in self._calls.get(name, ()))
            visiting.discard(name)
            done.add(name)
            return cyclic

        if any(visit(name, [name]) for name in list(self._calls)):
            self.problem((), "a $ref cycle that never reaches into the data (it would never end)")

    def node(self, schema: Any, at: _At) -> list[str]:
        """The code checking ``schema`` against ``at.data``, appending to ``at.errs``."""
        if schema is True:
            return []
        if schema is False:
            return [self.fail(at, at.path, "must not be there (the schema is false)", "false")]
        if not isinstance(schema, dict):
            return []
        if at.indent > _MAX_INDENT or at.loops > _MAX_LOOPS:
            return self.call(self.function_for(schema, at.where, None), at)
        lines: list[str] = []
        for keyword, why in (*UNSUPPORTED.items(), *_FOREIGN.get(self.dialect, {}).items()):
            if keyword in schema:
                self.problem((*at.where, keyword), f"{keyword} is not supported in {self.dialect} ({why})")
        if "$ref" in schema and isinstance(schema["$ref"], str):
            try:
                target = self.resolve(schema["$ref"])
            except _Refused as refused:
                self.problem((*at.where, "$ref"), str(refused))
            else:
                lines.extend(self.call(self.function_for(target, at.where, id(target)), at))
            if self.dialect != DRAFT_2020_12:
                return lines  # before 2019-09, $ref replaces its siblings
        lines.extend(self.types(schema, at))
        lines.extend(self.values(schema, at))
        lines.extend(self.numbers(schema, at))
        lines.extend(self.strings(schema, at))
        lines.extend(self.arrays(schema, at))
        lines.extend(self.objects(schema, at))
        lines.extend(self.applicators(schema, at))
        return lines

    def fail(self, at: _At, path: str, text: str, rule: str, *, dynamic: str | None = None) -> str:
        message = repr(text) if dynamic is None else f"{text!r} + {dynamic}"
        return _line(at.indent, f"{at.errs}.append(({path}, {message}, {rule!r}))")

    def sub(self, at: _At, **changes: Any) -> _At:
        return replace(at, **changes)

    # type, enum, const

    def types(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        if "type" not in schema:
            return []
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        checks = [_type_check(name, at.data) for name in names]
        if not checks:
            return []
        condition = " or ".join(checks)
        return [
            _line(at.indent, f"if not ({condition}):"),
            self.fail(self.sub(at, indent=at.indent + 1), at.path, "must be " + " or ".join(names), "type"),
        ]

    def values(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        lines: list[str] = []
        inner = self.sub(at, indent=at.indent + 1)
        if "enum" in schema and isinstance(schema["enum"], list):
            members = schema["enum"]
            text = "must be one of " + _value_text(members)[:_MAX_VALUE_TEXT]
            if members and all(isinstance(member, str) for member in members):
                names = self.constant(f"frozenset({sorted(set(members))!r})", "_e")
                lines.append(_line(at.indent, f"if not (isinstance({at.data}, str) and {at.data} in {names}):"))
            else:
                keys = self.constant(f"frozenset(map(json_key, {_python(members)}))", "_e")
                lines.append(_line(at.indent, f"if json_key({at.data}) not in {keys}:"))
            lines.append(self.fail(inner, at.path, text, "enum"))
        if "const" in schema:
            value = schema["const"]
            text = "must be " + _value_text(value)[:_MAX_VALUE_TEXT]
            if isinstance(value, str):
                lines.append(_line(at.indent, f"if not (isinstance({at.data}, str) and {at.data} == {value!r}):"))
            else:
                key = self.constant(f"json_key({_python(value)})", "_k")
                lines.append(_line(at.indent, f"if json_key({at.data}) != {key}:"))
            lines.append(self.fail(inner, at.path, text, "const"))
        return lines

    # numbers

    def numbers(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        inner = self.sub(at, indent=at.indent + 1)
        deeper = self.sub(at, indent=at.indent + 2)
        body: list[str] = []
        d = at.data
        bounds: list[tuple[str, str, str, str]] = []  # (keyword, operator that fails, text, value)

        def numeric(keyword: str) -> int | Decimal | None:
            value = schema.get(keyword)
            return value if isinstance(value, int | Decimal) and not isinstance(value, bool) else None

        minimum, maximum = numeric("minimum"), numeric("maximum")
        if self.dialect == DRAFT_04:
            if minimum is not None:
                exclusive = schema.get("exclusiveMinimum") is True
                bounds.append(
                    (
                        "minimum",
                        "<=" if exclusive else "<",
                        "must be bigger than" + ("" if exclusive else " or equal to"),
                        self.number(minimum),
                    )
                )
            if maximum is not None:
                exclusive = schema.get("exclusiveMaximum") is True
                bounds.append(
                    (
                        "maximum",
                        ">=" if exclusive else ">",
                        "must be smaller than" + ("" if exclusive else " or equal to"),
                        self.number(maximum),
                    )
                )
            texts = {"minimum": minimum, "maximum": maximum}
        else:
            exclusive_minimum, exclusive_maximum = numeric("exclusiveMinimum"), numeric("exclusiveMaximum")
            for keyword, value, operator, text in (
                ("minimum", minimum, "<", "must be bigger than or equal to"),
                ("maximum", maximum, ">", "must be smaller than or equal to"),
                ("exclusiveMinimum", exclusive_minimum, "<=", "must be bigger than"),
                ("exclusiveMaximum", exclusive_maximum, ">=", "must be smaller than"),
            ):
                if value is not None:
                    bounds.append((keyword, operator, text, self.number(value)))
            texts = {
                "minimum": minimum,
                "maximum": maximum,
                "exclusiveMinimum": exclusive_minimum,
                "exclusiveMaximum": exclusive_maximum,
            }
        for keyword, operator, text, bound in bounds:
            shown = texts[keyword]
            assert shown is not None
            body.append(_line(inner.indent, f"if {d} {operator} {bound}:"))
            body.append(self.fail(deeper, at.path, f"{text} {_number_text(shown)}", keyword))
        factor = numeric("multipleOf")
        if factor is not None:
            body.append(_line(inner.indent, f"if not is_multiple({d}, {self.number(factor)}):"))
            body.append(self.fail(deeper, at.path, f"must be multiple of {_number_text(factor)}", "multipleOf"))
        if not body:
            return []
        return [_line(at.indent, f"if {_type_check('number', d)}:"), *body]

    # strings

    def strings(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        inner = self.sub(at, indent=at.indent + 1)
        deeper = self.sub(at, indent=at.indent + 2)
        d = at.data
        body: list[str] = []
        for keyword, operator, text in (
            ("minLength", "<", "must be longer than or equal to {} characters"),
            ("maxLength", ">", "must be shorter than or equal to {} characters"),
        ):
            value = _count(schema.get(keyword))
            if value is not None:
                body.append(_line(inner.indent, f"if len({d}) {operator} {value}:"))
                body.append(self.fail(deeper, at.path, text.format(value), keyword))
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            search = self.regex(pattern, (*at.where, "pattern"))
            if search is not None:
                body.append(_line(inner.indent, f"if {search}({d}) is None:"))
                body.append(self.fail(deeper, at.path, f"must match pattern {pattern}"[:_MAX_VALUE_TEXT], "pattern"))
        name = schema.get("format")
        if isinstance(name, str):
            if name in FORMATS:
                checker = self.constant(f"FORMATS[{name!r}]", "_f")
                body.append(_line(inner.indent, f"if not {checker}({d}):"))
                body.append(self.fail(deeper, at.path, f"must be {name}", "format"))
            else:
                self.problem(
                    (*at.where, "format"),
                    f"format {name!r:.80} is not asserted by the validator (asserted: {', '.join(FORMATS)}); "
                    "remove it, or say the rule with pattern",
                )
        if not body:
            return []
        return [_line(at.indent, f"if isinstance({d}, str):"), *body]

    def regex(self, pattern: str, where: tuple[str | int, ...]) -> str | None:
        try:
            translated = translate(pattern)
        except UnsupportedRegex as exc:
            self.problem(where, f"{exc}; JSON Schema regexes are ECMA-262")
            return None
        return self.constant(f"re.compile({translated!r}).search", "_p")

    # arrays

    def arrays(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        d = at.data
        inner = self.sub(at, indent=at.indent + 1)
        deeper = self.sub(at, indent=at.indent + 2)
        body: list[str] = []
        for keyword, operator, text in (
            ("minItems", "<", "must contain at least {} items"),
            ("maxItems", ">", "must contain at most {} items"),
        ):
            value = _count(schema.get(keyword))
            if value is not None:
                body.append(_line(inner.indent, f"if len({d}) {operator} {value}:"))
                body.append(self.fail(deeper, at.path, text.format(value), keyword))
        if schema.get("uniqueItems") is True:
            body.append(_line(inner.indent, f"if not unique_items({d}):"))
            body.append(self.fail(deeper, at.path, "must contain unique items", "uniqueItems"))
        prefix: list[Any]
        if self.dialect == DRAFT_2020_12:
            prefix = schema["prefixItems"] if isinstance(schema.get("prefixItems"), list) else []
            rest, rest_keyword = schema.get("items"), "items"
        else:
            items = schema.get("items")
            prefix = items if isinstance(items, list) else []
            rest, rest_keyword = (
                (schema.get("additionalItems"), "additionalItems") if isinstance(items, list) else (items, "items")
            )
        prefix_keyword = "prefixItems" if self.dialect == DRAFT_2020_12 else "items"
        for index, sub in enumerate(prefix):
            if sub is True:
                continue
            item = self.name("d")
            checks = self.node(
                sub,
                self.sub(
                    at,
                    data=item,
                    path=f"{at.path} + '[{index}]'",
                    indent=deeper.indent,
                    where=(*at.where, prefix_keyword, index),
                    in_place=False,
                ),
            )
            if checks:
                body.append(_line(inner.indent, f"if len({d}) > {index}:"))
                body.append(_line(deeper.indent, f"{item} = {d}[{index}]"))
                body.extend(checks)
        if rest is not None and rest is not True:
            index_name, item = self.name("i"), self.name("d")
            start = f"range({len(prefix)}, len({d}))" if prefix else f"range(len({d}))"
            checks = self.node(
                rest,
                self.sub(
                    at,
                    data=item,
                    path=f"{at.path} + '[%d]' % {index_name}",
                    indent=deeper.indent,
                    loops=at.loops + 1,
                    where=(*at.where, rest_keyword),
                    in_place=False,
                ),
            )
            if checks:
                body.append(_line(inner.indent, f"for {index_name} in {start}:"))
                body.append(_line(deeper.indent, f"{item} = {d}[{index_name}]"))
                body.extend(checks)
        if "contains" in schema and self.dialect != DRAFT_04:
            body.extend(self.contains(schema, at, inner))
        if not body:
            return []
        return [_line(at.indent, f"if isinstance({d}, list):"), *body]

    def contains(self, schema: Mapping[str, Any], at: _At, inner: _At) -> list[str]:
        least = _count(schema.get("minContains", 1)) if self.dialect == DRAFT_2020_12 else 1
        most = _count(schema.get("maxContains")) if self.dialect == DRAFT_2020_12 else None
        least = 1 if least is None else least
        if least == 0 and most is None:
            return []
        count, item, errs = self.name("n"), self.name("d"), self.name("e")
        loop = self.sub(inner, indent=inner.indent + 1)
        lines = [
            _line(inner.indent, f"{count} = 0"),
            _line(inner.indent, f"for {item} in {at.data}:"),
            _line(loop.indent, f"{errs} = []"),
            *self.node(
                schema["contains"],
                self.sub(
                    at,
                    data=item,
                    path=at.path,
                    errs=errs,
                    indent=loop.indent,
                    loops=at.loops + 1,
                    where=(*at.where, "contains"),
                    in_place=False,
                ),
            ),
            _line(loop.indent, f"if not {errs}:"),
            _line(loop.indent + 1, f"{count} += 1"),
        ]
        deeper = self.sub(inner, indent=inner.indent + 1)
        lines.append(_line(inner.indent, f"if {count} < {least}:"))
        lines.append(
            self.fail(
                deeper,
                at.path,
                f"must contain at least {least} item(s) matching contains",
                "minContains" if "minContains" in schema else "contains",
            )
        )
        if most is not None:
            lines.append(_line(inner.indent, f"if {count} > {most}:"))
            lines.append(
                self.fail(deeper, at.path, f"must contain at most {most} item(s) matching contains", "maxContains")
            )
        return lines

    # objects

    def objects(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        d = at.data
        inner = self.sub(at, indent=at.indent + 1)
        deeper = self.sub(at, indent=at.indent + 2)
        body: list[str] = []
        required = schema.get("required")
        if isinstance(required, list) and required:
            names = self.constant(f"frozenset({sorted(set(required))!r})", "_r")
            body.append(_line(inner.indent, f"if not {d}.keys() >= {names}:"))
            body.append(
                self.fail(
                    deeper,
                    at.path,
                    "must contain ",
                    "required",
                    dynamic=f"str(sorted({names} - {d}.keys())) + ' properties'",
                )
            )
        for keyword, operator, text in (
            ("minProperties", "<", "must contain at least {} properties"),
            ("maxProperties", ">", "must contain at most {} properties"),
        ):
            count = _count(schema.get(keyword))
            if count is not None:
                body.append(_line(inner.indent, f"if len({d}) {operator} {count}:"))
                body.append(self.fail(deeper, at.path, text.format(count), keyword))
        properties: dict[str, Any] = schema["properties"] if isinstance(schema.get("properties"), dict) else {}
        for name, sub in properties.items():
            if sub is True:
                continue
            value = self.name("d")
            checks = self.node(
                sub,
                self.sub(
                    at,
                    data=value,
                    path=f"{at.path} + {'.' + name!r}",
                    indent=deeper.indent,
                    where=(*at.where, "properties", name),
                    in_place=False,
                ),
            )
            if checks:
                body.append(_line(inner.indent, f"{value} = {d}.get({name!r}, _MISSING)"))
                body.append(_line(inner.indent, f"if {value} is not _MISSING:"))
                body.extend(checks)
        patterns: dict[str, Any] = (
            schema["patternProperties"] if isinstance(schema.get("patternProperties"), dict) else {}
        )
        searches = {pattern: self.regex(pattern, (*at.where, "patternProperties", pattern)) for pattern in patterns}
        additional = schema.get("additionalProperties")
        if patterns or (additional is not None and additional is not True):
            key, value = self.name("k"), self.name("d")
            loop = self.sub(at, indent=deeper.indent, loops=at.loops + 1, in_place=False)
            loop_body: list[str] = []
            path = f"{at.path} + '.' + {key}"
            for pattern, sub in patterns.items():
                search = searches[pattern]
                if search is None or sub is True:
                    continue
                checks = self.node(
                    sub,
                    self.sub(
                        loop,
                        data=value,
                        path=path,
                        indent=loop.indent + 1,
                        where=(*at.where, "patternProperties", pattern),
                    ),
                )
                if checks:
                    loop_body.append(_line(loop.indent, f"if {search}({key}) is not None:"))
                    loop_body.extend(checks)
            if additional is not None and additional is not True:
                conditions = []
                if properties:
                    conditions.append(f"{key} not in {self.constant(f'frozenset({sorted(properties)!r})', '_r')}")
                conditions.extend(f"{searches[pattern]}({key}) is None" for pattern in patterns if searches[pattern])
                if additional is False:
                    checks = [
                        self.fail(
                            self.sub(loop, indent=loop.indent + 1),
                            at.path,
                            "must not contain ",
                            "additionalProperties",
                            dynamic=f"repr({key}) + ' (no additional properties)'",
                        )
                    ]
                else:
                    checks = self.node(
                        additional,
                        self.sub(
                            loop,
                            data=value,
                            path=path,
                            indent=loop.indent + 1,
                            where=(*at.where, "additionalProperties"),
                        ),
                    )
                if checks:
                    loop_body.append(_line(loop.indent, f"if {' and '.join(conditions) or 'True'}:"))
                    loop_body.extend(checks)
            if loop_body:
                body.append(_line(inner.indent, f"for {key}, {value} in {d}.items():"))
                body.extend(loop_body)
        names_schema = schema.get("propertyNames")
        if names_schema is not None and names_schema is not True and self.dialect != DRAFT_04:
            key = self.name("k")
            checks = self.node(
                names_schema,
                self.sub(
                    at,
                    data=key,
                    path=f"{at.path} + '.' + {key}",
                    indent=deeper.indent,
                    loops=at.loops + 1,
                    where=(*at.where, "propertyNames"),
                    in_place=False,
                ),
            )
            if checks:
                body.append(_line(inner.indent, f"for {key} in {d}:"))
                body.extend(checks)
        dependent: list[tuple[str, str, Any]] = []  # (keyword, property, names or schema)
        if self.dialect == DRAFT_2020_12:
            for name, names in (schema.get("dependentRequired") or {}).items():
                dependent.append(("dependentRequired", name, names))
            for name, sub in (schema.get("dependentSchemas") or {}).items():
                dependent.append(("dependentSchemas", name, sub))
        else:
            for name, value in (schema.get("dependencies") or {}).items():
                dependent.append(("dependencies", name, value))
        for keyword, name, value in dependent:
            if isinstance(value, list):
                if not value:
                    continue
                names = self.constant(f"frozenset({sorted(set(value))!r})", "_r")
                body.append(_line(inner.indent, f"if {name!r} in {d} and not {d}.keys() >= {names}:"))
                body.append(
                    self.fail(
                        deeper,
                        at.path,
                        "must contain ",
                        keyword,
                        dynamic=f"str(sorted({names} - {d}.keys())) + ' properties when ' + {name!r} + ' is present'",
                    )
                )
            elif value is not True:
                checks = self.node(value, self.sub(at, indent=deeper.indent, where=(*at.where, keyword, name)))
                if checks:
                    body.append(_line(inner.indent, f"if {name!r} in {d}:"))
                    body.extend(checks)
        if not body:
            return []
        return [_line(at.indent, f"if isinstance({d}, dict):"), *body]

    # allOf, anyOf, oneOf, not, if

    def applicators(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        lines: list[str] = []
        for index, sub in enumerate(schema.get("allOf") or []):
            lines.extend(self.node(sub, self.sub(at, where=(*at.where, "allOf", index))))
        branches = schema.get("anyOf")
        if isinstance(branches, list) and branches:
            ok, errs = self.name("ok"), self.name("e")
            lines.append(_line(at.indent, f"{ok} = False"))
            for index, sub in enumerate(branches):
                lines.append(_line(at.indent, f"if not {ok}:"))
                lines.append(_line(at.indent + 1, f"{errs} = []"))
                lines.extend(
                    self.node(sub, self.sub(at, errs=errs, indent=at.indent + 1, where=(*at.where, "anyOf", index)))
                )
                lines.append(_line(at.indent + 1, f"{ok} = not {errs}"))
            lines.append(_line(at.indent, f"if not {ok}:"))
            lines.append(
                self.fail(
                    self.sub(at, indent=at.indent + 1), at.path, "must be valid by one of anyOf definition", "anyOf"
                )
            )
        branches = schema.get("oneOf")
        if isinstance(branches, list) and branches:
            count, errs = self.name("n"), self.name("e")
            lines.append(_line(at.indent, f"{count} = 0"))
            for index, sub in enumerate(branches):
                lines.append(_line(at.indent, f"{errs} = []"))
                lines.extend(self.node(sub, self.sub(at, errs=errs, where=(*at.where, "oneOf", index))))
                lines.append(_line(at.indent, f"if not {errs}:"))
                lines.append(_line(at.indent + 1, f"{count} += 1"))
            lines.append(_line(at.indent, f"if {count} != 1:"))
            lines.append(
                self.fail(
                    self.sub(at, indent=at.indent + 1),
                    at.path,
                    "must be valid exactly by one oneOf definition (",
                    "oneOf",
                    dynamic=f"str({count}) + ' valid)'",
                )
            )
        if "not" in schema:
            errs = self.name("e")
            lines.append(_line(at.indent, f"{errs} = []"))
            lines.extend(self.node(schema["not"], self.sub(at, errs=errs, where=(*at.where, "not"))))
            lines.append(_line(at.indent, f"if not {errs}:"))
            lines.append(
                self.fail(self.sub(at, indent=at.indent + 1), at.path, "must NOT match a disallowed definition", "not")
            )
        if "if" in schema and self.dialect in (DRAFT_2020_12, DRAFT_07) and ("then" in schema or "else" in schema):
            errs = self.name("e")
            lines.append(_line(at.indent, f"{errs} = []"))
            lines.extend(self.node(schema["if"], self.sub(at, errs=errs, where=(*at.where, "if"))))
            then = self.node(schema.get("then", True), self.sub(at, indent=at.indent + 1, where=(*at.where, "then")))
            otherwise = self.node(
                schema.get("else", True), self.sub(at, indent=at.indent + 1, where=(*at.where, "else"))
            )
            lines.append(_line(at.indent, f"if not {errs}:"))
            lines.extend(then or [_line(at.indent + 1, "pass")])
            if otherwise:
                lines.append(_line(at.indent, "else:"))
                lines.extend(otherwise)
        return lines


def _count(value: Any) -> int | None:
    """A non-negative integer keyword's value (``2.0`` is 2), None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return None


def _line(indent: int, text: str) -> str:
    return "    " * indent + text


def _type_check(name: Any, d: str) -> str:
    if name == "string":
        return f"isinstance({d}, str)"
    if name == "object":
        return f"isinstance({d}, dict)"
    if name == "array":
        return f"isinstance({d}, list)"
    if name == "null":
        return f"{d} is None"
    if name == "boolean":
        return f"({d} is True or {d} is False)"
    if name == "number":
        return f"(isinstance({d}, _NUMBER) and {d} is not True and {d} is not False)"
    if name == "integer":
        return f"({d}.__class__ is int or is_integer({d}))"
    return "False"


def _python(value: Any) -> str:
    """A JSON value (Decimal numbers) as a Python expression."""
    if isinstance(value, Decimal):
        return f"Decimal({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_python(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name!r}: {_python(item)}" for name, item in value.items()) + "}"
    return repr(value)


def _subschemas(schema: Mapping[str, Any], dialect: str) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(relative path, subschema) for every direct subschema of ``schema``."""
    for key in _ONE:
        if key in schema and not isinstance(schema[key], list):
            yield (key,), schema[key]
    if "items" in schema:
        if isinstance(schema["items"], list):
            yield from (((("items", index), sub) for index, sub in enumerate(schema["items"])))
        else:
            yield ("items",), schema["items"]
    for key in _LIST:
        if isinstance(schema.get(key), list):
            yield from (((key, index), sub) for index, sub in enumerate(schema[key]))
    for key in _MAP:
        if isinstance(schema.get(key), Mapping):
            yield from (((key, name), sub) for name, sub in schema[key].items())
    dependencies = schema.get("dependencies")
    if dialect != DRAFT_2020_12 and isinstance(dependencies, Mapping):
        yield from ((("dependencies", name), sub) for name, sub in dependencies.items() if isinstance(sub, dict | bool))


def parse_schema_text(text: str) -> Any:
    """The schema from its JSON text, with exact numbers (what :func:`generate` compiles)."""
    return json.loads(text, parse_float=Decimal)


def generate(text: str, dialect: str) -> tuple[str, list[str]]:
    """(the validator module's source, the problems: empty when the code is complete).

    ``text`` is the schema's JSON text, carried in the module as ``SCHEMA_JSON`` with its SHA-256.
    """
    generator = _Generator(parse_schema_text(text), dialect)
    root = generator.compile_root()
    if generator.problems:
        return "", generator.problems
    header = [
        f'"""{GENERATED_DOCSTRING}"""',
        "",
        "import re",
        "from decimal import Decimal",
        "",
        "from .contract.order_schema import is_integer, is_multiple, json_key, unique_items",
        "from .contract.schema_formats import FORMATS",
        "",
        f"SCHEMA_JSON = {text!r}",
        f"SCHEMA_SHA256 = {hashlib.sha256(text.encode()).hexdigest()!r}",
        "_MISSING = object()",
        "_NUMBER = (int, Decimal, float)",
        *generator.constants,
        "",
    ]
    body = [line for function in generator.functions for line in ("", *function)]
    return "\n".join([*header, *body, "", *root, ""]), []
