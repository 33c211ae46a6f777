"""The JSON form of the result types graphmem's verbs return, written once for all of them.

A result type's ``to_dict`` is ``json_fields(self)`` (a ``JSONForm``'s, inherited): its fields by name, in field order, each
as JSON holds it (``json_value``), with the few fields whose form is the type's own given by
name, and without those declared ``field(metadata=NOT_SHOWN)``. What a type adds beyond its
fields (a property, a summary) it adds to that.
"""

from __future__ import annotations

from dataclasses import Field, fields
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final

from .temporal import to_iso

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: The metadata of a field that its type's JSON form leaves out (kept for the engine's own use,
#: or shown in another form).
NOT_SHOWN: Final = MappingProxyType({"json": False})


class JSONForm:
    """A dataclass whose JSON form (``to_dict``) is its fields, as ``json_fields`` writes them."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_dict(self) -> dict[str, Any]:
        return json_fields(self)


def json_fields(item: DataclassInstance, **values: Any) -> dict[str, Any]:
    """``item``'s fields by name, in field order, each in its JSON form, but those NOT_SHOWN;
    ``values`` stand in for the fields they name (in the field's place). A name that is no
    field is a TypeError."""
    out: dict[str, Any] = {}
    for f in fields(item):
        name = f.name
        if not f.metadata.get("json", True):
            values.pop(name, None)
            continue
        out[name] = values.pop(name) if name in values else json_value(getattr(item, name))
    if values:
        raise TypeError(f"{type(item).__name__} has no field {', '.join(sorted(values))}")
    return out


def json_value(value: Any) -> Any:
    """A value as JSON holds it: a time as ISO-8601 UTC text, a value with its own ``to_dict``
    as that, a tuple or list as a list and a dict as a dict of the same, the rest as it is."""
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, datetime):
        return to_iso(value.timestamp())
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value
