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
        errors.EmbedderMismatch,
        errors.EmbedderError,
        errors.StorageError,
    ]
    assert all(issubclass(c, errors.GraphmemError) for c in classes)
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(codes)
    for c in classes:  # the hierarchy in the module docstring names every class and code
        assert c.__name__ in (errors.__doc__ or "") and c.code in (errors.__doc__ or "")
