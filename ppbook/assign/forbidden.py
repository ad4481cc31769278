"""Find calls of what an assignment forbids (:data:`ppbook.assign.questions.FORBIDDEN`) in a
submission's code, without running it (issue 16).

:func:`scan` reads sources (a notebook's code cells, the ``.py`` files handed in beside it,
or one function's source for a self-check) as Python syntax trees and resolves every name
they use to the qualified name it stands for:

- imports: ``import a.b as c``, ``from a import b``, ``from a.b import *`` (a bare name the
  sources never define is then looked up in each star-imported module);
- attribute chains on imported names (``c.d.e``) and plain assignments of them
  (``f = c.d``);
- the import functions with a constant module name (``importlib.import_module("a.b")``,
  ``__import__("a.b")``, ``pkgutil.resolve_name``, ``sys.modules["a.b"]``) and
  ``getattr(module, "name")`` with a constant string (constant strings are folded:
  ``"a." + "b"`` and f-strings of constants);
- code in a constant string handed to ``exec``, ``eval``, ``compile`` or an IPython magic;
  and, as text, a forbidden name inside any other string but a docstring or a printed one.

Names inside ppbook are also resolved to where their object is defined (``ppbook.assign.
score_schedules.zb_h1`` is ``ppbook.schedules.zero_bubble.zb_h1``), so a re-export does
not hide it. The names of all sources form one namespace (a notebook's cells share one).
IPython syntax (``%time``, ``!ls``, ``%%capture``) is turned into Python with IPython's own
transformer; a source that still does not parse is skipped, never an error. Names used
through objects the scan cannot follow (``type(x).method``, strings built at run time)
are beyond it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections import defaultdict
from functools import cache

from ppbook.moved import MOVED, current

_IMPORTERS = {
    "builtins.__import__",
    "importlib.import_module",
    "importlib.__import__",
    "pkgutil.resolve_name",
    "runpy.run_module",
    "importlib.util.find_spec",
}
_CODE_RUNNERS = {"builtins.exec", "builtins.eval", "builtins.compile"}
_MAGICS = {"run_line_magic", "run_cell_magic", "run_cell", "ex", "ev", "system", "getoutput"}
_ROUNDS = 4  # passes over assignments, so that aliases of aliases are followed


def scan(sources: dict[str, str], forbidden: tuple[str, ...]) -> list[str]:
    """One line per forbidden name used, such as "cell 5 uses ppbook.schedules.one_f_one_b":
    ``sources`` maps where each source is ("cell 5", "helper.py") to its text."""
    return [f"{where} uses {name}" for where, name in findings(sources, forbidden)]


def findings(sources: dict[str, str], forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    """(where, qualified name) of each forbidden use in ``sources``, in their order."""
    if not forbidden:
        return []
    trees = {where: tree for where, text in sources.items() if (tree := parse(text))}
    scope = _Scope()
    for _ in range(_ROUNDS):
        for tree in trees.values():
            scope.learn(tree)
    found: list[tuple[str, str]] = []
    for where, tree in trees.items():
        used = _Uses(scope, forbidden).collect(tree)
        kept = [n for n in used if not any(o.startswith(n + ".") for o in used)]
        found += [(where, name) for name in dict.fromkeys(kept)]
    return found


def forbids(forbidden: tuple[str, ...], name: str) -> bool:
    """Whether ``name`` is one of ``forbidden`` or below one (``a.b`` forbids ``a.b.c``)."""
    return any(name == f or name.startswith(f + ".") for f in forbidden)


def parse(text: str) -> ast.Module | None:
    """``text`` as a syntax tree; IPython syntax transformed first if plain Python fails;
    None if it still does not parse."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return ast.parse(TransformerManager().transform_cell(text))
    except Exception:  # noqa: BLE001 (any failure of IPython's transformer: not Python)
        return None


@cache
def canonical(name: str) -> str | None:
    """Where the object called ``name`` is defined, for names in ppbook: ``module.qualname``
    of a function or class, ``__name__`` of a module; None if it cannot be found."""
    if not name.startswith("ppbook."):
        return None
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 (not a module, or one that fails to import)
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute, None)
        break
    else:
        return None
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        return f"{module}.{qualname}"
    found = getattr(target, "__name__", None)
    return found if isinstance(found, str) and type(target).__name__ == "module" else None


