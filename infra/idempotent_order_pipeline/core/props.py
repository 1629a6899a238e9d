"""A construct's props, each declared once: the dataclass field holds its default, type, doc and allowed text.

A props class is a frozen, keyword-only dataclass whose fields are made with :func:`prop` (or
:func:`required`). Everything else about a prop comes from its field:

* the constructor's ``:param`` documentation (:func:`params_doc`, appended to the class docstring);
* the props table of the docs (:func:`props_table`; ``tests/test_docs.py`` keeps each page's table
  equal to it, ``make docs`` writes it);
* the type check with its message (:func:`well_typed`: the field's type, and its ``allowed`` text
  where the type's name alone would not say what to pass).

* the constructor's signature: it takes ``**kwargs: Unpack[<Props>Kwargs]`` (a ``TypedDict`` type
  checkers and editors read; a test proves it equal to the fields), and :func:`document` sets its
  ``__signature__`` from the fields, so ``inspect.signature`` and ``help()`` show every prop with its
  default; :func:`given` turns the keyword arguments into the props.
"""

from __future__ import annotations

import difflib
import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from enum import Enum
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from aws_cdk import Annotations, Duration, Token, aws_lambda
from constructs import Construct

#: Prefix of the warning annotations the constructs add (acknowledge them with this prefix + id).
WARNING_PREFIX = "idempotent-order-pipeline"
#: Field metadata keys.
DOC, DEFAULT_MEANS, ALLOWED = "doc", "default_means", "allowed"

P = TypeVar("P")


def prop(default: Any, doc: str, *, default_means: str | None = None, allowed: str | None = None) -> Any:
    """A prop with a default: ``doc`` says what it does; ``default_means`` what the default does, when the
    value alone does not say it (``None`` -> ``"Lambda's own scaling"``); ``allowed`` how a type error
    states what to pass, when the type's name would not."""
    return field(default=default, metadata={DOC: doc, DEFAULT_MEANS: default_means, ALLOWED: allowed})


def required(doc: str, *, allowed: str | None = None) -> Any:
    """A prop without a default (the constructor requires it)."""
    return field(metadata={DOC: doc, DEFAULT_MEANS: None, ALLOWED: allowed})


@dataclass
class Findings:
    """What validation found: errors stop synthesis, warnings become annotations."""

    errors: list[str] = field(default_factory=list)
    #: (annotation id, message) pairs.
    warnings: list[tuple[str, str]] = field(default_factory=list)


def report(scope: Construct, construct_name: str, findings: Findings) -> None:
    """Raise one ``ValueError`` listing every error; otherwise add each warning as an annotation of ``scope``.

    Raises:
        ValueError: ``<construct_name> <path>: invalid props:`` and one line per problem.
    """
    if findings.errors:
        problems = "\n".join(f"  - {error}" for error in findings.errors)
        raise ValueError(f"{construct_name} {scope.node.path}: invalid props:\n{problems}")
    for warning_id, message in findings.warnings:
        Annotations.of(scope).add_warning_v2(f"{WARNING_PREFIX}:{warning_id}", message)


def prop_fields(props_class: type) -> tuple[Field[Any], ...]:
    return fields(props_class)


def has_default(prop_field: Field[Any]) -> bool:
    return prop_field.default is not MISSING


# ---- defaults, as the docs state them ---------------------------------------------------------------


def _constant_name(value: object) -> str | None:
    """``Runtime.PYTHON_3_14`` for a jsii enum-like class constant (Runtime, Architecture), else None."""
    for kind in (aws_lambda.Runtime, aws_lambda.Architecture):
        if isinstance(value, kind):
            for name in dir(kind):
                if name.isupper() and getattr(getattr(kind, name), "name", None) == value.name:
                    return f"{kind.__name__}.{name}"
    return None


