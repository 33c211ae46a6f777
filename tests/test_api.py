"""The public Python surface: curated exports and typed errors with codes."""

from __future__ import annotations

import graphmem
from graphmem import errors


def test_the_public_names_are_sorted_and_importable() -> None:
    assert graphmem.__all__ == sorted(graphmem.__all__)
    for name in graphmem.__all__:
        assert getattr(graphmem, name) is not None


def test_every_error_has_a_distinct_code_and_is_a_graphmem_error() -> None:
    classes = [
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