def folded(node: ast.AST | None) -> str | None:
    """The value of a constant string expression (literals, ``+``, f-strings of constants)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = folded(node.left), folded(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [folded(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    return None


class _Scope:
    """What each name of the sources may stand for: imports, star imports, assignments."""

    def __init__(self):
        self.aliases: dict[str, set[str]] = defaultdict(set)
        self.stars: set[str] = set()
        self.defined: set[str] = set()

    def learn(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.aliases[bound].add(alias.name if alias.asname else bound)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    if alias.name == "*":
                        self.stars.add(node.module)
                    else:
                        self.aliases[alias.asname or alias.name].add(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                meant = self.resolve(node.value)
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.aliases[target.id] |= meant
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.defined.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defined.add(node.name)
            elif isinstance(node, ast.arg):
                self.defined.add(node.arg)

    def resolve(self, node: ast.AST) -> set[str]:
        """The qualified names ``node`` may stand for (empty: none the scan knows)."""
        if isinstance(node, ast.Name):
            names = set(self.aliases.get(node.id, ()))
            if node.id not in self.defined and node.id not in self.aliases:
                names |= {f"{module}.{node.id}" for module in self.stars}
                if hasattr(builtins, node.id):
                    names.add(f"builtins.{node.id}")
            return names
        if isinstance(node, ast.Attribute):
            if node.attr == "__dict__":
                return {f"{base}.__dict__" for base in self.resolve(node.value)}
            return {f"{base}.{node.attr}" for base in self.resolve(node.value)}
        if isinstance(node, ast.Subscript):
            key, bases = folded(node.slice), self.resolve(node.value)
            if key is None:
                return set()
            found = {key for base in bases if base == "sys.modules"}
            return found | {
                f"{b.removesuffix('.__dict__')}.{key}" for b in bases if "__dict__" in b
            }
        if isinstance(node, ast.Call):
            return self._called(node)
        return set()

    def _called(self, node: ast.Call) -> set[str]:
        functions = self.resolve(node.func)
        first = folded(node.args[0]) if node.args else None
        found: set[str] = set()
        if functions & _IMPORTERS and first is not None:
            found |= self._module(node, functions, first)
        if "builtins.getattr" in functions and len(node.args) >= 2:
            name = folded(node.args[1])
            if name is not None:
                found |= {f"{base}.{name}" for base in self.resolve(node.args[0])}
        if "builtins.vars" in functions and node.args:
            found |= {f"{base}.__dict__" for base in self.resolve(node.args[0])}
        if functions & {"sys.modules.get"} and first is not None:
            found.add(first)
        return found

    @staticmethod
    def _module(node: ast.Call, functions: set[str], name: str) -> set[str]:
        """The module an import function loads, and what ``__import__`` gives back (its top
        package unless a ``fromlist`` is given)."""
        name = name.replace(":", ".")
        if name.startswith(".") and len(node.args) > 1:  # import_module(".b", "a")
            name = (folded(node.args[1]) or "") + name
        if functions & {"builtins.__import__", "importlib.__import__"}:
            return {name, name.split(".")[0]}
        return {name}


class _Uses:
    """Every name a tree uses, resolved, that ``forbidden`` forbids."""

    def __init__(self, scope: _Scope, forbidden: tuple[str, ...]):
        self.scope, self.forbidden = scope, forbidden
        self.found: list[str] = []
        written = forbidden + tuple(o for o, n in MOVED.items() if forbids(forbidden, n))
        self.patterns = [re.compile(rf"(?<![\w.]){re.escape(f)}(?![\w])") for f in written]

    def collect(self, tree: ast.AST) -> list[str]:
        docstrings, printed = _docstrings(tree), _printed(tree, self.scope)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                self._check({alias.name for alias in node.names})
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                self._check({node.module})
                self._check({f"{node.module}.{a.name}" for a in node.names if a.name != "*"})
            elif isinstance(node, ast.Name | ast.Attribute | ast.Subscript | ast.Call):
                self._check(self.scope.resolve(node))
                if isinstance(node, ast.Call):
                    self._code_in(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docstrings and id(node) not in printed:
                    self._text(node.value)
        return self.found

    def _check(self, names: set[str]) -> None:
        for name in sorted(names):
            for meant in (name, current(name), canonical(name)):
                if meant and forbids(self.forbidden, meant):
                    as_written = forbids(self.forbidden, name) or meant == current(name)
                    self.found.append(name if as_written else meant)
                    break

    def _text(self, text: str) -> None:
        for pattern in self.patterns:
            match = re.search(rf"{pattern.pattern}[\w.]*", text)
            if match:
                self.found.append(match.group(0).rstrip("."))

    def _code_in(self, node: ast.Call) -> None:
        """Code in constant strings handed to exec, eval, compile or an IPython magic."""
        runs = self.scope.resolve(node.func) & _CODE_RUNNERS
        magic = isinstance(node.func, ast.Attribute) and node.func.attr in _MAGICS
        if not (runs or magic):
            return
        for argument in node.args:
            text = folded(argument)
            tree = parse(text) if text else None
            if tree is not None:
                self.scope.learn(tree)
                self.collect(tree)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _printed(tree: ast.AST, scope: _Scope) -> set[int]:
    """The constant strings handed straight to ``print``: text for the reader."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and "builtins.print" in scope.resolve(node.func):
            found |= {id(arg) for arg in node.args if isinstance(arg, ast.Constant)}
    return found
