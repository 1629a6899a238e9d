"""The functions' source as the Lambda runtime's Python (3.14) compiles it, checked on any interpreter.

Python 3.13's compiler strips the common indentation of every docstring at compile time, which encodes
the docstring as UTF-8: a docstring holding a lone surrogate (``"\\ud800"`` written with one backslash)
no longer compiles, and the module never imports. On 3.11 and 3.12 it compiles. This test finds such a
docstring on whichever interpreter runs it; ``tools/runtime_python.py`` compiles and runs the same modules on the
runtime's own interpreter (``make test-runtime``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools.runtime_python import REPO, shipped_modules


def _modules() -> list[Path]:
    return [REPO / module for module in shipped_modules()]


def _docstrings(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    found = []
    for node in (tree, *ast.walk(tree)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                found.append((getattr(node, "lineno", 1), doc))
    return found


def test_every_module_the_functions_load_is_found() -> None:
    # GIVEN the asset and the subscriber layer
    modules = {path.relative_to(path.parents[1]).as_posix() for path in _modules()}
    # THEN both entry points and their contracts are among the modules checked
    assert "order_consumer/handler.py" in modules
    assert "order_consumer/reconciler.py" in modules
    assert "contract/message.py" in modules
    assert "idempotent_subscriber/batch.py" in modules


@pytest.mark.parametrize("path", _modules(), ids=lambda path: path.name)
def test_every_docstring_has_a_utf8_form(path: Path) -> None:
    # GIVEN a module a function loads
    source = path.read_text(encoding="utf-8")
    # WHEN its docstrings are encoded as Python 3.13's compiler encodes them
    # THEN none holds a lone surrogate (it would stop the module at import)
    for line, doc in _docstrings(source):
        try:
            doc.encode("utf-8")
        except UnicodeEncodeError as exc:
            pytest.fail(f"{path}:{line}: docstring has no UTF-8 form ({exc}); escape the backslash")


def test_the_check_finds_a_lone_surrogate_in_a_docstring() -> None:
    # GIVEN a module whose docstring spells a surrogate escape with one backslash
    source = 'def f():\n    """JSON spells it "\\ud800"."""\n'
    # THEN the docstring is found and has no UTF-8 form
    ((_, doc),) = _docstrings(source)
    with pytest.raises(UnicodeEncodeError):
        doc.encode("utf-8")


@pytest.mark.slow
def test_the_runtime_check_refuses_a_module_that_python_3_13_cannot_compile() -> None:
    # GIVEN the interpreters make test-runtime compiles on, from 3.13 (the runtime's 3.14 once built)
    from tools import runtime_python

    newer = [found for found in runtime_python.interpreters(build=False) if found.version >= (3, 13)]
    assert newer, "no Python 3.13 or later here: run make test-runtime (it builds python3.14) or set RUNTIME_PYTHON"
    bad = {"<lone surrogate>": 'def f():\n    """JSON spells it "\\ud800"."""\n'}
    good = {"<escaped>": 'def f():\n    """JSON spells it "\\\\ud800"."""\n'}
    # WHEN each compiles a module whose docstring spells a lone surrogate, and the same module escaped
    # THEN it refuses the first and compiles the second
    assert not runtime_python.compile_everywhere(newer, [], bad)
    assert runtime_python.compile_everywhere(newer, [], good)


# --- -O and -OO: nothing the functions do may depend on an assert or a docstring ----------------------

#: Calls that read a docstring (``getattr(x, "__doc__")`` is found by its constant).
_DOC_READERS = {"getdoc", "cleandoc"}


def _optimization_hazards(source: str) -> tuple[int, list[tuple[int, str]]]:
    """(asserts found, what ``-O``/``-OO`` would change): a docstring read, ``__debug__``, an assert that is more
    than a type check (``isinstance(...)`` or ``x is not None``, the ones mypy narrows on)."""
    asserts, hazards = 0, []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "__doc__":
            hazards.append((node.lineno, "reads __doc__ (None under -OO)"))
        elif isinstance(node, ast.Name) and node.id in ("__doc__", "__debug__"):
            hazards.append((node.lineno, f"reads {node.id} (changed by -O/-OO)"))
        elif isinstance(node, ast.Constant) and node.value == "__doc__":
            hazards.append((node.lineno, "names '__doc__' (None under -OO)"))
        elif isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in _DOC_READERS:
                hazards.append((node.lineno, f"calls {called} (docstrings are None under -OO)"))
        elif isinstance(node, ast.Assert):
            asserts += 1
            test = node.test
            narrows = (
                isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
            ) or (
                isinstance(test, ast.Compare)
                and [type(op) for op in test.ops] == [ast.IsNot]
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None
            )
            if not narrows:
                hazards.append((node.lineno, f"assert {ast.unparse(test)} (removed by -O)"))
    return asserts, hazards


#: A schema with the keywords whose generated checks are the least plain: numbers, patterns, nesting.
_GENERATED_SCHEMA = {
    "type": "object",
    "required": ["order_id"],
    "properties": {
        "order_id": {"type": "string", "pattern": "^o-[0-9]+$"},
        "amount": {"type": "number", "minimum": 0, "multipleOf": 0.01},
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "object", "properties": {"q": {"type": "integer"}}},
        },
        "country": {"enum": ["DE", "FR"]},
    },
}


def test_no_function_relies_on_an_assert_or_a_docstring() -> None:
    # GIVEN every module the functions load (python -O removes asserts, -OO docstrings too), and the
    # order-schema validator generated at synth
    from idempotent_order_pipeline.order_schema import validator_code

    sources = {path.name: path.read_text(encoding="utf-8") for path in _modules()}
    sources["<generated validator>"] = validator_code(_GENERATED_SCHEMA)
    found = {name: _optimization_hazards(source) for name, source in sources.items()}
    # THEN the walk saw the asserts there are (type checks for mypy), and nothing -O or -OO would change
    assert sum(asserts for asserts, _ in found.values()) > 0
    hazards = [f"{name}:{line}: {what}" for name, (_, found_here) in found.items() for line, what in found_here]
    assert hazards == []


def test_the_check_finds_what_optimization_would_change() -> None:
    # GIVEN code that asserts a value, reads a docstring three ways and branches on __debug__,
    # beside the two type-narrowing asserts the functions use
    source = (
        "import inspect\n"
        "def f(x):\n"
        "    assert isinstance(x, int)\n"
        "    assert x is not None\n"
        "    assert x > 0\n"
        "    y = f.__doc__ or getattr(f, '__doc__') or inspect.getdoc(f)\n"
        "    if __debug__:\n"
        "        return y\n"
    )
    # WHEN it is checked
    asserts, hazards = _optimization_hazards(source)
    # THEN every hazard is named by its line, the type checks are not
    assert asserts == 3
    assert sorted(line for line, _ in hazards) == [5, 6, 6, 6, 7]
