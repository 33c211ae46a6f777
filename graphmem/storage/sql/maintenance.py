"""The maintenance run records (:mod:`graphmem.maintenance`): a run is claimed by inserting its
row as ``running`` inside a write transaction, which both engines hold exclusively per
namespace, so two processes or replicas never run one job at once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ...errors import InvalidInput
from ...models import MaintenanceRun, RunStatus
from ...temporal import to_datetime
from .connections import SQLConnection

#: Run records kept per namespace (the oldest are dropped).
RUNS_KEPT: Final = 1_000
#: The most records one read returns.
MAX_RUNS: Final = 1_000

_COLUMNS: Final = "seq, job, started_at, finished_at, status, changed, requests, error"


def claim(conn: SQLConnection, job: str, now: float, lease: float) -> int | None:
    """Record ``job`` as running from ``now`` and return its record's number, or None when a
    run of it started less than ``lease`` seconds ago is still running. A running record
    older than that was abandoned (its process stopped) and is closed as failed."""
    d = conn.dialect
    running = conn.execute(
        f"SELECT seq, started_at FROM maintenance_runs WHERE job = {d.arg} AND status = 'running'",
        [job],
    ).fetchall()
    if any(started > now - lease for _, started in running):
        return None
    for seq, _ in running:
        finish(conn, seq, now, "failed", {}, 0, "abandoned: the process running it stopped")
    row = conn.execute(
        "INSERT INTO maintenance_runs (job, started_at, status, changed, requests)"
        f" VALUES ({d.arg}, {d.arg}, 'running', '{{}}', 0) RETURNING seq",
        [job, now],
    ).fetchone()
    conn.execute(
        "DELETE FROM maintenance_runs WHERE seq < (SELECT seq FROM maintenance_runs"
        f" ORDER BY seq DESC LIMIT 1 OFFSET {d.arg})",
        [RUNS_KEPT - 1],
    )
    return int(row[0])


def finish(
    conn: SQLConnection,
    seq: int,
    now: float,
    status: RunStatus,
    changed: Mapping[str, int],
    requests: int,
    error: str | None,
) -> None:
    d = conn.dialect
    conn.execute(
        f"UPDATE maintenance_runs SET finished_at = {d.arg}, status = {d.arg}, changed = {d.arg},"
        f" requests = {d.arg},"
        f" error = {d.arg} WHERE seq = {d.arg}",
        [now, status, json.dumps(dict(changed), sort_keys=True), requests, error, seq],
    )


def runs(conn: SQLConnection, job: str | None, limit: int) -> list[MaintenanceRun]:
    """The newest ``limit`` records (of ``job`` only, if given), newest first."""
    d = conn.dialect
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RUNS:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_RUNS}", field="limit")
    where, params = (f"WHERE job = {d.arg}", [job]) if job is not None else ("", [])
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM maintenance_runs {where} ORDER BY seq DESC {d.limit(d.arg)}",
        [*params, limit],
    ).fetchall()
    return [_run(row) for row in rows]


def last_runs(conn: SQLConnection) -> dict[str, MaintenanceRun]:
    """The newest record of each job that has one."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM maintenance_runs WHERE seq IN"
        " (SELECT max(seq) FROM maintenance_runs GROUP BY job)"
    ).fetchall()
    return {run.job: run for run in map(_run, rows)}


def _run(row: Any) -> MaintenanceRun:
    seq, job, started, finished, status, changed, requests, error = row
    started_at = to_datetime(started)
    assert started_at is not None
    return MaintenanceRun(
        job=job,
        started_at=started_at,
        finished_at=to_datetime(finished),
        status=status,
        changed={k: int(v) for k, v in json.loads(changed).items()},
        requests=int(requests),
        error=error,
        id=int(seq),
    )
