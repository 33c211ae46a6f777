"""Docs that cannot drift: the CLI reference is generated from the CLI, and the tables of
enumerated facts (time forms, settings, limits, error codes, decay classes, link origins,
maintenance jobs) from their registries, between ``<!-- begin generated NAME -->`` and
``<!-- end generated NAME -->``.

Regenerate them after changing a command or a registry:
``.venv/bin/python -m tests.project.test_docs``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal, get_args, get_origin

from annotated_types import Ge, Gt, Le
from click.testing import CliRunner
from graphmem.server.commands import cli  # the full command set, serve included
from graphmem.server.cost import LIST_SIZES, WORK
from pydantic.fields import FieldInfo

import graphmem
from graphmem import Settings
from graphmem.decay import DECAY_RULES, ttl_in_words
from graphmem.errors import CODES, Code, GraphmemError
from graphmem.limits import LIMITS
from graphmem.maintenance import REGISTRY
from graphmem.models import LINK_ORIGINS
from graphmem.settings import ENV_PREFIX
from graphmem.temporal import ACCEPTED_TIMES, TIME_FORMS

DOCS = Path(__file__).resolve().parents[2] / "docs"
HEADER = f"""# CLI reference

Generated from `graphmem --help` by `python -m tests.project.test_docs`; a test fails when it
drifts. Errors print `error [CODE]: message` on stderr and exit with status 1; usage errors exit 2.
Times are {ACCEPTED_TIMES}.
"""


def render_cli_doc() -> str:
    runner = CliRunner()
    parts = [
        HEADER,
        "## graphmem\n",
        "```",
        runner.invoke(cli, ["--help"], prog_name="graphmem", terminal_width=100).output.rstrip(),
        "```\n",
    ]
    for name in sorted(cli.commands):
        help_text = runner.invoke(
            cli, [name, "--help"], prog_name="graphmem", terminal_width=100
        ).output.rstrip()
        parts += [f"## graphmem {name}\n", "```", help_text, "```\n"]
    return "\n".join(parts)


def test_the_cli_reference_matches_the_cli() -> None:
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == render_cli_doc(), (
        "docs/cli.md is stale: run `.venv/bin/python -m tests.project.test_docs`"
    )


def test_every_setting_is_documented_with_its_environment_variable() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for name in Settings.model_fields:
        assert f"`{name}`" in text and f"GRAPHMEM_{name.upper()}" in text, name


# ------------------------------------------------------------------------------------ sections


def render_time_forms() -> str:
    rows = [f"| {f.form} | `{f.example}` | {f.means} |" for f in TIME_FORMS]
    return "\n".join(["| form | example | means |", "|---|---|---|", *rows])


def render_errors(surface: str) -> str:
    """The codes clients of ``surface`` (``graphql`` or ``mcp``) meet, with the HTTP status of
    a request refused as a whole."""
    rows = [
        f"| `{code}` | {CODES[code].http_status or '—'} | {CODES[code].meaning} |"
        for code in Code
        if getattr(CODES[code], surface)
    ]
    return "\n".join(["| code | HTTP | meaning |", "|---|---|---|", *rows])


def render_settings() -> str:
    rows = [
        f"| `{name}` | `{ENV_PREFIX}{name.upper()}` | {_default(info.default)} | {_allowed(info)} "
        f"| {info.description} |"
        for name, info in Settings.model_fields.items()
    ]
    return "\n".join(
        [
            "| setting | environment | default | allowed | meaning |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )


def render_maintenance_jobs() -> str:
    rows = []
    for job in REGISTRY.values():
        period = Settings.model_fields[job.interval_setting].default
        counts = ", ".join(f"`{kind}`" for kind in job.changes)
        default = f"{period:g} s" if period else "0 (off)"
        rows.append(
            f"| `{job.name}` | {job.description} | {counts} | `{job.cost}` "
            f"| `{job.interval_setting}` | {default} |"
        )
    return "\n".join(
        [
            "| job | what it does | counts | cost | period setting | default |",
            "|---|---|---|---|---|---|",
            *rows,
        ]
    )


def _default(value: object) -> str:
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return ", ".join(value)
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def render_decay_classes() -> str:
    rows = [
        f"| {r.name} | {ttl_in_words(r.ttl)} | {'yes' if r.refreshed else 'no'} | {r.chosen_when} |"
        for r in DECAY_RULES
    ]
    return "\n".join(
        ["| class | TTL | refreshed by recall | chosen when |", "|---|---|---|---|", *rows]
    )


def render_link_origins() -> str:
    rows = [f"| `{origin}` | {meaning} |" for origin, meaning in LINK_ORIGINS.items()]
    return "\n".join(["| origin | the link is |", "|---|---|", *rows])


def render_limits() -> str:
    rows = [f"| `{k.name}` | {k.value:,} {k.unit} | {k.bounds} |" for k in LIMITS]
    return "\n".join(["| limit | at most | of |", "|---|---|---|", *rows])


#: The settings that limit one request, listed on the GraphQL page.
REQUEST_LIMITS = (
    "max_body_bytes",
    "graphql_max_depth",
    "graphql_max_tokens",
    "graphql_max_aliases",
    "graphql_max_cost",
    "graphql_max_response_bytes",
    "rate_limit_per_minute",
    "sql_time_limit",
)


def render_request_limits() -> str:
    rows = []
    for name in REQUEST_LIMITS:
        info = Settings.model_fields[name]
        rows.append(
            f"| `{name}` | {_default(info.default)} | {_allowed(info)} | {info.description} |"
        )
    return "\n".join(["| setting | default | allowed | meaning |", "|---|---|---|---|", *rows])


def _allowed(info: FieldInfo) -> str:
    """What a setting may be: its choices, or the range its constraints allow."""
    choices = [a for a in get_args(info.annotation) if isinstance(a, str)]
    if get_origin(info.annotation) is Literal:
        return ", ".join(f"`{c}`" for c in choices)
    low = next((f"{m.ge:,}" for m in info.metadata if isinstance(m, Ge)), None)
    above = next((f"above {m.gt:,}" for m in info.metadata if isinstance(m, Gt)), None)
    high = next((f"{m.le:,}" for m in info.metadata if isinstance(m, Le)), None)
    if high is not None:
        return f"{low} to {high}" if low is not None else f"{above}, at most {high}"
    return above or (f"{low} or more" if low is not None else "")


def render_list_sizes() -> str:
    """What each list counts for in a document's cost (``graphmem.server.cost``)."""
    rows = []
    for (parent, field), size in LIST_SIZES.items():
        if size.counted_above:
            counts = "nothing more: its items are counted at the field above"
        elif size.argument is None:
            counts = size.note or f"{size.fixed:,}"
        else:
            where = "of the field above" if size.of_parent else ""
            what = "the number of" if size.argument in ("inputs", "messages") else "its"
            counts = f"{what} `{size.argument}` {where} (at most {size.cap:,})".replace("  ", " ")
            counts = size.note.replace("`maxNodes`", counts) if size.note else counts
        if size.unbounded:
            counts += "; no bound is known, so the document runs off the event loop"
        rows.append(f"| `{parent}.{field}` | {counts} |")
    for (parent, field), work in WORK.items():
        rows.append(f"| `{parent}.{field}` | its work, counted as {work:,} items, and its answer |")
    return "\n".join(["| field | counts as |", "|---|---|", *rows])


