"""The layers of README.md ("Architecture in brief"), enforced on every import of every module.

Bottom to top: ``rtl`` < ``gen`` < ``verif.models`` < ``sim`` < ``verif`` (testbenches,
the regression) < command-line modules (``cli.py``, ``*_cli.py``). A module may
import its own layer and the layers below, including imports inside functions;
``rtl`` imports nothing outside the standard library but Amaranth and numpy.
The registry's string references are checked too: they must resolve, and point
at the layer their role belongs to.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from pimforge.gen import registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rtl", "gen", "sim", "verif")
LAYERS = ("rtl", "gen", "verif.models", "sim", "verif", "cli")
#: Third-party packages the hardware layer may use (numpy: the constant derivations).
RTL_THIRD_PARTY = {"amaranth", "numpy"}
#: The accelerators' own folders in rtl/; rtl/fp, rtl/mem and rtl/noc are shared and import
#: none of them.
ACCELERATORS = ("capsnet", "descnet", "ipim", "nicepim")


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[-1] == "cli" or parts[-1].endswith("_cli"):
        return "cli"
    if parts[1] == "verif" and len(parts) > 2 and parts[2] == "models":
        return "verif.models"
    return parts[1]


def _modules():
    for top in PACKAGES:
        for f in sorted((ROOT / top).rglob("*.py")):
            rel = f.relative_to(ROOT).with_suffix("")
            parts = ["pimforge", *rel.parts]
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            yield f, ".".join(parts), is_pkg


def imports(path: Path, module: str, is_pkg: bool):
    """(line, imported module) of every import in *path*, at any depth."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - (0 if is_pkg else 1)]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:      # from . import x: x may be a module
                for a in node.names:
                    yield node.lineno, f"{target}.{a.name}"
            else:
                yield node.lineno, target


MODULES = list(_modules())
_NAMES = {m for _, m, _ in MODULES}


def _exists(target: str) -> bool:
    # ``from .pkg import name`` yields pkg.name, which may be an attribute, not a module.
    return target in _NAMES or target.rsplit(".", 1)[0] in _NAMES


def test_modules_found():
    assert len(MODULES) > 50


@pytest.mark.parametrize("path, module, is_pkg", MODULES, ids=[m for _, m, _ in MODULES])
def test_imports_point_down(path, module, is_pkg):
    mine = LAYERS.index(layer(module))
    bad = []
    for line, target in imports(path, module, is_pkg):
        top = target.split(".")[0]
        if target.startswith("pimforge."):
            if not _exists(target):
                bad.append(f"line {line}: {target} does not exist")
            elif LAYERS.index(layer(target)) > mine:
                bad.append(f"line {line}: {target} ({layer(target)} is above {layer(module)})")
        elif layer(module) == "rtl" and top not in sys.stdlib_module_names | RTL_THIRD_PARTY:
            bad.append(f"line {line}: {target} (rtl imports only the standard library, "
                       f"{', '.join(sorted(RTL_THIRD_PARTY))})")
        if (module.split(".")[2:3] in (["fp"], ["mem"], ["noc"]) and layer(module) == "rtl"
                and target.split(".")[2:3] in [[a] for a in ACCELERATORS]):
            bad.append(f"line {line}: {target} (shared hardware imports no accelerator)")
    where = path.relative_to(ROOT)
    assert not bad, f"{where} imports upwards or what does not exist:\n" + "\n".join(bad)


def test_layer_checker_sees_function_level_and_relative_imports(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def g():\n    from ...sim.build import build_verilated\n"
                 "    from .. import gen\n")
    got = list(imports(f, "pimforge.rtl.fp.x", False))
    assert got == [(2, "pimforge.sim.build"), (3, "pimforge.rtl.gen")]
    assert layer("pimforge.sim.capsnet.run_cli") == "cli"
    assert layer("pimforge.verif.models.fp32") == "verif.models"


#: The layers a registered reference of each role may point at.
ROLE_LAYERS = {"block": {"rtl"}, "section": {"gen"}, "bench": {"verif"},
               "workload": {"sim", "verif", "cli"}, "command": {"sim", "verif", "cli"}}


