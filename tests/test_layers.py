"""The package's rooms and who may import whom (README, Layout).

The description layer (``supernic.desc``, with the package's base: ``supernic.cache``,
``supernic.toolchain`` and the ``chains`` data) imports only itself;
hw/ may import it; the driver may import it; sim/ may import those three; tools/ everything but
the CLI; the CLI (``supernic.driver.cli``) is the application and reaches every room. Every
import counts, a function's too, so nothing imports in a circle and the driver runs on a host
that has no Amaranth (a board's). The import checks are also run on a copy of the tree with a
bad import put in, to show they catch one.
"""

import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Folder -> import package (pyproject.toml's package-dir), longest folder first.
FOLDERS = (("sw/driver", "supernic.driver"), ("sw/desc", "supernic.desc"), ("hw", "supernic.hw"),
           ("sim", "supernic.sim"), ("tools", "supernic.tools"), ("chains", "supernic.chains"),
           ("sw", "supernic"))

#: Room -> the rooms it may import.
MAY_IMPORT = {
    "desc": set(),
    "hw": {"desc"},
    "driver": {"desc"},
    "sim": {"desc", "hw", "driver"},
    "tools": {"desc", "hw", "driver", "sim"},
    "cli": {"desc", "hw", "driver", "sim", "tools"},
}

#: Rooms that must not import Amaranth (nor anything that does).
NO_AMARANTH = {"desc", "driver"}


def room(module):
    """The room of a ``supernic`` module (``None``: not ours)."""
    parts = module.split(".")
    if parts[0] != "supernic":
        return None
    if module == "supernic.driver.cli" or module.startswith("supernic.driver.cli."):
        return "cli"
    if len(parts) == 1 or parts[1] in ("desc", "cache", "toolchain", "chains"):
        return "desc"
    return {"hw": "hw", "sim": "sim", "driver": "driver", "tools": "tools"}.get(parts[1])


def modules(root):
    """``{module name: path}`` of every Python file of the package under ``root``."""
    found = {}
    for folder, package in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if any(path.is_relative_to(root / f) for f, _ in FOLDERS
                   if f != folder and (root / f).is_relative_to(root / folder)):
                continue
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def imports(name, path, known=()):
    """``[(imported module, line)]`` of every import in a module, at any depth; a name
    ``from`` a package imports counts as a module when it is one of ``known``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            out.append((target, node.lineno))
            # ``from . import x`` may name a module.
            out += [(f"{target}.{alias.name}", node.lineno) for alias in node.names
                    if f"{target}.{alias.name}" in known]
    return out


def violations(root):
    """Imports that break the rooms' order, one line each."""
    bad = []
    found = modules(root)
    for name, path in found.items():
        mine = room(name)
        for target, line in imports(name, path, found):
            where = f"{path.relative_to(root)}:{line}"
            if target.split(".")[0] == "amaranth" and mine in NO_AMARANTH:
                bad.append(f"{where}: {mine} imports {target}")
            theirs = room(target)
            if theirs is None or theirs == mine or theirs in MAY_IMPORT[mine]:
                continue
            bad.append(f"{where}: {mine} imports {theirs} ({target})")
    return sorted(set(bad))


def cycles(root):
    """Cycles between rooms in the import graph (each as a list of rooms)."""
    edges = {r: set() for r in MAY_IMPORT}
    found = modules(root)
    for name, path in found.items():
        mine = room(name)
        for target, _ in imports(name, path, found):
            theirs = room(target)
            if theirs is not None and theirs != mine:
                edges[mine].add(theirs)
    loops, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(edges[node]):
            if state.get(nxt) == "open":
                loops.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"
    for r in sorted(edges):
        if r not in state:
            visit(r, [r])
    return loops


def test_every_import_keeps_the_rooms_order():
    assert violations(ROOT) == []


def test_no_cycle_between_the_rooms():
    assert cycles(ROOT) == []


def _tree_copy(tmp_path):
    copy = tmp_path / "tree"
    for folder in ("sw", "hw", "sim", "tools", "chains"):
        shutil.copytree(ROOT / folder, copy / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "obj_dir"))
    return copy


@pytest.mark.parametrize("where, line, expect", [
    # The driver reaching into a model: the circle the issue found (sim imports the driver).
    ("sw/driver/status.py", "    from ..sim.parser_model import ParserModel",
     "driver imports sim"),
    # The description layer loading Amaranth.
    ("sw/desc/config.py", "    import amaranth.hdl", "desc imports amaranth.hdl"),
    # hw reaching into sim, as hw/nt/load_balancer.py once did for Maglev.
    ("hw/nt/acl.py", "    from ...sim.toeplitz import toeplitz_hash", "hw imports sim"),
    # A driver module loading Amaranth (a board's host would need the generator).
    ("sw/driver/status.py", "    from amaranth.lib import data", "driver imports amaranth.lib"),
])
def test_a_bad_import_is_caught(tmp_path, where, line, expect):
    tree = _tree_copy(tmp_path)
    path = tree / where
    path.write_text(path.read_text() + f"\n\ndef _bad():\n{line}\n")
    found = violations(tree)
    assert any(expect in v and where in v for v in found), found
    if "amaranth" not in expect:
        assert cycles(tree) != []


#: Runs in a fresh interpreter where importing Amaranth fails, as on a host without it.
_NO_AMARANTH = textwrap.dedent("""
    import importlib.abc, sys

    class NoAmaranth(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "amaranth":
                raise ImportError(f"{name}: Amaranth is not installed on this host")
            return None
    sys.meta_path.insert(0, NoAmaranth())

    import importlib, pkgutil
    import supernic.desc, supernic.driver
    for package in (supernic.desc, supernic.driver):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(info.name)
    from supernic.desc.block_types import block_types
    from supernic.desc.chain import load_chain
    from supernic.desc.nic.blocks import nic_register_map
    from supernic.desc.config import load_config
    kinds = {name for name, _ in block_types().values()}
    spec = load_chain(sys.argv[1] + "/chains/web.toml")
    regmap = nic_register_map(load_config(sys.argv[1] + "/chains/default.toml"))
    from supernic.driver.cli import main
    codes = [main(["status", "--socket", sys.argv[2]]),
             main(["deploy", sys.argv[1] + "/chains/web.toml", "--tenant", "0",
                   "--socket", sys.argv[2]])]
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "amaranth")
    import json
    print(json.dumps([len(kinds), len(regmap.blocks), codes, loaded]))
""")


def test_the_driver_runs_without_amaranth(tmp_path):
    """Every module of the driver and the description layer imports, a chain and a design are
    read, and ``snic status`` and ``snic deploy`` run to their one-line error (no device) with
    Amaranth unimportable."""
    result = subprocess.run([sys.executable, "-c", _NO_AMARANTH, str(ROOT),
                             str(tmp_path / "none.sock")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    kinds, blocks, codes, loaded = json.loads(result.stdout.splitlines()[-1])
    assert kinds >= 20 and blocks > 10
    assert codes == [2, 2], result.stderr
    assert loaded == []
    assert result.stderr.count("snic: error:") == 2, result.stderr