#: Each generated section: its name, the page holding it and what renders it.
SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "time-forms": ("concepts.md", render_time_forms),
    "settings": ("configuration.md", render_settings),
    "decay-classes": ("concepts.md", render_decay_classes),
    "link-origins": ("graph.md", render_link_origins),
    "graphql-errors": ("graphql.md", lambda: render_errors("graphql")),
    "mcp-errors": ("mcp.md", lambda: render_errors("mcp")),
    "limits": ("configuration.md", render_limits),
    "request-limits": ("graphql.md", render_request_limits),
    "list-sizes": ("security.md", render_list_sizes),
    "maintenance-jobs": ("agents.md", render_maintenance_jobs),
}


def embed(text: str, name: str, content: str) -> str:
    """``text`` with the section ``name`` (between its markers) replaced by ``content``."""
    pattern = re.compile(
        rf"(<!-- begin generated {name} -->\n).*?(<!-- end generated {name} -->)", re.S
    )
    assert pattern.search(text), f"no generated section {name!r}"
    return pattern.sub(lambda m: m[1] + content + "\n" + m[2], text)


def render_pages() -> dict[str, str]:
    """Every page holding generated sections, as it should read."""
    pages: dict[str, str] = {}
    for name, (page, render) in SECTIONS.items():
        text = pages.get(page) or (DOCS / page).read_text(encoding="utf-8")
        pages[page] = embed(text, name, render())
    return pages


