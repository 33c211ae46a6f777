"""The ``graphmem`` command line.

Global options pick the store (``--data-dir``, ``--namespace``, ``--embedder``, ``--config``);
each command opens the namespace, does one thing and closes it. ``--json`` prints data as JSON.
Errors print ``error [CODE]: message`` on stderr and exit with status 1 (2 for usage errors).

The commands are listed in ``COMMANDS`` and ``command_group`` puts them in a group; ``cli`` is
the core's command line, and the service (``graphmem.server.commands``) builds the installed one with
its own commands added.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO, Any, Final

import click
import watchfiles
from pydantic import BaseModel

from . import storage
from .documents import SyncReport
from .entities import KNOWN_AT as ENTITIES_KNOWN_AT
from .entities import Entity
from .errors import GraphmemError, InvalidInput, NotFound
from .files import private_opener
from .graph import DIRECTIONS, Subgraph, TraverseInput
from .maintenance import REGISTRY
from .memory import Memory
from .models import (
    KEEPS,
    RERANK_CHOICES,
    SEARCH_MODES,
    CaptureInput,
    Fact,
    FactInput,
    Keep,
    Link,
    LinkInput,
    MaintenanceRun,
    SearchInput,
)
from .recall import DEFAULT_MAX_TOKENS, FORMATS
from .settings import DEFAULT_CONFIG_FILE, EMBEDDERS, ENV_PREFIX, Settings
from .storage import open_keys
from .temporal import to_iso
from .version import __version__


def command_group(*extra: click.Command) -> click.Group:
    """A new ``graphmem`` command group: the global options, the core's ``COMMANDS`` and
    ``extra`` (the service's commands). Each call builds its own group, so adding commands to
    one never changes another."""

    @click.group("graphmem", context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="graphmem")
    @click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help=f"Directory of namespaces [default: {_setting('data_dir')}].",
    )
    @click.option("--namespace", "-n", help=f"Namespace to use [default: {_setting('namespace')}].")
    @click.option(
        "--embedder",
        type=click.Choice(EMBEDDERS),
        help=f"Embedding provider [default: {_setting('embedder')}].",
    )
    @click.option(
        "--config",
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"TOML settings file [default: {ENV_PREFIX}CONFIG or ./{DEFAULT_CONFIG_FILE}].",
    )
    @click.pass_context
    def group(
        ctx: click.Context,
        /,
        data_dir: Path | None,
        namespace: str | None,
        embedder: str | None,
        config: Path | None,
    ) -> None:
        """graphmem: bi-temporal graph memory for AI agents."""
        ctx.obj = Settings.load(
            config_file=config, data_dir=data_dir, namespace=namespace, embedder=embedder
        )

    for command in (*COMMANDS, *extra):
        group.add_command(command)
    return group


def run(group: click.Group) -> None:
    """Run ``group`` as the console command, turning graphmem errors into a message and exit 1."""
    try:
        group.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except GraphmemError as exc:
        click.echo(f"error [{exc.code}]: {exc.message}", err=True)
        sys.exit(1)


def _setting(name: str) -> str:
    """The default of setting ``name`` and the variable that changes it, for option help."""
    return f"{Settings.model_fields[name].default}, or {ENV_PREFIX}{name.upper()}"


def _input_option(
    model: type[BaseModel], name: str, help_before: str = "", **kwargs: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The option ``--name`` that sets the field ``name`` of ``model``, helped by its
    description, defaulting to its default."""
    field = model.model_fields[name]
    return click.option(
        f"--{name.replace('_', '-')}",
        help=help_before + (field.description or ""),
        default=field.default,
        **kwargs,
    )


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
_EPISODE_HELP: Final = (
    "The id of the conversation session or document this comes from (recorded on first use): "
    "each fact added belongs to it, linked to the one before it."
)
_as_of_option = _input_option(SearchInput, "as_of")
_known_at_option = _input_option(SearchInput, "known_at")


def time_scope_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--as-of`` and ``--known-at``: the time scope of a read, described as a search's."""
    return _as_of_option(_known_at_option(command))


no_episode_links_option = click.option(
    "--no-episode-links",
    "episode_links",
    flag_value=False,
    default=True,
    help="Rank without the links between consecutive facts of an episode (on by default, they "
    "let adjacent turns lend each other relevance).",
)


class _Progress:
    """A progress bar on stderr, created on the first report (when the total is known)."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._bar: Any = None
        self._done = 0

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = click.progressbar(length=total, label=self._label, file=sys.stderr)
            self._bar.__enter__()
        self._bar.update(done - self._done)
        self._done = done

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


@contextmanager
def _memory(ctx: click.Context, /, *, reindex: bool = False) -> Iterator[Memory]:
    settings: Settings = ctx.obj
    with Memory.open(settings=settings, reindex=reindex) as mem:
        yield mem


def _emit(data: Any, as_json: bool, human: str | Iterable[str]) -> None:
    """Print ``data`` as JSON, or the human-readable line(s)."""
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        for line in [human] if isinstance(human, str) else human:
            click.echo(line)


def _fact_line(fact: Fact, score: float | None = None) -> str:
    valid = f"valid {to_iso(fact.valid_from.timestamp())}"
    if fact.valid_until is not None:
        valid += f" → {to_iso(fact.valid_until.timestamp())}"
    prefix = f"{score:.3f}  " if score is not None else ""
    about = f" {fact.entity}.{fact.key}={fact.value}" if fact.entity and fact.key else ""
    if (stated := fact.stated_time) is not None:
        valid += (
            f"; says {stated.text!r}: {to_iso(stated.start.timestamp())}"
            f" → {to_iso(stated.end.timestamp())}"
        )
    return f"{prefix}{fact.id}  [{fact.category}]{about}  {fact.text}  ({valid})"


_fact_option: Final = functools.partial(_input_option, FactInput)
_search_option: Final = functools.partial(_input_option, SearchInput)
_traverse_option: Final = functools.partial(_input_option, TraverseInput)


@click.command()
@click.argument("text")
@_fact_option("entity")
@_fact_option("key")
@_fact_option("value")
@_fact_option("category")
@_fact_option("tags", "Comma-separated. ")
@_fact_option("importance", type=float)
@_fact_option("decay_class")
@_fact_option("source")
@_fact_option("summary")
@_fact_option("why")
@_fact_option("valid_from")
@_fact_option("source_date")
@_fact_option("supersedes")
@click.option(
    "--no-classify",
    is_flag=True,
    help="Always add; skip classification (entity/key rules or the LLM).",
)
@click.option("--no-autolink", is_flag=True, help="Make no automatic links for this fact.")
@click.option("--episode", help=_EPISODE_HELP)
@json_option
@click.pass_context
def store(
    ctx: click.Context,
    /,
    text: str,
    as_json: bool,
    no_classify: bool,
    no_autolink: bool,
    episode: str | None,
    **fields: Any,
) -> None:
    """Store a fact (ADD, or UPDATE/DELETE/NOOP by the classifier), with its automatic links."""
    item = {k: v for k, v in fields.items() if v is not None}
    if no_classify:
        item["classify"] = False
    if no_autolink:
        item["autolink"] = False
    with _memory(ctx) as mem:
        result = mem.store_many([{"text": text, **item}], episode=episode)[0]
    _emit(
        result.to_dict(),
        as_json,
        (
            f"{result.action}  {_fact_line(result.fact) if result.fact else ''}"
            + (f"\n  {result.reason}" if result.reason else "")
        ),
    )


@click.command()
@click.argument("query")
@_search_option("limit", show_default=True, type=int)
@_search_option("tag")
@_search_option("category")
@_search_option("entity")
@_search_option("source")
@time_scope_options
@_search_option("include_superseded", is_flag=True)
@_search_option("mode", type=click.Choice(SEARCH_MODES), show_default=True)
@_search_option("rerank", type=click.Choice(RERANK_CHOICES))
@click.option(
    "--no-time-hints",
    "time_hints",
    flag_value=False,
    default=True,
    help="Search time words ('last week', 'in May 2023') as plain words, not as a period.",
)
@no_episode_links_option
@json_option
@click.pass_context
def search(ctx: click.Context, /, query: str, as_json: bool, **options: Any) -> None:
    """Search facts by keywords and meaning."""
    with _memory(ctx) as mem:
        hits = mem.search(query, **options)
    hint = hits[0].time_hint if hits else None
    _emit(
        [{"fact": h.fact.to_dict(), "score": h.score} for h in hits],
        as_json,
        ([] if hint is None else [f"time words understood: {hint.describe()}"])
        + [_fact_line(h.fact, h.score) for h in hits],
    )


@click.command()
@click.argument("entity")
@click.option("--key", help="Only facts stating this key (attribute).")
@_search_option("tag")
@time_scope_options
@_search_option("include_superseded", is_flag=True)
@json_option
@click.pass_context
def lookup(ctx: click.Context, /, entity: str, as_json: bool, **options: Any) -> None:
    """Facts about an entity (and key), without embeddings."""
    with _memory(ctx) as mem:
        facts = mem.lookup(entity, **options)
    _emit(
        [f.to_dict() for f in facts],
        as_json,
        (_fact_line(f) for f in facts),
    )


_known_names_option = click.option("--known-at", help=ENTITIES_KNOWN_AT)


def _entity_line(entity: Entity) -> str:
    facts = f"{entity.facts} fact{'' if entity.facts == 1 else 's'}"
    line = f"{entity.name}  ({facts})  names: {', '.join(entity.names)}"
    return line + (f"  aliases: {', '.join(entity.aliases)}" if entity.aliases else "")


@click.command()
@click.option("--limit", default=100, show_default=True, type=int, help="Most entities.")
@_known_names_option
@json_option
@click.pass_context
def entities(ctx: click.Context, /, limit: int, known_at: str | None, as_json: bool) -> None:
    """The entities, the most facts first: every name their facts carry, and their aliases."""
    with _memory(ctx) as mem:
        found = mem.entities(known_at=known_at, limit=limit)
    _emit([e.to_dict() for e in found], as_json, (_entity_line(e) for e in found))


@click.command()
@click.argument("name")
@_known_names_option
@json_option
@click.pass_context
def entity(ctx: click.Context, /, name: str, known_at: str | None, as_json: bool) -> None:
    """The entity NAME reaches: a name, an alias, or a short form or nickname of one."""
    with _memory(ctx) as mem:
        found = mem.entity(name, known_at=known_at)
    _emit(found.to_dict(), as_json, _entity_line(found))


@click.command()
@click.argument("name")
@time_scope_options
@click.option(
    "--summary",
    is_flag=True,
    help="Also the chat model's summary (the llm_* settings), citing the facts it rests on.",
)
@json_option
@click.pass_context
def profile(ctx: click.Context, /, name: str, as_json: bool, **options: Any) -> None:
    """Who or what the entity NAME reaches is: its current values by key, its other facts and
    the entities its facts are linked to."""
    with _memory(ctx) as mem:
        found = mem.profile(name, **options)
    lines = [_entity_line(found.entity)]
    lines += [
        f"  {a.key}: "
        + "; ".join(
            f"{v.value or v.fact.text} (from {to_iso(v.valid_from.timestamp())}, {v.fact.id})"
            for v in a.values
        )
        for a in found.attributes
    ]
    lines += [f"  {_fact_line(f)}" for f in found.facts]
    lines += [f"  linked: {e.entity.name} ({', '.join(e.types)})" for e in found.linked]
    if found.summary is not None:
        lines.append(f"  summary: {found.summary.text}")
    elif found.summary_error is not None:
        lines.append(f"  no summary: {found.summary_error}")
    _emit(found.to_dict(), as_json, lines)


@click.command()
@click.argument("name")
@click.option("--of", "of", required=True, help="A name of the entity NAME names.")
@json_option
@click.pass_context
def alias(ctx: click.Context, /, name: str, of: str, as_json: bool) -> None:
    """Declare NAME another name of an entity, from now on."""
    with _memory(ctx) as mem:
        found = mem.alias(name, of=of)
    _emit(found.to_dict(), as_json, f"aliased {_entity_line(found)}")


@click.command("merge-entities")
@click.argument("a")
@click.argument("b")
@json_option
@click.pass_context
def merge_entities(ctx: click.Context, /, a: str, b: str, as_json: bool) -> None:
    """Declare the entity B reaches to be the one A reaches, from now on, under A's name."""
    with _memory(ctx) as mem:
        found = mem.merge_entities(a, b)
    _emit(found.to_dict(), as_json, f"merged {_entity_line(found)}")


@click.command("split-alias")
@click.argument("name")
@json_option
@click.pass_context
def split_alias(ctx: click.Context, /, name: str, as_json: bool) -> None:
    """Take NAME out of its entity from now on (declared or found by the rules); prints the
    entity it left."""
    with _memory(ctx) as mem:
        found = mem.split_alias(name)
    _emit(found.to_dict(), as_json, f"split {name} off {_entity_line(found)}")


@click.command()
@click.argument("prompt")
@click.option(
    "--max-tokens",
    default=DEFAULT_MAX_TOKENS,
    show_default=True,
    type=int,
    help="The block's budget (about 4 characters a token).",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    default="full",
    show_default=True,
    help="How each fact's line is written.",
)
@_search_option("graph_depth", show_default=True, type=int)
@time_scope_options
@no_episode_links_option
@click.option("--include-cold", is_flag=True, help="Also facts made cold (graphmem cold).")
@json_option
@click.pass_context
def recall(ctx: click.Context, /, prompt: str, format_: str, as_json: bool, **options: Any) -> None:
    """Print the <memory-context> block for PROMPT (auto-recall)."""
    with _memory(ctx) as mem:
        result = mem.recall(prompt, format=format_, **options)  # type: ignore[arg-type]
    _emit(result.to_dict(), as_json, result.context or "(nothing to recall)")


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@_input_option(CaptureInput, "episode")
@_input_option(CaptureInput, "keep", type=click.Choice(KEEPS), show_default=True)
@json_option
@click.pass_context
def capture(
    ctx: click.Context, /, path: str, episode: str | None, keep: Keep, as_json: bool
) -> None:
    """Keep chat messages as turns, and the facts they state (auto-capture).

    PATH (default: stdin) holds a JSON list of {"role", "content"} messages. Each user and
    assistant message is kept as a turn of the episode (a long one in parts) and its memorable
    sentences are drawn from it as facts, each linked to its turn; --keep facts keeps the facts
    alone. Prints what was kept and stored (turn or fact), and what was skipped and why.
    """
    with click.open_file(path, "r", encoding="utf-8") as src:
        try:
            messages = json.load(src)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    with _memory(ctx) as mem:
        results = mem.capture(messages, episode=episode, keep=keep)
    _emit(
        [r.to_dict() for r in results],
        as_json,
        (
            f"{r.action:<6} {r.kind:<4} #{r.message} {r.role}: "
            + (_fact_line(r.fact) if r.fact else r.text or "")
            + (f"\n       {r.reason}" if r.reason else "")
            for r in results
        ),
    )


@click.command()
@click.argument("fact_id")
@time_scope_options
@json_option
@click.pass_context
def get(ctx: click.Context, /, fact_id: str, as_json: bool, **scope: str | None) -> None:
    """One fact, if visible at the time scope."""
    with _memory(ctx) as mem:
        fact = mem.get(fact_id, **scope)
    if fact is None:
        raise NotFound(f"no fact {fact_id!r} visible at that time")
    _emit(fact.to_dict(), as_json, (_fact_line(fact)))


@click.command()
@click.argument("fact_id")
@time_scope_options
@json_option
@click.pass_context
def history(ctx: click.Context, /, fact_id: str, as_json: bool, **scope: str | None) -> None:
    """The supersession chain of a fact, oldest first."""
    with _memory(ctx) as mem:
        facts = mem.history(fact_id, **scope)
    _emit(
        [f.to_dict() for f in facts],
        as_json,
        (_fact_line(f) for f in facts),
    )


@click.command()
@click.argument("episode_id")
@time_scope_options
@json_option
@click.pass_context
def episode(ctx: click.Context, /, episode_id: str, as_json: bool, **scope: str | None) -> None:
    """Show an episode and its facts, in the order they were written."""
    with _memory(ctx) as mem:
        found = mem.episode(episode_id)
        if found is None:
            raise NotFound(f"no episode with id {episode_id!r}")
        facts = mem.episode_facts(episode_id, **scope)
    _emit(
        {**found.to_dict(), "facts": [f.to_dict() for f in facts]},
        as_json,
        [
            f"{found.id}  {found.kind}  {to_iso(found.time.timestamp())}"
            + (f"  from {found.source}" if found.source else ""),
            *(_fact_line(f) for f in facts),
        ],
    )


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--root", type=click.Path(path_type=Path), help="Refuse paths outside this folder.")
@click.option(
    "--watch", is_flag=True, help="Keep syncing when a file under the paths changes (Ctrl-C ends)."
)
@json_option
@click.pass_context
def sync(
    ctx: click.Context, /, paths: tuple[Path, ...], root: Path | None, watch: bool, as_json: bool
) -> None:
    """Index markdown files and folders as documents, and keep them in step: unchanged files
    cost nothing, changed ones supersede their old chunks, deleted ones are forgotten."""
    with _memory(ctx) as mem:
        _emit_sync(mem.sync_files(paths, root=root), as_json)
        if not watch:
            return
        for _ in watchfiles.watch(*[p for p in paths if p.exists()], raise_interrupt=False):
            _emit_sync(mem.sync_files(paths, root=root), as_json)


def _emit_sync(report: SyncReport, as_json: bool) -> None:
    counts = ", ".join(
        f"{len(getattr(report, name))} {name}"
        for name in ("added", "changed", "removed", "unchanged", "skipped")
    )
    _emit(
        report.to_dict(),
        as_json,
        [f"{counts}; {report.chunks} chunks written"]
        + [f"skipped {path}: {reason}" for path, reason in report.skipped],
    )
    sys.stdout.flush()


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--lines", "span", help="Lines A-B (1-based, inclusive), A- or A [default: all].")
@click.pass_context
def read(ctx: click.Context, /, path: Path, span: str | None) -> None:
    """Print lines of a synced document as it is on disk now (what a hit's source names)."""
    start, end = _line_span(span)
    with _memory(ctx) as mem:
        click.echo(mem.read_lines(path, start, end))


def _line_span(span: str | None) -> tuple[int, int | None]:
    if span is None:
        return 1, None
    first, dash, last = span.partition("-")
    try:
        start = int(first)
        end = int(last) if last else (None if dash else start)
    except ValueError:
        raise InvalidInput(f"--lines takes A-B, A- or A, not {span!r}", field="lines") from None
    return start, end


@click.command()
@click.argument("fact_id")
@json_option
@click.pass_context
def forget(ctx: click.Context, /, fact_id: str, as_json: bool) -> None:
    """Retract a fact (history stays readable with --known-at)."""
    with _memory(ctx) as mem:
        fact = mem.forget(fact_id)
    _emit({"forgotten": fact.id}, as_json, (f"forgotten {fact.id}"))


@click.command()
@click.argument("fact_id")
@click.option("--off", is_flag=True, help="Unpin it instead.")
@json_option
@click.pass_context
def pin(ctx: click.Context, /, fact_id: str, off: bool, as_json: bool) -> None:
    """Pin a fact: it leads every recall block, whatever the prompt (--off unpins it)."""
    with _memory(ctx) as mem:
        fact = mem.unpin(fact_id) if off else mem.pin(fact_id)
    _emit(fact.to_dict(), as_json, f"{'unpinned' if off else 'pinned'} {_fact_line(fact)}")


@click.command()
@click.argument("fact_id")
@click.option("--off", is_flag=True, help="No longer cold.")
@json_option
@click.pass_context
def cold(ctx: click.Context, /, fact_id: str, off: bool, as_json: bool) -> None:
    """Make a fact cold: recall leaves it out unless --include-cold; search still finds it."""
    with _memory(ctx) as mem:
        fact = mem.set_cold(fact_id, not off)
    _emit(fact.to_dict(), as_json, f"{'warm' if off else 'cold'} {_fact_line(fact)}")


@click.group()
def checkpoint() -> None:
    """Save the working state before a risky step, and restore the newest one."""


@checkpoint.command("save")
@click.option("--intent", required=True, help="What you are about to do.")
@click.option("--state", "state_json", help="The working state, as JSON.")
@click.option("--expect", "expected_outcome", help="What should come of it.")
@click.option("--file", "working_files", multiple=True, help="A file being worked on (repeat).")
@json_option
@click.pass_context
def checkpoint_save(
    ctx: click.Context,
    /,
    intent: str,
    state_json: str | None,
    expected_outcome: str | None,
    working_files: tuple[str, ...],
    as_json: bool,
) -> None:
    """Save a checkpoint (it expires like decay class checkpoint)."""
    try:
        state = None if state_json is None else json.loads(state_json)
    except ValueError as exc:
        raise InvalidInput(f"not JSON: {exc}", field="state") from None
    with _memory(ctx) as mem:
        fact = mem.checkpoint(
            intent, state=state, expected_outcome=expected_outcome, working_files=working_files
        )
    _emit(fact.to_dict(), as_json, f"saved {_fact_line(fact)}")


@checkpoint.command("restore")
@json_option
@click.pass_context
def checkpoint_restore(ctx: click.Context, /, as_json: bool) -> None:
    """Print the newest unexpired checkpoint (exit 1 when there is none)."""
    with _memory(ctx) as mem:
        found = mem.restore_checkpoint()
    if found is None:
        _emit(None, as_json, "no checkpoint")
        sys.exit(1)
    _emit(
        found.to_dict(),
        as_json,
        [
            f"{found.intent}  (saved {to_iso(found.fact.recorded_at.timestamp())})",
            f"expected: {found.expected_outcome or '-'}",
            f"files: {' '.join(found.working_files) or '-'}",
            f"state: {json.dumps(found.state, ensure_ascii=False, sort_keys=True)}",
        ],
    )


@click.command()
@click.argument("fact_id", required=False)
@click.option(
    "--entity",
    help="Every fact about the entity this name or alias is one of, under any of its names.",
)
@click.option("--source", help="Every fact from this source.")
@click.option("--episode", help="Every fact of this episode.")
@click.option("--dry-run", is_flag=True, help="Only count what would be erased.")
@json_option
@click.pass_context
def purge(
    ctx: click.Context,
    /,
    fact_id: str | None,
    entity: str | None,
    source: str | None,
    episode: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Erase facts for good: FACT_ID, or every fact the filters match (all of them), in any
    state, with their links, vectors and cached embeddings; the erasure is recorded."""
    with _memory(ctx) as mem:
        report = mem.purge(fact_id, entity=entity, source=source, episode=episode, dry_run=dry_run)
    verb = "would erase" if report.dry_run else "erased"
    covered = f" (names: {', '.join(report.names)})" if report.names else ""
    _emit(
        report.to_dict(),
        as_json,
        f"{verb} {report.facts} facts, {report.links} links, {report.vectors} vectors,"
        f" {report.episodes} emptied episodes{covered}",
    )


@click.command()
@click.option("--limit", default=100, show_default=True, type=int, help="Most records.")
@json_option
@click.pass_context
def erasures(ctx: click.Context, /, limit: int, as_json: bool) -> None:
    """The erasure records, newest first: when, which filter (values as SHA-256 digests), how
    many of each kind; never the content."""
    with _memory(ctx) as mem:
        found = mem.erasures(limit=limit)
    _emit(
        [e.to_dict() for e in found],
        as_json,
        (
            f"{to_iso(e.at.timestamp())}  {json.dumps(e.filter, sort_keys=True)}  facts {e.facts}"
            f"  links {e.links}  vectors {e.vectors}  episodes {e.episodes}"
            for e in found
        ),
    )


# ------------------------------------------------------------------------------------ graph

types_option = _traverse_option("types", "Comma-separated. ")


def _types(value: str | None) -> list[str] | None:
    return None if value is None else [t for t in value.split(",") if t.strip()]


def _link_line(link: Link) -> str:
    state = "" if link.retracted_at is None else "  (removed)"
    return (
        f"{link.id}  {link.source_id} -[{link.type} {link.strength:.2f}]-> {link.target_id}"
        f"  {link.origin}{state}"
    )


def _subgraph_lines(sub: Subgraph) -> Iterator[str]:
    for node in sub.nodes:
        yield f"{'  ' * node.depth}{node.depth}  {_fact_line(node.fact)}"
    yield f"{len(sub.nodes)} facts, {len(sub.edges)} links" + (
        f"; truncated by {', '.join(sub.truncated_by)}" if sub.truncated else ""
    )


@click.command()
@click.argument("source_id")
@click.argument("target_id")
@click.argument("type", metavar="TYPE")
@_input_option(LinkInput, "strength", show_default=True, type=float)
@_input_option(LinkInput, "valid_from")
@_input_option(LinkInput, "valid_until")
@json_option
@click.pass_context
def link(
    ctx: click.Context,
    /,
    source_id: str,
    target_id: str,
    type: str,
    strength: float,
    valid_from: str | None,
    valid_until: str | None,
    as_json: bool,
) -> None:
    """Link SOURCE_ID -[TYPE]-> TARGET_ID (CAUSED_BY, PART_OF, RELATED_TO, DEPENDS_ON)."""
    with _memory(ctx) as mem:
        made = mem.link(
            source_id,
            target_id,
            type,
            strength=strength,
            valid_from=valid_from,
            valid_until=valid_until,
        )
    _emit(made.to_dict(), as_json, _link_line(made))


@click.command()
@click.argument("link_id")
@json_option
@click.pass_context
def unlink(ctx: click.Context, /, link_id: str, as_json: bool) -> None:
    """Remove a link (history stays readable with --known-at)."""
    with _memory(ctx) as mem:
        removed = mem.unlink(link_id)
    _emit({"unlinked": removed.id}, as_json, f"unlinked {removed.id}")


@click.command()
@click.argument("fact_id")
@click.option(
    "--direction",
    type=click.Choice(["OUT", "IN", "BOTH"], case_sensitive=False),
    default="BOTH",
    show_default=True,
)
@click.option("--types", help="Comma-separated link types [default: all].")
@time_scope_options
@json_option
@click.pass_context
def links(
    ctx: click.Context, /, fact_id: str, types: str | None, as_json: bool, **options: Any
) -> None:
    """The links of a fact, strongest first."""
    with _memory(ctx) as mem:
        found = mem.links(fact_id, types=_types(types), **options)
    _emit([k.to_dict() for k in found], as_json, (_link_line(k) for k in found))


@click.command()
@click.argument("ids", nargs=-1, required=True)
@_traverse_option("depth", show_default=True, type=int)
@types_option
@_traverse_option(
    "direction", type=click.Choice(DIRECTIONS, case_sensitive=False), show_default=True
)
@time_scope_options
@_traverse_option("max_nodes", show_default=True, type=int)
@_traverse_option("min_strength", show_default=True, type=float)
@json_option
@click.pass_context
def traverse(
    ctx: click.Context, /, ids: tuple[str, ...], types: str | None, as_json: bool, **options: Any
) -> None:
    """Breadth-first walk from IDS: each fact once at its shortest depth, and their links."""
    with _memory(ctx) as mem:
        sub = mem.traverse(list(ids), types=_types(types), **options)
    _emit(sub.to_dict(), as_json, _subgraph_lines(sub))


@click.command()
@click.argument("source_id")
@click.argument("target_id")
@types_option
@click.option(
    "--direction",
    type=click.Choice(["OUT", "IN", "BOTH"], case_sensitive=False),
    default="BOTH",
    show_default=True,
)
@time_scope_options
@json_option
@click.pass_context
def path(
    ctx: click.Context,
    /,
    source_id: str,
    target_id: str,
    types: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """A shortest path between two facts (exit 1 if there is none)."""
    with _memory(ctx) as mem:
        route = mem.path(source_id, target_id, types=_types(types), **options)
    if route is None:
        raise NotFound(f"no path from {source_id} to {target_id}")
    _emit(
        route.to_dict(),
        as_json,
        [_fact_line(f) for f in route.facts] + [_link_line(k) for k in route.links],
    )


@click.command()
@types_option
@click.option("--min-size", default=2, show_default=True, type=int)
@time_scope_options
@json_option
@click.pass_context
def clusters(ctx: click.Context, /, types: str | None, as_json: bool, **options: Any) -> None:
    """Groups of facts connected by links, largest first."""
    with _memory(ctx) as mem:
        found = mem.clusters(types=_types(types), **options)
    lines = [f"{len(g)} facts: {' '.join(g)}" for g in found.groups]
    _emit(found.to_dict(), as_json, lines + (["(truncated)"] if found.truncated else []))


@click.command()
@click.argument("fact_id")
@time_scope_options
@json_option
@click.pass_context
def deps(ctx: click.Context, /, fact_id: str, as_json: bool, **options: Any) -> None:
    """What a fact depends on (DEPENDS_ON), dependencies first; cycles reported."""
    with _memory(ctx) as mem:
        order = mem.dependency_order(fact_id, **options)
    lines = list(order.order) + [f"cycle: {' -> '.join(c)}" for c in order.cycles]
    _emit(order.to_dict(), as_json, lines)


@click.command()
@click.argument("fact_id")
@time_scope_options
@json_option
@click.pass_context
def causes(ctx: click.Context, /, fact_id: str, as_json: bool, **options: Any) -> None:
    """The cause chain of a fact (CAUSED_BY)."""
    with _memory(ctx) as mem:
        sub = mem.causes(fact_id, **options)
    _emit(sub.to_dict(), as_json, _subgraph_lines(sub))


@click.command()
@click.argument("fact_id")
@click.option("--above", is_flag=True, help="What the fact is part of, instead of its parts.")
@time_scope_options
@json_option
@click.pass_context
def parts(ctx: click.Context, /, fact_id: str, as_json: bool, **options: Any) -> None:
    """The PART_OF tree below a fact (or above it)."""
    with _memory(ctx) as mem:
        sub = mem.parts(fact_id, **options)
    _emit(sub.to_dict(), as_json, _subgraph_lines(sub))


@click.command()
@click.option("--dry-run", is_flag=True, help="Only count what would go.")
@click.option("--soft", is_flag=True, help="Only soft decay: skip the hard prune of expired facts.")
@json_option
@click.pass_context
def prune(ctx: click.Context, /, dry_run: bool, soft: bool, as_json: bool) -> None:
    """Delete expired facts, decay ageing ones, delete the faded."""
    with _memory(ctx) as mem:
        report = mem.prune(dry_run=dry_run, soft=soft)
    _emit(
        report.to_dict(),
        as_json,
        (
            f"{'would prune' if dry_run else 'pruned'}: {report.expired} expired, "
            f"{report.decayed} decayed, {report.low_confidence} below the confidence floor"
        ),
    )


@click.command()
@click.option(
    "--job",
    "jobs",
    multiple=True,
    type=click.Choice(list(REGISTRY)),
    help="Run only this job (repeatable; default: every job that is due).",
)
@click.option("--force", is_flag=True, help="Run the jobs even if they are not due.")
@click.option("--list", "listing", is_flag=True, help="List the recorded runs; run nothing.")
@json_option
@click.pass_context
def maintain(
    ctx: click.Context, /, jobs: tuple[str, ...], force: bool, listing: bool, as_json: bool
) -> None:
    """Run the maintenance jobs that are due (for cron), or list the recorded runs.

    A job is due when its <job>_interval setting has passed since its last run; one another
    process is running is skipped. Exits 1 if a job failed.
    """
    with _memory(ctx) as mem:
        if listing:
            runs = mem.maintenance_runs(job=jobs[0] if len(jobs) == 1 else None)
        else:
            runs = mem.maintain(list(jobs) or None, force=force)
    _emit([r.to_dict() for r in runs], as_json, [_run_line(r) for r in runs] or ["nothing due"])
    if not listing and any(r.status == "failed" for r in runs):
        ctx.exit(1)


def _run_line(run: MaintenanceRun) -> str:
    changed = ", ".join(f"{count} {kind}" for kind, count in sorted(run.changed.items()))
    line = f"{to_iso(run.started_at.timestamp())}  {run.job}  {run.status}"
    if changed:
        line += f"  {changed}"
    if run.requests:
        line += f"  ({run.requests} model requests)"
    return line + (f"  {run.error}" if run.error else "")


@click.command("auto-classify")
@json_option
@click.pass_context
def auto_classify(ctx: click.Context, /, as_json: bool) -> None:
    """Relabel facts of category other by the chat model, discovering categories (with
    classifier = llm; otherwise nothing changes)."""
    with _memory(ctx) as mem:
        report = mem.auto_classify()
    lines = [f"{count} relabelled {category}" for category, count in report.relabelled.items()]
    lines += [f"discovered {name}" for name in report.discovered]
    lines.append(f"{report.requests} model requests")
    if report.error:
        lines.append(f"an answer was not used: {report.error}")
    _emit(report.to_dict(), as_json, lines)


@click.command()
@json_option
@click.pass_context
def categories(ctx: click.Context, /, as_json: bool) -> None:
    """The categories a fact may have: built in, then discovered in the namespace."""
    with _memory(ctx) as mem:
        found = mem.categories()
    _emit(
        [c.to_dict() for c in found],
        as_json,
        [
            f"{c.name}  {c.description}"
            + (f"  (discovered {to_iso(c.discovered_at.timestamp())})" if c.discovered_at else "")
            for c in found
        ],
    )


@click.command()
@click.option(
    "--window-days",
    type=click.FloatRange(0, 3650, min_open=True),
    help="Days of recent facts to read (default: the reflect_window_days setting).",
)
@json_option
@click.pass_context
def reflect(ctx: click.Context, /, window_days: float | None, as_json: bool) -> None:
    """Ask the chat model for patterns among recent facts, and rules from them."""
    with _memory(ctx) as mem:
        report = mem.reflect(window_days=window_days)
    lines = [f"pattern  {_fact_line(f)}" for f in report.patterns]
    lines += [f"rule  {_fact_line(f)}" for f in report.rules]
    lines.append(
        f"{len(report.patterns)} patterns, {len(report.rules)} rules, "
        f"{report.requests} model requests, {report.ignored} answer entries passed over"
    )
    if report.error:
        lines.append(f"an answer was not used: {report.error}")
    _emit(report.to_dict(), as_json, lines)


@click.command()
@click.option("--dry-run", is_flag=True, help="Only list the clusters.")
@json_option
@click.pass_context
def consolidate(ctx: click.Context, /, dry_run: bool, as_json: bool) -> None:
    """Merge clusters of near-duplicate facts into one fact each (it supersedes them)."""
    with _memory(ctx) as mem:
        report = mem.consolidate(dry_run=dry_run)
    lines = [f"cluster  {' '.join(c)}" for c in report.clusters] if dry_run else []
    lines += [f"merged  {_fact_line(f)}" for f in report.merged]
    lines.append(
        f"{len(report.clusters)} clusters; {len(report.merged)} merged, "
        f"{report.superseded} facts superseded"
    )
    if report.error:
        lines.append(f"an answer was not used: {report.error}")
    _emit(report.to_dict(), as_json, lines)


@click.command("backfill-stated-time")
@click.option("--dry-run", is_flag=True, help="Only count what would change.")
@json_option
@click.pass_context
def backfill_stated_time(ctx: click.Context, /, dry_run: bool, as_json: bool) -> None:
    """Read the time every stored fact's text states, as writes do now."""
    with _memory(ctx) as mem:
        counts = mem.backfill_stated_time(dry_run=dry_run)
    _emit(
        counts,
        as_json,
        f"{counts['facts']} facts read, {counts['stating']} state a time; "
        f"{counts['changed']} {'would change' if dry_run else 'changed'}",
    )


@click.command("backfill-windows")
@json_option
@click.pass_context
def backfill_windows(ctx: click.Context, /, as_json: bool) -> None:
    """Cut the windows of turns of every episode again from its facts."""
    with _memory(ctx) as mem:
        counts = mem.backfill_windows()
    _emit(counts, as_json, f"{counts['episodes']} episodes, {counts['windows']} windows of turns")


@click.command("backfill-decay")
@click.option("--dry-run", is_flag=True)
@json_option
@click.pass_context
def backfill_decay(ctx: click.Context, /, dry_run: bool, as_json: bool) -> None:
    """Re-run the decay-class heuristics on every fact (turns keep the class capture gave them)."""
    with _memory(ctx) as mem:
        moved = mem.backfill_decay(dry_run=dry_run)
    _emit(
        moved,
        as_json,
        (", ".join(f"{n} → {c}" for c, n in moved.items()) or "no changes"),
    )


@click.command()
@json_option
@click.pass_context
def stats(ctx: click.Context, /, as_json: bool) -> None:
    """Counts per state, decay class and category."""
    with _memory(ctx) as mem:
        data = mem.stats().to_dict()
    _emit(data, as_json, (json.dumps(data, indent=2)))


@click.command()
@json_option
@click.pass_context
def reindex(ctx: click.Context, /, as_json: bool) -> None:
    """Rebuild the vector index from SQLite (also after changing embedder)."""
    settings: Settings = ctx.obj
    with (
        _Progress("reindexing") as progress,
        Memory.open(settings=settings, reindex=True, progress=progress) as mem,
    ):
        data = {"vectors": mem.stats().vectors, "embedder": mem.embedder.model}
    _emit(data, as_json, f"reindexed {data['vectors']} vectors with {data['embedder']}")


@click.command("rebuild-entities")
@json_option
@click.pass_context
def rebuild_entities(ctx: click.Context, /, as_json: bool) -> None:
    """Count the entity names again from the facts (they are derived, like the vectors)."""
    with _memory(ctx) as mem:
        names = mem.rebuild_entities()
    _emit({"names": names}, as_json, f"rebuilt {names} entity names")


@click.command()
@json_option
@click.pass_context
def check(ctx: click.Context, /, as_json: bool) -> None:
    """Report every disagreement between SQLite and the vector index (exit 1 if any)."""
    with _memory(ctx) as mem, _Progress("checking") as progress:
        report = mem.check(progress=progress)
    _emit(
        report.to_dict(),
        as_json,
        ("ok" if report.ok else json.dumps(report.to_dict(), indent=2)),
    )
    if not report.ok:
        sys.exit(1)


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@click.pass_context
def export(ctx: click.Context, /, path: str) -> None:
    """Write the namespace as JSON Lines (to PATH, default stdout)."""
    with _memory(ctx) as mem, _export_file(path) as out:
        lines = mem.export_jsonl(out)
    if path != "-":
        click.echo(f"exported {lines} lines to {path}", err=True)


def _export_file(path: str) -> IO[str]:
    """Where an export goes: stdout for ``-``, else the file, which a new export makes readable
    by its owner alone (it holds every fact, as the database does)."""
    if path == "-":
        return click.open_file(path, "w", encoding="utf-8")
    return open(path, "w", encoding="utf-8", opener=private_opener)


@click.command("import")
@click.argument("path", type=click.Path(dir_okay=False, allow_dash=True, exists=False))
@json_option
@click.pass_context
def import_(ctx: click.Context, /, path: str, as_json: bool) -> None:
    """Load a JSON Lines export (all or nothing); existing ids are skipped."""
    with (
        _memory(ctx) as mem,
        click.open_file(path, "r", encoding="utf-8") as src,
        _Progress("indexing") as progress,
    ):
        report = mem.import_jsonl(src, progress=progress)
    _emit(
        report.to_dict(),
        as_json,
        (
            f"imported {report.facts} facts, {report.links} links, {report.declarations}"
            f" entity declarations; skipped {report.skipped_existing} existing"
        ),
    )


def _files_only(settings: Settings, command: str) -> None:
    """Backups copy SQLite files: with a PostgreSQL store, say what to use instead."""
    if settings.store:
        raise InvalidInput(
            f"`graphmem {command}` copies SQLite files; the store is PostgreSQL: back it up and "
            "restore it with pg_dump and pg_restore (or your base backups), then run "
            "`graphmem --namespace NAME reindex` for each namespace (docs/scale-out.md#backups)",
            field="store",
        )


@click.command()
@click.argument("destination", type=click.Path(file_okay=False, path_type=Path))
@json_option
@click.pass_context
def backup(ctx: click.Context, /, destination: Path, as_json: bool) -> None:
    """Copy every namespace and the API keys to DESTINATION (a new directory).

    Safe while a server writes: each namespace is copied as of one commit with SQLite's backup
    API. The vector indexes are not copied; `graphmem restore` rebuilds them.
    """
    settings: Settings = ctx.obj
    _files_only(settings, "backup")
    names = storage.backup(Path(settings.data_dir), destination)
    _emit(
        {"namespaces": names, "destination": str(destination)},
        as_json,
        f"backed up {len(names)} namespaces to {destination}: {', '.join(names)}",
    )


@click.command()
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Overwrite namespaces that exist already.")
@json_option
@click.pass_context
def restore(ctx: click.Context, /, source: Path, replace: bool, as_json: bool) -> None:
    """Restore a backup made by `graphmem backup` into the data directory.

    Stop the server first. Rebuilds each namespace's vector index from its SQLite file and
    embedding cache (nothing is embedded again) and checks it.
    """
    settings: Settings = ctx.obj
    _files_only(settings, "restore")
    names = storage.restore(source, Path(settings.data_dir), replace=replace)
    reports = {}
    for name in names:
        with (
            _Progress(f"rebuilding {name}") as progress,
            Memory.open(settings=settings, namespace=name, reindex=True, progress=progress) as mem,
        ):
            reports[name] = {"facts": mem.stats().facts, "check": mem.check().ok}
    _emit(
        reports,
        as_json,
        [
            f"restored {n}: {r['facts']} facts, check {'ok' if r['check'] else 'FAILED'}"
            for n, r in reports.items()
        ],
    )
    if not all(r["check"] for r in reports.values()):
        sys.exit(1)


@click.command()
@click.pass_context
def optimize(ctx: click.Context) -> None:
    """Refresh the store's query statistics, compact the vector index, prepare its in-memory
    search, build its ANN index past 2M."""
    with _memory(ctx) as mem:
        click.echo(json.dumps(mem.optimize()))


@click.command("create-key")
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    required=True,
    help="Namespace the key may use (repeat for several; the first is its default).",
)
@click.option("--read-only", is_flag=True, help="The key may read but not write.")
@click.option(
    "--admin", is_flag=True, help="The key may also read its namespaces' erasure records."
)
@click.option("--label", help="A note to tell keys apart (e.g. who holds it).")
@json_option
@click.pass_context
def create_key(
    ctx: click.Context,
    /,
    namespaces: tuple[str, ...],
    read_only: bool,
    admin: bool,
    label: str | None,
    as_json: bool,
) -> None:
    """Create an API key for the server; it is printed once and only its hash is kept."""
    settings: Settings = ctx.obj
    with closing(open_keys(settings)) as keys:
        token, key = keys.create(namespaces, read_only=read_only, label=label, admin=admin)
    _emit(
        {"key": token, **key.to_dict()},
        as_json,
        [
            token,
            f"id {key.id}, namespaces {', '.join(key.namespaces)}"
            + (", read-only" if key.read_only else "")
            + (", admin" if key.admin else "")
            + " (shown once: store it now)",
        ],
    )


@click.command("list-keys")
@json_option
@click.pass_context
def list_keys(ctx: click.Context, /, as_json: bool) -> None:
    """List API keys (ids, namespaces, state; never the secrets)."""
    settings: Settings = ctx.obj
    with closing(open_keys(settings)) as store:
        keys = store.list()
    _emit(
        [k.to_dict() for k in keys],
        as_json,
        [
            f"{k.id}  {','.join(k.namespaces)}  {'read-only' if k.read_only else 'read-write'}"
            f"{'  admin' if k.admin else ''}"
            f"  {'revoked ' + str(to_iso(k.revoked_at)) if k.revoked_at else 'active'}"
            f"  {k.label or ''}".rstrip()
            for k in keys
        ]
        or ["no keys"],
    )


@click.command("revoke-key")
@click.argument("key_id")
@click.pass_context
def revoke_key(ctx: click.Context, /, key_id: str) -> None:
    """Revoke an API key by id; a running server refuses it from the next request."""
    settings: Settings = ctx.obj
    with closing(open_keys(settings)) as keys:
        key = keys.revoke(key_id)
    click.echo(f"revoked {key.id}")


#: The core's commands, in every ``command_group``.
COMMANDS: Final = (
    store,
    search,
    lookup,
    entities,
    entity,
    profile,
    alias,
    merge_entities,
    split_alias,
    recall,
    capture,
    get,
    history,
    episode,
    sync,
    read,
    forget,
    pin,
    cold,
    checkpoint,
    purge,
    erasures,
    link,
    unlink,
    links,
    traverse,
    path,
    clusters,
    deps,
    causes,
    parts,
    prune,
    maintain,
    auto_classify,
    categories,
    reflect,
    consolidate,
    backfill_decay,
    backfill_stated_time,
    backfill_windows,
    stats,
    reindex,
    rebuild_entities,
    check,
    export,
    import_,
    backup,
    restore,
    optimize,
    create_key,
    list_keys,
    revoke_key,
)
#: The core's command line (the service's commands are not in it).
cli: Final = command_group()