def describe_value(value: object) -> str:
    """A prop's value as an error message shows it: a runtime or architecture by its name (``python3.13``,
    ``arm64``), never a jsii object's address; anything else as ``repr``."""
    if isinstance(value, aws_lambda.Runtime | aws_lambda.Architecture):
        return str(value.name)
    return repr(value)


def describe_default(value: object) -> str:
    """A default as the docstring states it: ``30 seconds``, ``RemovalPolicy.RETAIN``, ``('order_id',)``, ``None``."""
    if isinstance(value, Duration):
        return value.to_human_string()
    if isinstance(value, Enum):
        return f"{type(value).__name__}.{value.name}"
    return _constant_name(value) or repr(value)


def code_default(value: object) -> str:
    """A default as code, for the docs' tables: ``Duration.seconds(30)``, ``RemovalPolicy.RETAIN``, ``"thin"``."""
    if isinstance(value, Duration):
        total = int(value.to_seconds())
        for unit, size in (("days", 86_400), ("hours", 3600), ("minutes", 60)):
            if total >= size and total % size == 0:
                return f"Duration.{unit}({total // size})"
        return f"Duration.seconds({total})"
    if isinstance(value, Enum):
        return f"{type(value).__name__}.{value.name}"
    return _constant_name(value) or repr(value).replace("'", '"')


def default_sentence(prop_field: Field[Any]) -> str:
    """``Default: 30 seconds.`` / ``Default: None (Lambda's own scaling).`` / ``Required.``"""
    if not has_default(prop_field):
        return "Required."
    means = prop_field.metadata[DEFAULT_MEANS]
    return f"Default: {describe_default(prop_field.default)}{f' ({means})' if means else ''}."


# ---- what is generated ------------------------------------------------------------------------------


def params_doc(props_class: type, *, width: int = 104, indent: str = "    ") -> str:
    """The ``:param`` lines of every prop, in field order, each ending with its default sentence."""
    lines: list[str] = []
    for prop_field in prop_fields(props_class):
        text = f":param {prop_field.name}: {prop_field.metadata[DOC]} {default_sentence(prop_field)}"
        wrapped = textwrap.wrap(
            text, width=width, initial_indent=indent, subsequent_indent=indent * 2, break_on_hyphens=False
        )
        lines.extend(wrapped)
    return "\n".join(lines)