def test_the_generated_sections_match_their_registries() -> None:
    stale = [
        page
        for page, text in render_pages().items()
        if (DOCS / page).read_text(encoding="utf-8") != text
    ]
    assert not stale, (
        f"stale generated sections in {stale}: run `.venv/bin/python -m tests.project.test_docs`"
    )


def test_every_error_code_is_documented_and_every_documented_code_exists() -> None:
    documented: set[str] = set()
    for page in sorted(DOCS.glob("*.md")):
        for table in re.findall(r"^\| code \|.*\n(?:\|.*\n)+", page.read_text("utf-8"), re.M):
            documented |= set(re.findall(r"^\| `([A-Z_]+)`", table, re.M))
    raised = {cls.code for cls in _error_classes() if cls.__name__ in graphmem.__all__}
    assert documented <= set(Code), f"documented codes that do not exist: {documented - set(Code)}"
    assert set(Code) <= documented | raised, f"undocumented codes: {set(Code) - documented}"
    assert set(CODES) == set(Code)


def _error_classes(root: type[GraphmemError] = GraphmemError) -> list[type[GraphmemError]]:
    return [c for sub in root.__subclasses__() for c in (sub, *_error_classes(sub))]


def test_no_text_cites_documents_outside_the_repository() -> None:
    """Comments, docstrings, descriptions and docs say what they mean, not where a design note
    kept elsewhere said it."""
    root = DOCS.parent
    files = [
        *(root / "graphmem").glob("*.py"),
        *(root / "resolvers").rglob("*.py"),
        *DOCS.glob("*.md"),
        *(root / "bench").glob("*.md"),
        root / "README.md",
        root / "schema.graphql",
    ]
    outside = re.compile(r"DESIGN(\.md| §)|\bseeds?\b|seeds'|design card", re.I)
    cited = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if outside.search(line)
    ]
    assert not cited, "\n".join(cited)


def test_the_readme_points_at_the_bench_report_instead_of_copying_its_figures() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    assert "bench/REPORT.md" in readme
    figures = re.findall(r"[\d.,\u2013]+ ?(?:ms|facts/s)\b|\bp(?:50|95)\b", readme)
    assert not figures, figures


def _prose_paragraphs(text: str) -> list[str]:
    """Paragraphs and list items of a Markdown text, without code blocks and tables."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    blocks = [b for b in re.split(r"\n\s*\n", text) if not b.lstrip().startswith("|")]
    return [item for block in blocks for item in re.split(r"\n\s*(?:[-*]|\d+\.) ", block)]


def test_the_readme_reads_in_short_paragraphs_and_the_report_keeps_to_its_length() -> None:
    # The report holds the latest figure of each bench; detail and history go to bench/history/.
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    longest = max(_prose_paragraphs(readme), key=lambda p: len(p.split()))
    assert len(longest.split()) < 120, longest
    report = (DOCS.parent / "bench" / "REPORT.md").read_text(encoding="utf-8")
    assert len(report.splitlines()) < 800, "move detail to bench/history/ and link it"


if __name__ == "__main__":
    (DOCS / "cli.md").write_text(render_cli_doc(), encoding="utf-8")
    for page, text in render_pages().items():
        (DOCS / page).write_text(text, encoding="utf-8")
