"""What the docs say about the repository stays true: every repository path they name exists, no
prose counts what the code enumerates (a count is generated from the code or not written), and
docs/architecture.md's claims about who touches what are the imports and calls the code makes."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from .test_structure import import_graph

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Paths of other projects that a page names (files of their own repositories).
FOREIGN_PATHS = {"docs/compatibility.md": {"tests/test_store.py", "tests/test_async_store.py"}}

#: A number of two or more, in words or digits ("one" reads as an article too often).
_NUMBER = (
    r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|\d+)"
)
#: The things the code enumerates: a count of them in prose goes stale when one is added.
_COUNTED = (
    r"(?:MCP )?tools|formats|link types|link origins|settings|error codes|time forms|"
    r"decay classes|upkeep jobs|jobs|modules|commands|verbs|markers|registries"
)
_COUNT = re.compile(rf"\b{_NUMBER} (?:{_COUNTED})\b", re.I)


def test_every_repository_path_a_doc_names_exists() -> None:
    missing = [
        f"{page}: {path}"
        for page, text in pages().items()
        for path in sorted(named_paths(page, text) - FOREIGN_PATHS.get(page, set()))
        if not exists(path)
    ]
    assert missing == [], "docs name paths that do not exist (moved?):\n" + "\n".join(missing)


def test_a_path_is_named_in_prose_in_code_or_by_a_link() -> None:
    text = (
        "See `graphmem/keys.py` and resolvers/mcp.py, [the guide](clients.md#x), "
        "[a site](https://example.org/a.md), tests/core/test_time_*.py and bench/out/*.json."
    )
    assert named_paths("docs/page.md", text) == {
        "graphmem/keys.py",
        "resolvers/mcp.py",
        "docs/clients.md",
        "tests/core/test_time_*.py",
        "bench/out/*.json",
    }
    assert [p for p in sorted(named_paths("docs/page.md", text)) if not exists(p)] == [
        "graphmem/keys.py",
        "resolvers/mcp.py",
    ]


def test_no_prose_counts_what_the_code_enumerates() -> None:
    counted = [
        f"{page}:{number}: {match[0]}"
        for page, text in pages().items()
        if page != "docs/cli.md"  # generated from the CLI itself
        for number, line in enumerate(_outside_generated(text).splitlines(), 1)
        for match in _COUNT.finditer(line)
    ]
    assert counted == [], "generate these counts from the code, or drop them:\n" + "\n".join(
        counted
    )
    assert _COUNT.search("graphmem's memory as seventeen tools") is not None
    assert _COUNT.search("the 17 tools") and _COUNT.search("one of three formats")
    assert _COUNT.search("the two legs, one tool call, 20 operations") is None


def test_the_engine_modules_the_service_imports_are_the_ones_architecture_lists() -> None:
    graph = import_graph()
    imported = {
        target
        for module, targets in graph.items()
        if module.startswith("graphmem.server")
        for target in targets
        if not target.startswith("graphmem.server")
    }
    block = re.search(
        r"<!-- engine modules the service imports -->\n(.*?)<!-- end",
        ARCHITECTURE.read_text(),
        re.S,
    )
    assert block, "docs/architecture.md lost its list of the engine modules the service imports"
    listed = re.findall(r"`([\w.]+)`", block[1])
    assert listed == sorted(listed), "keep the list sorted"
    assert sorted(imported - set(listed)) == [], "imported but not listed in docs/architecture.md"
    assert sorted(set(listed) - imported) == [], "listed in docs/architecture.md, not imported"


def test_memory_writes_itself_only_what_architecture_says() -> None:
    """Memory opens transactions of its own only for what architecture.md names; every fact and
    link it writes goes through the writer."""
    row = re.search(r"^\| `memory\.py` \|.*$", ARCHITECTURE.read_text(), re.M)
    assert row, "docs/architecture.md has no row for memory.py"
    documented = set(re.findall(r"`Transaction\.(\w+)`", row[0]))
    source = (ROOT / "graphmem" / "memory.py").read_text(encoding="utf-8")
    assert transaction_calls(source) == documented


def test_the_calls_on_a_transaction_are_read_from_each_with_block() -> None:
    source = """
def f(self):
    with self._store.transaction() as tx:
        tx.set_meta("k", {})
    with self._store.transaction() as batch, other() as o:
        batch.add_fact(fact)
        o.close()
    tx.unrelated()
"""
    assert transaction_calls(source) == {"set_meta", "add_fact"}


# ------------------------------------------------------------------------------------ helpers


def pages() -> dict[str, str]:
    """The pages a reader meets, by their path: the README, docs/, the bench report and the
    changelog up to its Unreleased part's end (earlier entries name the files of their time)."""
    found = {
        p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
        for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    }
    found["bench/REPORT.md"] = (ROOT / "bench" / "REPORT.md").read_text(encoding="utf-8")
    head, unreleased = (
        (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").split("\n## Unreleased\n")
    )
    found["CHANGELOG.md"] = head + "\n## Unreleased\n" + unreleased.split("\n## ", 1)[0]
    return found


def named_paths(page: str, text: str) -> set[str]:
    """The repository paths ``text`` (the page at ``page``) names, from the repository's root: a
    path starting with one of its top-level folders, anywhere in the text, and a relative link's
    target (its anchor dropped)."""
    tops = "|".join(re.escape(t) for t in sorted(_top_folders()))
    paths = {
        m[1].rstrip(".")
        for m in re.finditer(rf"(?<![\w./-])((?:{tops})/[\w./*-]*[\w/*])", text)
        if not m[1].endswith("/")
    }
    paths |= {m[1] for m in re.finditer(rf"(?<![\w./-])((?:{tops})/[\w./-]*/)(?![\w*])", text)}
    for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+:", target):
            paths.add((Path(page).parent / target).as_posix())
    return {_normal(p) for p in paths}


def exists(path: str) -> bool:
    """Whether ``path`` (from the root; ``*`` matches as in a glob) is in the repository, or
    under a folder .gitignore keeps for outputs (``bench/out/``)."""
    outputs = [
        line.strip("/")
        for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
        if line.endswith("/") and "/" in line.strip("/")
    ]
    if any(path == o or path.startswith(f"{o}/") for o in outputs):
        return True
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


def transaction_calls(source: str) -> set[str]:
    """The methods called on the transactions ``source`` opens (``with ….transaction() as
    tx``), inside the ``with`` block."""
    calls: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.With):
            continue
        names = {
            item.optional_vars.id
            for item in node.items
            if isinstance(item.optional_vars, ast.Name)
            and isinstance(item.context_expr, ast.Call)
            and isinstance(item.context_expr.func, ast.Attribute)
            and item.context_expr.func.attr == "transaction"
        }
        for inner in (n for statement in node.body for n in ast.walk(statement)):
            if (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Attribute)
                and isinstance(inner.func.value, ast.Name)
                and inner.func.value.id in names
            ):
                calls.add(inner.func.attr)
    return calls


def _top_folders() -> set[str]:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return {path.split("/")[0] for path in tracked if "/" in path}


def _normal(path: str) -> str:
    """``path`` with ``..`` and ``.`` segments resolved, without touching the file system."""
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts) + ("/" if path.endswith("/") else "")


def _outside_generated(text: str) -> str:
    """``text`` with its generated sections blanked, line for line (their counts come from the
    code)."""
    return re.sub(
        r"(?<=-->\n).*?(?=<!-- end generated)",
        lambda m: "\n" * m[0].count("\n"),
        text,
        flags=re.S,
    )
