"""Time values and the bi-temporal visibility rule (DESIGN §3).

Times are stored as epoch seconds (UTC) rounded to the microsecond, so that an ISO-8601 export
and re-import gives back exactly the same number. A read at ``(as_of=T, known_at=K)`` sees a row
when memory had recorded it by K, had not retracted it by K, it was valid at T, and memory did not
yet know at K that its validity had ended by T.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

from .errors import InvalidInput

TimeInput = datetime | date | str | int | float

_EPOCH_TEXT = re.compile(r"^-?\d+(\.\d+)?$")


def parse_time(value: TimeInput | None, *, field: str = "time") -> float | None:
    """Epoch seconds for a datetime, date, ISO-8601 string or epoch number; None stays None.

    A naive datetime or ISO string without an offset is taken as UTC. A bare date means its
    midnight UTC.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"expected a date or time, got {value!r}", field=field)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, datetime):
        seconds = _aware(value).timestamp()
    elif isinstance(value, date):
        seconds = datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    elif isinstance(value, str):
        seconds = _parse_text(value.strip(), field)
    else:
        raise InvalidInput(f"expected a date or time, got {type(value).__name__}", field=field)
    if not math.isfinite(seconds) or abs(seconds) > 253402300799:  # 9999-12-31T23:59:59Z
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

    def fact_clause(self, alias: str = "f", *, include_superseded: bool = False) -> str:
        """SQL that keeps the rows of ``alias`` visible in this scope (named params :as_of, :known_at).

        Expiry is a transaction-time event: a fact expired at K is no longer known at K.
        ``include_superseded`` also shows versions whose validity had ended by ``as_of``.
        """
        a = alias
        parts = [
            f"{a}.recorded_at <= :known_at",
            f"({a}.retracted_at IS NULL OR {a}.retracted_at > :known_at)",
            f"{a}.valid_from <= :as_of",
            f"({a}.expires_at IS NULL OR {a}.expires_at > :known_at)",
        ]
        if not include_superseded:
            parts.append(
                f"NOT ({a}.valid_until IS NOT NULL AND {a}.valid_until_recorded_at <= :known_at"
                f" AND {a}.valid_until <= :as_of)"
            )
        return " AND ".join(parts)

    def link_clause(self, alias: str = "l") -> str:
        """The same rule for links, which have no expiry."""
        a = alias
        return (
            f"{a}.recorded_at <= :known_at"
            f" AND ({a}.retracted_at IS NULL OR {a}.retracted_at > :known_at)"
            f" AND {a}.valid_from <= :as_of"
            f" AND NOT ({a}.valid_until IS NOT NULL AND {a}.valid_until_recorded_at <= :known_at"
            f" AND {a}.valid_until <= :as_of)"
        )

    @property
    def params(self) -> dict[str, float]:
        return {"as_of": self.as_of, "known_at": self.known_at}


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _parse_text(text: str, field: str) -> float:
    if not text:
        raise InvalidInput("empty date", field=field)
    if _EPOCH_TEXT.match(text):
        return float(text)
    candidate = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        if len(candidate) == 4 and candidate.isdigit():  # a bare year
            return datetime(int(candidate), 1, 1, tzinfo=UTC).timestamp()
        return _aware(datetime.fromisoformat(candidate)).timestamp()
    except ValueError:
        raise InvalidInput(
            f"cannot parse {text!r}: use ISO-8601 (2024-05-01, 2024-05-01T12:00:00Z) "
            "or epoch seconds",
            field=field,
        ) from None
