"""Time values, the forms a time may be written in, and the bi-temporal visibility rule.

Times are stored as epoch seconds (UTC) rounded to the microsecond, so that an ISO-8601 export
and re-import gives back exactly the same number. A read at ``(as_of=T, known_at=K)`` sees a row
when memory had recorded it by K, had not retracted it by K, it was valid at T, and memory did not
yet know at K that its validity had ended by T.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Final

from .errors import InvalidInput

TimeInput = datetime | date | str | int | float


@dataclass(frozen=True, slots=True)
class TimeForm:
    """One way to write a time: its pattern, an example and the instant it means (Markdown)."""

    form: str
    example: str
    means: str


#: Every form a time may take, on every interface (Python, GraphQL, CLI, MCP, import). The
#: GraphQL ``DateTime`` description, the MCP and CLI help, the error for an unreadable time and
#: the table in docs/concepts.md are built from it. Python also takes ``datetime`` and ``date``.
TIME_FORMS: Final = (
    TimeForm("`YYYY`", "2024", "the first instant of that year, UTC"),
    TimeForm("`YYYY-MM`", "2024-05", "the first instant of that month, UTC"),
    TimeForm("`YYYY-MM-DD`", "2024-05-01", "midnight UTC at the start of that day"),
    TimeForm(
        "`YYYY-MM-DDThh:mm[:ss[.ffffff]]`",
        "2024-05-01T12:00:00",
        "that moment, UTC (a space may replace the `T`)",
    ),
    TimeForm(
        "… followed by `Z` or `±hh:mm`",
        "2024-05-01T14:00:00+02:00",
        "that moment in that zone (`Z` is UTC)",
    ),
    TimeForm(
        "epoch seconds",
        "1714564800",
        "seconds since 1970-01-01T00:00:00Z: a number, or a digit string longer than four digits",
    ),
)
#: The accepted forms in one sentence, for descriptions and error messages.
ACCEPTED_TIMES: Final = (
    "ISO-8601 in full or reduced precision ("
    + ", ".join(f.example for f in TIME_FORMS[:-1])
    + "; UTC when no zone is given) or epoch seconds ("
    + TIME_FORMS[-1].example
    + ")"
)

_YEAR = re.compile(r"^(\d{4})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
#: Epoch seconds written as text have more than four digits: four are a year.
_EPOCH_TEXT = re.compile(r"^-?\d{5,}(\.\d+)?$")
#: 9999-12-31T23:59:59Z, the last second a datetime can hold.
_LATEST: Final = 253402300799


def parse_time(value: TimeInput | None, *, field: str = "time") -> float | None:
    """Epoch seconds for a time in one of the ``TIME_FORMS``, a datetime or a date; None stays
    None. InvalidInput, quoting the accepted forms, for anything else.

    A naive datetime or ISO string without an offset is taken as UTC. A bare date means its
    midnight UTC; a year or a month, its first instant.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"expected a time, got {value!r}: use {ACCEPTED_TIMES}", field=field)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, datetime):
        seconds = _aware(value).timestamp()
    elif isinstance(value, date):
        seconds = datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    elif isinstance(value, str):
        seconds = _parse_text(value.strip(), field)
    else:
        raise InvalidInput(
            f"expected a time, got {type(value).__name__}: use {ACCEPTED_TIMES}", field=field
        )
    if not math.isfinite(seconds) or abs(seconds) > _LATEST:
        raise InvalidInput(f"time out of range: {value!r}", field=field)
    return round(seconds, 6)


def to_datetime(seconds: float | None) -> datetime | None:
    """A timezone-aware UTC datetime for stored epoch seconds."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC)


def to_iso(seconds: float | None) -> str | None:
    """ISO-8601 UTC text (``2024-05-01T12:00:00Z``, microseconds when present)."""
    moment = to_datetime(seconds)
    if moment is None:
        return None
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class TimeScope:
    """The two instants of a read: valid time ``as_of`` and transaction time ``known_at``."""

    as_of: float
    known_at: float
    #: True when the caller asked for "now" on both axes: the cheap, common case.
    current: bool = True

    @classmethod
    def resolve(
        cls, now: float, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> TimeScope:
        """The scope of a read at ``now``: ``as_of`` and ``known_at`` parsed (InvalidInput if
        they cannot be), each defaulting to ``now``."""
        t = parse_time(as_of, field="as_of")
        k = parse_time(known_at, field="known_at")
        return cls(
            as_of=now if t is None else t,
            known_at=now if k is None else k,
            current=t is None and k is None,
        )

    def fact_clause(
        self,
        alias: str = "f",
        *,
        include_superseded: bool = False,
        param: Callable[[str], str] | None = None,
    ) -> str:
        """SQL that keeps the rows of ``alias`` visible in this scope (the parameters ``as_of``
        and ``known_at``, of :attr:`params`, spelled by ``param``: the store's dialect's; by
        default sqlite3's ``:as_of``, ``:known_at``).

        Expiry is a transaction-time event: a fact expired at K is no longer known at K.
        ``include_superseded`` also shows versions whose validity had ended by ``as_of``.
        """
        a, as_of, known_at = alias, *_named(param, "as_of", "known_at")
        parts = [
            f"{a}.recorded_at <= {known_at}",
            f"({a}.retracted_at IS NULL OR {a}.retracted_at > {known_at})",
            f"{a}.valid_from <= {as_of}",
            f"({a}.expires_at IS NULL OR {a}.expires_at > {known_at})",
        ]
        if not include_superseded:
            parts.append(
                f"NOT ({a}.valid_until IS NOT NULL AND {a}.valid_until_recorded_at <= {known_at}"
                f" AND {a}.valid_until <= {as_of})"
            )
        return " AND ".join(parts)

    def link_clause(self, alias: str = "l", *, param: Callable[[str], str] | None = None) -> str:
        """The same rule for links, which have no expiry."""
        a, as_of, known_at = alias, *_named(param, "as_of", "known_at")
        return (
            f"{a}.recorded_at <= {known_at}"
            f" AND ({a}.retracted_at IS NULL OR {a}.retracted_at > {known_at})"
            f" AND {a}.valid_from <= {as_of}"
            f" AND NOT ({a}.valid_until IS NOT NULL AND {a}.valid_until_recorded_at <= {known_at}"
            f" AND {a}.valid_until <= {as_of})"
        )

    @property
    def params(self) -> dict[str, float]:
        return {"as_of": self.as_of, "known_at": self.known_at}


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _parse_text(text: str, field: str) -> float:
    if not text:
        raise InvalidInput(f"empty date: use {ACCEPTED_TIMES}", field=field)
    if _EPOCH_TEXT.match(text):
        return float(text)
    year, month = _YEAR.match(text), _MONTH.match(text)
    candidate = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        if year is not None:
            return datetime(int(year[1]), 1, 1, tzinfo=UTC).timestamp()
        if month is not None:
            return datetime(int(month[1]), int(month[2]), 1, tzinfo=UTC).timestamp()
        return _aware(datetime.fromisoformat(candidate)).timestamp()
    except ValueError:
        raise InvalidInput(f"cannot parse {text!r}: use {ACCEPTED_TIMES}", field=field) from None


def _named(param: Callable[[str], str] | None, *names: str) -> list[str]:
    """``names`` as parameters spelled by ``param`` (default: sqlite3's ``:name``)."""
    return [f":{name}" if param is None else param(name) for name in names]
