"""The public Python surface: curated exports and typed errors with codes."""

from __future__ import annotations

import importlib.metadata
import inspect
import types
import typing
from collections.abc import Iterator
from pathlib import Path

from click.testing import CliRunner
from graphmem.server.http.app import create_app

import graphmem
from graphmem import errors
from graphmem.cli import cli

from ..support.graphql_clients import InProcess


def test_all_is_exactly_the_public_names_and_sorted() -> None:
    public = sorted(
        name
        for name, value in vars(graphmem).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    )
    assert graphmem.__all__ == public


def test_every_type_a_public_method_returns_is_exported() -> None:
    exported = {getattr(graphmem, name) for name in graphmem.__all__}
    missing = set()
    for cls in (getattr(graphmem, name) for name in graphmem.__all__):
        if not inspect.isclass(cls) or not cls.__module__.startswith("graphmem"):
            continue
        for name, member in vars(cls).items():
            if name.startswith("_") or not callable(getattr(cls, name, None)):
                continue
            function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
            if not inspect.isfunction(function):
                continue
            returned = typing.get_type_hints(function).get("return")
            for found in _classes_in(returned):
                if found.__module__.startswith("graphmem") and found not in exported:
                    missing.add(f"{cls.__name__}.{name} -> {found.__module__}.{found.__name__}")
    assert not missing, sorted(missing)


def _classes_in(annotation: object) -> Iterator[type]:
    if inspect.isclass(annotation) and not typing.get_args(annotation):
        yield annotation
    for argument in typing.get_args(annotation):
        yield from _classes_in(argument)
    origin = typing.get_origin(annotation)
    if inspect.isclass(origin):
        yield origin


def test_every_error_has_a_distinct_code_and_is_a_graphmem_error() -> None:
    classes: list[type[errors.GraphmemError]] = [
        errors.InvalidInput,
        errors.NotFound,
        errors.Conflict,
        errors.Forbidden,
        errors.EmbedderMismatch,
        errors.EmbedderError,
        errors.LLMError,
        errors.StorageError,
        errors.QueryTimeout,
    ]
    assert all(issubclass(c, errors.GraphmemError) for c in classes)
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(codes)
    for c in classes:  # the hierarchy in the module docstring names every class and code
        assert c.__name__ in (errors.__doc__ or "") and c.code in (errors.__doc__ or "")


def test_listeners_hear_each_committed_change_and_cannot_break_a_write(
    mem: graphmem.Memory,
) -> None:
    heard: list[tuple[str, str]] = []
    mem.subscribe(lambda changes: heard.extend((c.kind, c.id) for c in changes))

    def broken(changes: list[graphmem.Change]) -> None:
        raise RuntimeError("a listener bug")

    unsubscribe = mem.subscribe(broken)
    berlin = mem.store("Ana lives in Berlin", entity="Ana", key="city", value="Berlin").fact
    paris = mem.store("Ana lives in Paris", entity="Ana", key="city", value="Paris").fact
    unsubscribe()
    assert berlin is not None and paris is not None
    link = mem.link(paris.id, berlin.id, "RELATED_TO")
    mem.unlink(link.id)
    mem.forget(paris.id)
    mem.purge(berlin.id)
    assert heard == [
        ("FACT_STORED", berlin.id),
        ("FACT_STORED", paris.id),
        ("FACT_SUPERSEDED", berlin.id),
        ("LINK_MADE", link.id),
        ("LINK_REMOVED", link.id),
        ("FACT_FORGOTTEN", paris.id),
        ("FACT_PURGED", berlin.id),
    ]


def test_settings_replaced_on_an_open_memory_apply_from_the_next_call(
    mem: graphmem.Memory,
) -> None:
    mem.store("The deploy runs on Friday evening")
    mem.store("Friday lunch is with the team")
    mem.store("Deploys need a green build")
    query = "deploy friday"
    mem.settings = mem.settings.model_copy(update={"fts_weight": 1.0})
    keyword_heavy = [round(h.score, 6) for h in mem.search(query, limit=3)]
    mem.settings = mem.settings.model_copy(update={"fts_weight": 0.0})
    vector_only = [round(h.score, 6) for h in mem.search(query, limit=3)]
    assert keyword_heavy != vector_only
    assert mem.store("the deploy RUNS on friday   evening").action == "NOOP"  # fuzzy dedup
    mem.settings = mem.settings.model_copy(update={"fuzzy_dedup": False})
    assert mem.store("the deploy RUNS on friday   evening").action == "ADD"


def test_one_version_is_the_packages_the_clis_and_the_services(tmp_path: Path) -> None:
    assert importlib.metadata.version("graphmem") == graphmem.__version__
    shown = CliRunner().invoke(cli, ["--version"])
    assert shown.output.strip() == f"graphmem, version {graphmem.__version__}"
    with InProcess(create_app(graphmem.Settings(embedder="hash", data_dir=tmp_path))) as service:
        assert service.data("{ version }") == {"version": graphmem.__version__}
    changelog = (Path(__file__).parents[2] / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {graphmem.__version__} " in changelog  # the version is described