def _references():
    for acc in registry.accelerators():
        for s in acc.sections:
            yield acc.name, "section", s.cls
        for b in acc.blocks:
            yield acc.name, "block", b.factory
        for b in acc.benches:
            yield acc.name, "bench", b.module
        for w in acc.workloads:
            yield acc.name, "workload", w.cli
        for c in acc.commands:
            yield acc.name, "command", c.cli
        for e in acc.explorers:
            yield acc.name, "command", e.cli


@pytest.mark.parametrize("acc, role, ref", list(_references()))
def test_registered_references_resolve_to_their_layer(acc, role, ref):
    module = ref.partition(":")[0]
    assert layer(module) in ROLE_LAYERS[role], f"{acc}: {role} {ref} is in layer {layer(module)}"
    if role == "bench":
        assert module.startswith("pimforge.verif.tb."), ref
        assert (ROOT / Path(*module.split(".")[1:])).with_suffix(".py").is_file(), ref
    else:
        obj = registry.resolve(ref)
        if role in ("workload", "command"):
            assert callable(obj.add_arguments) and callable(obj.run), ref


# --- No private reach-ins, no import circles --------------------------------------------------

def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks (imports there exist only for annotations)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def private_reaches(path: Path, module: str, is_pkg: bool):
    """(line, what) for every private name this file takes from another first-party module:
    ``from pimforge.x import _name`` and ``x._name`` where ``x`` is an imported first-party
    module."""
    tree = ast.parse(path.read_text(), str(path))
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, is_pkg)
            if not target.startswith("pimforge."):
                continue
            for a in node.names:
                if _private(a.name):
                    yield node.lineno, f"{target}.{a.name}"
                if f"{target}.{a.name}" in _NAMES:
                    aliases[a.asname or a.name] = f"{target}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("pimforge.") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in aliases
                and aliases[node.value.id] != module):
            yield node.lineno, f"{aliases[node.value.id]}.{node.attr}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _resolve(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - (0 if is_pkg else 1)]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(modules=None) -> dict[str, set[str]]:
    """module -> the first-party modules it imports, at any depth of the file, outside
    ``if TYPE_CHECKING:``. ``from pkg import name`` counts as importing ``pkg.name`` where
    that is a module, else ``pkg``."""
    graph: dict[str, set[str]] = {}
    for path, module, is_pkg in (modules or MODULES):
        tree = ast.parse(path.read_text(), str(path))
        skip = _type_checking_lines(tree)
        edges = graph.setdefault(module, set())
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                target = _resolve(node, module, is_pkg)
                for a in node.names:
                    full = f"{target}.{a.name}"
                    edges.add(full if full in _NAMES else target)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names)
        edges.discard(module)
        graph[module] = {e for e in edges if e in _NAMES}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_private_first_party_imports():
    bad = [f"{path.relative_to(ROOT)}:{line}: {what}"
           for path, module, is_pkg in MODULES
           for line, what in private_reaches(path, module, is_pkg)]
    assert not bad, ("first-party private names used outside their module (make them "
                     "public or move them to a module both import):\n" + "\n".join(bad))


def test_no_import_circles():
    circles = import_circles(import_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_checkers_see_a_private_import_and_a_circle(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from .b import _hidden\nimport typing\nif typing.TYPE_CHECKING:\n"
                 "    from . import b\n")
    b.write_text("def f():\n    from . import a\n    return a._x\n")
    _NAMES.update({"pimforge.sim.a", "pimforge.sim.b"})
    try:
        mods = [(a, "pimforge.sim.a", False), (b, "pimforge.sim.b", False)]
        assert list(private_reaches(a, "pimforge.sim.a", False)) == [(1, "pimforge.sim.b._hidden")]
        assert list(private_reaches(b, "pimforge.sim.b", False)) == [(3, "pimforge.sim.a._x")]
        assert import_circles(import_graph(mods)) == [["pimforge.sim.a", "pimforge.sim.b"]]
        a.write_text("import typing\nif typing.TYPE_CHECKING:\n    from . import b\n")
        assert import_circles(import_graph(mods)) == []
    finally:
        _NAMES.difference_update({"pimforge.sim.a", "pimforge.sim.b"})
