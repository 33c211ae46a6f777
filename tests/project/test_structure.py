"""The layers of docs/architecture.md hold: the core never imports the service and the service
writes no SQL; and the packages' import graph has no cycles, read from the source (``ast``), so an
import under ``TYPE_CHECKING`` or inside a function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
#: The folders of the installed packages; ``resolvers/`` is installed as ``SERVICE``.
PACKAGES = ("graphmem", "resolvers")
SERVICE: Final = "graphmem.server"


def test_the_core_never_imports_the_service_and_the_service_writes_no_sql() -> None:
    code = (
        "import sys, graphmem, graphmem.cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'strawberry', 'starlette', 'resolvers', 'mcp'}"
        " | {m for m in sys.modules if m.startswith('graphmem.server')}))"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "[]"
    )
    sql_call = re.compile(r"\.execute(many)?\(\s*f?[\"']")  # a statement's text passed in
    for source in (ROOT / "resolvers").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert "sqlite3" not in text and "psycopg" not in text, source.name
        assert not sql_call.search(text), source.name


def test_the_service_has_one_name_graphmem_server() -> None:
    """The wheel installs ``resolvers/`` as ``graphmem.server`` (pyproject.toml), the name users
    import and the ``graphmem`` command runs: no code of the repository imports it as
    ``resolvers``, no doc shows that import, and the list of packages to install names every
    package folder."""
    sources = [
        source
        for folder in ("graphmem", "resolvers", "tests", "bench", "devtools")
        for source in sorted((ROOT / folder).rglob("*.py"))
    ]
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert other_name_imports(sources, docs) == []
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    assert setuptools["package-dir"] == {SERVICE: "resolvers"}
    folders = {
        _module(init) for package in PACKAGES for init in (ROOT / package).rglob("__init__.py")
    }
    assert sorted(setuptools["packages"]) == sorted(folders)


def test_an_import_of_the_service_as_resolvers_is_named(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from . import sibling\nimport graphmem.server.http.app\n"
        "def load():\n    from resolvers.mcp import tools\n    import resolvers\n",
        encoding="utf-8",
    )
    doc = tmp_path / "guide.md"
    doc.write_text("```python\nfrom resolvers import create_app\n```\n", encoding="utf-8")
    assert other_name_imports([planted], [doc]) == [
        f"{planted}: resolvers.mcp",
        f"{planted}: resolvers",
        f"{doc}: from resolvers import create_app",
    ]


def other_name_imports(sources: list[Path], docs: list[Path]) -> list[str]:
    """Each absolute import of the service by its folder's name, ``resolvers``, in ``sources``,
    and each such import line in ``docs``."""
    found = [
        f"{source}: {name}"
        for source in sources
        for name in _absolute_imports(source)
        if name.split(".")[0] == "resolvers"
    ]
    by_folder = re.compile(r"^\s*(?:from|import) resolvers\b.*$", re.M)
    return found + [
        f"{doc}: {line.strip()}"
        for doc in docs
        for line in by_folder.findall(doc.read_text(encoding="utf-8"))
    ]


#: The one module of the service that may use strawberry's private API (docs/architecture.md).
FAST_PATHS: Final = ROOT / "resolvers" / "graphql" / "fastpaths.py"


def test_only_the_fast_paths_use_a_private_strawberry_name() -> None:
    private = strawberry_private_names()
    found = [
        f"{source.relative_to(ROOT)}:{use}"
        for source in sorted((ROOT / "resolvers").rglob("*.py"))
        if source != FAST_PATHS
        for use in private_strawberry_uses(source.read_text(encoding="utf-8"), private)
    ]
    assert found == []
    assert private_strawberry_uses(FAST_PATHS.read_text(encoding="utf-8"), private) != []


def test_a_private_strawberry_name_is_found_however_it_is_reached() -> None:
    source = """
from strawberry.extensions import MaskErrors
from strawberry.types.arguments import _is_leaf_type
from strawberry.schema._private import thing

