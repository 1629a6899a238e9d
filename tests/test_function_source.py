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