def document(construct_class: type, props_class: type, defaults: object) -> None:
    """Give ``construct_class`` its props' ``:param`` lines (after its own) and a signature made of the fields.

    The constructor's own parameters stay first (``self``, ``scope``, ``construct_id``) and its own
    keyword-only ones last (a deprecated one, say); its ``**kwargs`` become one keyword-only
    parameter per field, annotated with the field's type and defaulting to ``defaults``' value.
    """
    construct_class.__doc__ = f"{(construct_class.__doc__ or '').rstrip()}\n{params_doc(props_class)}\n    "
    init = vars(construct_class)["__init__"]
    own = list(inspect.signature(init).parameters.values())
    keyword = inspect.Parameter.KEYWORD_ONLY
    made = [
        inspect.Parameter(
            prop_field.name,
            keyword,
            annotation=prop_field.type,
            default=getattr(defaults, prop_field.name) if has_default(prop_field) else inspect.Parameter.empty,
        )
        for prop_field in prop_fields(props_class)
    ]
    init.__signature__ = inspect.Signature(
        [
            *(p for p in own if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *made,
            *(p for p in own if p.kind is keyword),
        ],
        return_annotation=None,
    )


def given(props_class: type[P], kwargs: Mapping[str, Any], construct_name: str) -> P:
    """The props a constructor was given as keyword arguments.

    Raises:
        TypeError: a keyword that is no prop (naming the closest prop), or a required prop missing.
    """
    names = [prop_field.name for prop_field in prop_fields(props_class)]
    for name in kwargs:
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{construct_name}() got an unexpected keyword argument {name!r}{hint}")
    missing = [f.name for f in prop_fields(props_class) if not has_default(f) and f.name not in kwargs]
    if missing:
        raise TypeError(f"{construct_name}() missing required keyword argument(s): {', '.join(missing)}")
    return props_class(**kwargs)


def props_table(props_class: type) -> str:
    """The docs' props table: every prop, its default as code (and what it means), what it does."""
    rows = ["| Prop | Default | What it does |", "| --- | --- | --- |"]
    for prop_field in prop_fields(props_class):
        if has_default(prop_field):
            means = prop_field.metadata[DEFAULT_MEANS]
            stated = f" ({_markdown(means, capitalise=False)})" if means else ""
            default = f"`{code_default(prop_field.default)}`{stated}"
        else:
            default = "required"
        doc = _markdown(prop_field.metadata[DOC])
        rows.append(f"| `{prop_field.name}` | {default} | {doc} |")
    return "\n".join(rows)


def _markdown(text: str, *, capitalise: bool = True) -> str:
    """A docstring's text as a Markdown table cell: one line, ``code`` as `code`, pipes escaped."""
    cell = " ".join(text.split()).replace("``", "`").replace("|", "\\|")
    return cell[:1].upper() + cell[1:] if capitalise else cell


# ---- types ------------------------------------------------------------------------------------------

#: Plain Python values: never a CDK object, so never what a prop typed as a CDK interface wants.
_PLAIN_VALUES = (str, bytes, int, float, bool, Mapping, list, tuple, set)


def type_name(hint: Any) -> str:
    """An annotation as a type error states it: ``Duration or None``, ``a sequence of str``."""
    if hint is type(None):
        return "None"
    if isinstance(hint, type):
        module = hint.__module__.removeprefix("aws_cdk.").removeprefix("aws_cdk")
        return hint.__name__ if module in ("", "builtins") else f"{module}.{hint.__name__}"
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return " or ".join(type_name(arg) for arg in get_args(hint))
    if origin is not None:
        args = get_args(hint)
        element = type_name(args[-1]) if args and args[-1] is not Any else "keyword arguments"
        kind = "mapping" if isinstance(origin, type) and issubclass(origin, Mapping) else "sequence"
        return f"a {kind} of {element}"
    return str(hint)


def has_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint`` (an unresolved number or string token always fits)."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return any(has_type(value, arg) for arg in get_args(hint))
    if origin is not None:  # Sequence[X] or Mapping[str, X]: the container; elements are checked by their own rules
        if issubclass(origin, Mapping):
            return isinstance(value, Mapping)
        return isinstance(value, Sequence) and not isinstance(value, str | bytes)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        token = isinstance(value, float) and Token.is_unresolved(value)
        return (isinstance(value, int) and not isinstance(value, bool)) or token
    if getattr(hint, "_is_protocol", False):  # a jsii interface (IKey, IQueue, ...): any CDK object
        return not isinstance(value, _PLAIN_VALUES) and value is not None
    return isinstance(value, hint)


def well_typed(
    props: P, defaults: P, findings: Findings, *, fits: Mapping[str, Callable[[Any], bool]] | None = None
) -> P:
    """Report every prop whose value has the wrong type; return the props with those at their defaults.

    The value checks then run on values of the right type only (``memory_size="1024"`` is one clear
    error, not a ``TypeError`` from a comparison), while the synth still collects every problem.
    ``fits``: a check of its own for a prop the annotation cannot state (one imported lazily).
    """
    hints = get_type_hints(type(props))
    wrong: dict[str, Any] = {}
    for prop_field in prop_fields(type(props)):
        name = prop_field.name
        value = getattr(props, name)
        check = (fits or {}).get(name)
        if not (check(value) if check is not None else has_type(value, hints[name])):
            allowed = prop_field.metadata[ALLOWED] or type_name(hints[name])
            findings.errors.append(f"{name}={describe_value(value)} ({type(value).__name__}): allowed {allowed}")
            wrong[name] = getattr(defaults, name)
    return replace(props, **wrong) if wrong else props  # type: ignore[type-var]