class Codes(MaskErrors):
    def _process_errors(self, errors):
        return errors

class Own:
    def __init__(self):
        self._cache = None
    def _process_errors(self):
        return self._cache

def admit(schema):
    return schema._schema
"""
    assert private_strawberry_uses(source, strawberry_private_names()) == [
        "3: _is_leaf_type",
        "4: strawberry.schema._private",
        "7: def _process_errors",
        "17: ._schema",
    ]


def strawberry_private_names() -> frozenset[str]:
    """The private names strawberry defines: its functions, classes and attributes whose name
    starts with one underscore."""
    import strawberry

    names: set[str] = set()
    for source in Path(strawberry.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return frozenset(n for n in names if n.startswith("_") and not n.endswith("__"))


def private_strawberry_uses(text: str, private: frozenset[str]) -> list[str]:
    """Each use of strawberry's private API in ``text``, by line: a private module or name
    imported from strawberry, a private method of a strawberry class overridden, a private
    strawberry attribute read that the module does not define itself."""
    tree = ast.parse(text)
    found: list[tuple[int, str]] = []
    from_strawberry = {"strawberry"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "strawberry":
            module = node.module or ""
            if any(part.startswith("_") for part in module.split(".")):
                found.append((node.lineno, module))
            for alias in node.names:
                from_strawberry.add(alias.asname or alias.name)
                if alias.name.startswith("_"):
                    found.append((node.lineno, alias.name))
    own = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(base).split(".")[0] for base in node.bases}
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in private:
                if bases & from_strawberry:
                    found.append((item.lineno, f"def {item.name}"))
                else:
                    own.add(item.name)
    found += [
        (node.lineno, f".{node.attr}")
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and node.attr in private
        and node.attr not in own
    ]
    return [f"{line}: {what}" for line, what in sorted(found)]


def _absolute_imports(source: Path) -> list[str]:
    """The modules ``source`` imports by absolute name, wherever in the file."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.append(node.module)
    return names


def test_only_the_storage_package_speaks_to_a_database_driver() -> None:
    """``sqlite3`` and ``psycopg`` are imported in ``graphmem/storage/`` alone: the rest of the
    engine reaches a store through ``graphmem.storage.interface``."""
    drivers = {"sqlite3", "psycopg"}
    outside = []
    for package in PACKAGES:
        for source in sorted((ROOT / package).rglob("*.py")):
            if source.is_relative_to(ROOT / "graphmem" / "storage"):
                continue
            outside += [
                f"{_module(source)}: {n}"
                for n in _absolute_imports(source)
                if n.split(".")[0] in drivers
            ]
    assert outside == []


#: The modules below storage (docs/architecture.md, "Storage is the floor"): the values the store
#: keeps and returns, their validation and the fixed registries, importing only each other.
BELOW_STORAGE: Final = frozenset(
    f"graphmem.{name}"
    for name in (
        "errors",  # the exception tree and its codes
        "limits",  # every fixed limit
        "ids",  # ids of facts and links, text hashes, namespace names
        "files",  # private files and folders, the namespace's vector folder
        "temporal",  # time values and the visibility rule (TimeScope)
        "jsonform",  # the JSON form of the result types (their to_dict)
        "timewords",  # the time grammar statedtime and timehints read
        "timehints",  # a period named by time words (TimeHint), a filter the store applies
        "statedtime",  # the time a fact's text states, a column of the fact
        "tagging",  # tags and categories, normalised as written
        "decay",  # decay classes and their TTLs, columns of the fact
        "models",  # Fact, Link, MaintenanceRun, the write input, Vectors, the job names
        "graph",  # link types, Node, Subgraph, Path
        "episodes",  # Episode, EpisodeInput
        "erasure",  # PurgeFilter, PurgeReport, Erasure
        "documents",  # DocumentFile, the notes' records
        "analytics",  # Clusters: what a cluster read returns
        "ranking",  # the keyword query's terms and the keyword columns' weights
        "settings",  # Settings, which open_store reads
    )
)
#: What code outside graphmem/storage/ may import of it: the package (open_store, open_keys,
#: backup, restore), the store's interface, and the key store's (ApiKey, KeyStore), which
#: graphmem exports. The engines' modules (storage.sql.*, storage.sqlite.*, storage.postgres.*)
#: stay inside.
STORAGE_FACES: Final = frozenset(
    {"graphmem.storage", "graphmem.storage.interface", "graphmem.storage.keys"}
)


