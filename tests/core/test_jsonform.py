"""The JSON form every result type's ``to_dict`` shares."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from graphmem.jsonform import NOT_SHOWN, json_fields


@dataclass(frozen=True)
class _Inner:
    name: str

    def to_dict(self) -> dict[str, Any]:
        return {"inner": self.name}


@dataclass(frozen=True)
class _Result:
    at: datetime
    ids: tuple[str, ...]
    inner: _Inner | None
    nested: dict[str, Any] = field(default_factory=dict)
    count: int = 0
    private: str = field(default="kept", metadata=NOT_SHOWN)


def test_a_result_becomes_json_with_times_as_iso_text_and_tuples_as_lists_hidden_fields_left_out() -> (
    None
):
    moment = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    result = _Result(moment, ("a", "b"), _Inner("x"), {"when": [moment], "pair": ("c", 1)}, 3)

    out = json_fields(result)

    assert list(out) == ["at", "ids", "inner", "nested", "count"]
    assert result.private == "kept"  # the value is still there, only not shown
    assert out == {
        "at": "2024-05-01T12:00:00Z",
        "ids": ["a", "b"],
        "inner": {"inner": "x"},
        "nested": {"when": ["2024-05-01T12:00:00Z"], "pair": ["c", 1]},
        "count": 3,
    }
    json.dumps(out)


def test_a_field_given_by_name_keeps_its_place_and_an_unknown_name_is_refused() -> None:
    result = _Result(datetime(2024, 5, 1, tzinfo=UTC), (), None)

    out = json_fields(result, ids="none")

    assert list(out) == ["at", "ids", "inner", "nested", "count"]
    assert out["ids"] == "none"
    with pytest.raises(TypeError, match="no field idz"):
        json_fields(result, idz=[])
