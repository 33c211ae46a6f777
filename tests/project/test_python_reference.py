"""The Python reference (docs/python.md) is generated from ``graphmem.__all__``; a test fails
when it drifts. Regenerate it after changing the public API:
``.venv/bin/python -m tests.project.test_python_reference``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
from pathlib import Path
from typing import Protocol

import graphmem

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"
HEADER = """# Python reference

Generated from `graphmem.__all__` and the docstrings by
`python -m tests.project.test_python_reference`; a test fails when it drifts. Start with
`Memory.open`; [concepts.md](concepts.md) explains the ideas (facts, links, valid and transaction
time, decay).

Calling convention: required arguments are positional, every option is keyword-only;
`as_of` (valid time) and `known_at` (transaction time) take a `datetime`, a `date`, epoch seconds
or ISO-8601 text in full or reduced precision ([concepts.md](concepts.md#two-kinds-of-time) lists
the forms), and default to now. Errors are the `GraphmemError` subclasses below, each with a
`code`. The result types have `to_dict()`: their fields ready for JSON, times as ISO-8601 UTC
text.
"""


def render_python_reference() -> str:
    parts = [HEADER]
    for name in graphmem.__all__:
        item = getattr(graphmem, name)
        parts.append(f"## {name}\n")
        if inspect.isclass(item) and issubclass(item, BaseException):
            code = getattr(item, "code", None)
            parts.append(f"Exception{f', code `{code}`' if code else ''}. {_doc(item)}\n")
            continue
        if inspect.isclass(item) and issubclass(item, enum.Enum):
            values = ", ".join(f"`{member.value}`" for member in item)
            parts.append(f"{_doc(item)}\n\nValues: {values}.\n")
            continue
        parts.append(f"{_doc(item)}\n")
        if _is_protocol(item):  # its verbs are documented on the classes that offer them
            verbs = ", ".join(f"`{method}`" for method, _, _ in _methods(item))
            parts.append(f"Protocol. Verbs: {verbs}.\n")
            continue
        if dataclasses.is_dataclass(item):
            fields = ", ".join(f"`{f.name}: {f.type}`" for f in dataclasses.fields(item))
            parts.append(f"Fields: {fields}.\n")
        for method, signature, doc in _methods(item):
            parts += [f"### {name}.{method}\n", "```python", f"{method}{signature}", "```\n"]
            if doc:
                parts.append(f"{doc}\n")
    return "\n".join(parts)


def _methods(cls: type) -> list[tuple[str, str, str]]:
    out = []
    for method, member in vars(cls).items():
        if method.startswith("_") or method == "to_dict":  # to_dict: described once, above
            continue
        function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
        if not inspect.isfunction(function):
            continue
        signature = inspect.signature(function)
        parameters = [p for p in signature.parameters.values() if p.name not in ("self", "cls")]
        shown = signature.replace(parameters=parameters)
        out.append((method, str(shown), _doc(function)))
    return out


def _is_protocol(item: object) -> bool:
    return inspect.isclass(item) and Protocol in item.__bases__


def _doc(item: object) -> str:
    return inspect.cleandoc(inspect.getdoc(item) or "")


def test_the_python_reference_matches_the_public_api() -> None:
    assert PAGE.read_text(encoding="utf-8") == render_python_reference(), (
        "docs/python.md is stale: run `.venv/bin/python -m tests.project.test_python_reference`"
    )


def test_every_public_name_and_method_has_a_docstring() -> None:
    undocumented = [name for name in graphmem.__all__ if not _doc(getattr(graphmem, name))]
    undocumented += [
        f"{name}.{method}"
        for name in graphmem.__all__
        if inspect.isclass(getattr(graphmem, name)) and not _is_protocol(getattr(graphmem, name))
        for method, _, doc in _methods(getattr(graphmem, name))
        if not doc
    ]
    assert not undocumented, undocumented


if __name__ == "__main__":
    PAGE.write_text(render_python_reference(), encoding="utf-8")