def test_storage_is_the_floor_the_rest_of_graphmem_stands_on() -> None:
    """``graphmem/storage/`` imports nothing of graphmem but the modules below it, which import
    only each other; the rest imports storage only through its faces, which import no
    implementation; the shared SQL imports neither engine and neither engine the other."""
    assert storage_layer_violations(import_graph()) == []


def test_a_storage_import_above_or_into_an_engine_is_named() -> None:
    graph = {
        "graphmem.storage.sql.maintenance": {"graphmem.maintenance", "graphmem.models"},
        "graphmem.storage.sql.keyword_index": {"graphmem.storage.sqlite.migrations"},
        "graphmem.storage.postgres.keyword": {"graphmem.storage.sqlite.keyword"},
        "graphmem.storage.sqlite.keyword": {"graphmem.storage.sql.keyword"},
        "graphmem.storage.interface": {"graphmem.models", "graphmem.storage.sql.graph_copy"},
        "graphmem.models": {"graphmem.errors", "graphmem.vectors.embedders"},
        "graphmem.search": {"graphmem.storage.sql.reads", "graphmem.storage.interface"},
        "graphmem.cli": {"graphmem.storage"},
        "graphmem.server.http.app": {"graphmem.storage.keys", "graphmem.storage.postgres"},
    }
    assert storage_layer_violations(graph) == [
        "graphmem.models (below storage) imports graphmem.vectors.embedders",
        "graphmem.search imports graphmem.storage.sql.reads, inside storage",
        "graphmem.server.http.app imports graphmem.storage.postgres, inside storage",
        "graphmem.storage.interface imports graphmem.storage.sql.graph_copy: a face imports no"
        " implementation",
        "graphmem.storage.postgres.keyword imports graphmem.storage.sqlite.keyword, the other engine",
        "graphmem.storage.sql.keyword_index imports graphmem.storage.sqlite.migrations, an engine",
        "graphmem.storage.sql.maintenance imports graphmem.maintenance, above storage",
    ]


def test_no_module_is_part_of_an_import_cycle() -> None:
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_cycle_is_named_by_a_shortest_path_back_to_its_start() -> None:
    graph = {"a": {"b", "x"}, "b": {"c", "a"}, "c": {"a"}, "d": {"d"}, "e": {"a"}, "x": set()}
    assert import_cycles(graph) == [["a", "b", "a"], ["d", "d"]]


def test_imports_under_type_checking_and_inside_functions_are_edges_too() -> None:
    source = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .types import Fact
def load():
    from graphmem.server.graphql import schema
    import graphmem.graph
    from . import Context
"""
    assert set(_imports("graphmem.server.context", ast.parse(source), package="")) == {
        "graphmem.server.types",
        "graphmem.server.graphql.schema",
        "graphmem.graph",
        "graphmem.server",
    }


# ------------------------------------------------------------------------------------ helpers


def import_graph() -> dict[str, set[str]]:
    """Every module of ``PACKAGES`` and the modules of ``PACKAGES`` it imports."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = _module(path)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            graph[name] = set(_imports(name, tree, package=name if path.stem == "__init__" else ""))
    return graph


def storage_layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that breaks the storage floor's rules (see
    :func:`test_storage_is_the_floor_the_rest_of_graphmem_stands_on`), as a sentence."""
    engines = ("graphmem.storage.sqlite", "graphmem.storage.postgres")

    def within(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    found = []
    for module, imports in sorted(graph.items()):
        for imported in sorted(imports):
            if within(module, "graphmem.storage"):
                own = next((e for e in engines if within(module, e)), None)
                other = next((e for e in engines if within(imported, e)), None)
                if not within(imported, "graphmem.storage") and imported not in BELOW_STORAGE:
                    found.append(f"{module} imports {imported}, above storage")
                elif module in STORAGE_FACES - {"graphmem.storage"} and within(
                    imported, "graphmem.storage"
                ):
                    found.append(f"{module} imports {imported}: a face imports no implementation")
                elif other is not None and own is None and module != "graphmem.storage":
                    found.append(f"{module} imports {imported}, an engine")
                elif other is not None and own is not None and other != own:
                    found.append(f"{module} imports {imported}, the other engine")
            elif module in BELOW_STORAGE:
                if imported not in BELOW_STORAGE:
                    found.append(f"{module} (below storage) imports {imported}")
            elif within(imported, "graphmem.storage") and imported not in STORAGE_FACES:
                found.append(f"{module} imports {imported}, inside storage")
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """A shortest cycle through each group of modules that import each other, as a path back to
    its start (``["a", "b", "a"]``), so a failure names the imports to untangle."""
    digraph = nx.DiGraph([(m, i) for m, imports in graph.items() for i in sorted(imports)])
    cycles = []
    for component in nx.strongly_connected_components(digraph):
        start = min(component)
        if len(component) > 1 or digraph.has_edge(start, start):
            loops = (
                [start, *nx.shortest_path(digraph, other, start)]
                for other in digraph.successors(start)
                if other in component
            )
            cycles.append(min(loops, key=lambda loop: (len(loop), loop)))
    return sorted(cycles)


def _module(path: Path) -> str:
    """The dotted name of the module at ``path`` (a package's for its ``__init__.py``), the
    service's by its installed name."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return SERVICE + name.removeprefix("resolvers") if name.split(".")[0] == "resolvers" else name


def _imports(module: str, tree: ast.Module, *, package: str) -> Iterator[str]:
    """The modules of ``PACKAGES`` that ``module`` imports anywhere in its source (``package``:
    ``module`` itself when it is a package's ``__init__``, else empty).

    ``from P import name`` is an import of the submodule ``P.name`` when there is one, else of
    ``P`` itself (its ``__init__``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if _internal(a.name))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module if module == package else module.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    parent = parent.rsplit(".", 1)[0]
                base = f"{parent}.{base}" if base else parent
            if not _internal(base):
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if _exists(submodule) else base


def _internal(name: str) -> bool:
    return name.split(".")[0] == "graphmem"


def _exists(module: str) -> bool:
    if module == SERVICE or module.startswith(SERVICE + "."):
        module = "resolvers" + module.removeprefix(SERVICE)
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_the_installed_packages_hold_no_development_tool() -> None:
    """The topology launcher (initdb, haproxy, libfaketime, moto) lives in ``devtools/``, which
    is not installed; nothing installed imports it."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    installed = pyproject["tool"]["setuptools"]["packages"]
    assert not [p for p in installed if p.startswith("devtools")]
    for package in PACKAGES:
        for source in (ROOT / package).rglob("*.py"):
            imported = _absolute_imports(source)
            assert not {n for n in imported if n.split(".")[0] in ("devtools", "moto")}, source


def test_the_architecture_page_lists_every_module_and_only_modules_that_exist() -> None:
    """docs/architecture.md names each module by its path inside its package (``writer.py``,
    ``storage/sql/reads.py``, ``mcp/tools.py``); a subpackage's ``__init__.py`` may go unnamed
    (the package is), and every path the page's tables name exists."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+\.py)`", page))
    modules = {
        source.relative_to(ROOT / package).as_posix(): package
        for package in PACKAGES
        for source in (ROOT / package).rglob("*.py")
        if source.name != "__init__.py" or source.parent == ROOT / package
    }
    assert sorted(set(modules) - named) == []
    stale = {
        path
        for path in named
        if not any((ROOT / root / path).is_file() for root in (*PACKAGES, "devtools", "."))
    }
    assert sorted(stale) == []
