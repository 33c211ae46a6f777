"""Scheduled maintenance: the jobs a namespace runs by itself, when each is due, and the record
each run leaves.

1. A job is due when its period (the ``<job>_interval`` setting, seconds; 0 turns it off) has
   passed since its last recorded run started, or it has never run.
2. A run is claimed by recording it as ``running`` in the store, inside a write transaction: the
   store's writer lock makes the claim exclusive across processes and replicas, so a job that
   another process is running is skipped, not run twice. A run recorded as running for longer
   than ``LEASE_S`` was abandoned by a process that stopped; the next claim closes it as failed.
3. The job runs; its record gets what it changed (counts by kind), the model requests it made
   and, if it failed, why: an error changes nothing; a model answer that could not be used
   changes nothing of its batch (what other batches changed is counted). Either way the job is
   tried again at its next period.

``graphmem serve`` runs what is due for every open namespace (each minute, or sooner when a
period is shorter); ``graphmem maintain`` does it once, for cron.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, get_args

from .errors import GraphmemError, InvalidInput
from .models import MaintenanceRun, RunStatus
from .temporal import to_datetime

if TYPE_CHECKING:
    from .settings import Settings
    from .storage.interface import Store

#: The jobs, in the order they run when several are due: pruning first, so that the model is
#: never asked about facts about to be deleted.
MaintenanceJob = Literal["prune", "classify", "reflect", "consolidate"]
JOBS: Final[tuple[str, ...]] = get_args(MaintenanceJob)
#: What each job does (docs and the GraphQL schema read this).
JOB_DESCRIPTIONS: Final[Mapping[str, str]] = {
    "prune": "deletes expired facts, soft-decays ageing ones and deletes the faded "
    "(`Memory.prune`)",
    "classify": "relabels facts of category `other` by the chat model and discovers categories "
    "(`Memory.auto_classify`; with `classifier = llm`, else it changes nothing)",
    "reflect": "asks the chat model for patterns among recent facts, and rules from them "
    "(`Memory.reflect`)",
    "consolidate": "merges clusters of near-duplicate live facts into one that supersedes "
    "them (`Memory.consolidate`)",
}
#: Kinds of change a run reports at most (prune's expired, decayed and faded).
MAX_CHANGED_KINDS: Final = 3
#: Seconds after which a run still recorded as running counts as abandoned.
LEASE_S: Final = 3600.0
#: The longest the server waits between two looks at what is due.
CHECK_EVERY_S: Final = 60.0

_log = logging.getLogger("graphmem.maintenance")
#: A run's error when its job failed unexpectedly.
UNEXPECTED: Final = "unexpected error (the details are in the server's log)"


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What a job reports: counts of what it changed, the model requests it made, and the
    problem that made it change nothing (a failed or malformed model answer)."""

    changed: dict[str, int]
    requests: int = 0
    error: str | None = None


def interval(settings: Settings, job: str) -> float:
    """The period of ``job`` in seconds (0: off)."""
    return float(getattr(settings, f"{job}_interval"))


def check_every(settings: Settings) -> float:
    """How often the server looks at what is due: every minute, or each shortest period."""
    periods = [interval(settings, job) for job in JOBS]
    return min([CHECK_EVERY_S, *(p for p in periods if p > 0)])


def checked_jobs(jobs: Sequence[str] | None) -> tuple[str, ...]:
    """``jobs`` in their running order (all of them when None); InvalidInput for an unknown
    one or for more names than there are jobs."""
    if jobs is None:
        return JOBS
    if isinstance(jobs, str):
        jobs = [jobs]
    if len(jobs) > len(JOBS):
        raise InvalidInput(f"at most {len(JOBS)} jobs may be named", field="jobs")
    for job in jobs:
        if job not in JOBS:
            raise InvalidInput(f"unknown job {job!r}; the jobs are {', '.join(JOBS)}", field="jobs")
    return tuple(job for job in JOBS if job in jobs)


def due(settings: Settings, last: Mapping[str, MaintenanceRun], now: float) -> list[str]:
    """The jobs whose period has passed since their last run started (or that never ran)."""
    out = []
    for job in JOBS:
        period = interval(settings, job)
        if period <= 0:
            continue
        previous = last.get(job)
        if previous is None or previous.started_at.timestamp() + period <= now:
            out.append(job)
    return out


def run(
    store: Store,
    settings: Settings,
    work: Mapping[str, Callable[[], JobOutcome]],
    jobs: Sequence[str] | None,
    *,
    force: bool,
) -> list[MaintenanceRun]:
    """Run ``jobs`` (all when None) that are due — every one of them when ``force`` — each
    claimed and recorded in ``store``; returns their runs, a job another process is running
    as ``skipped``."""
    chosen = checked_jobs(jobs)
    if not force:
        pending = due(settings, store.last_runs(), store.now())
        chosen = tuple(job for job in chosen if job in pending)
    return [_run_one(store, job, work[job]) for job in chosen]


def _run_one(store: Store, job: str, work: Callable[[], JobOutcome]) -> MaintenanceRun:
    with store.transaction() as tx:
        claimed = tx.claim_run(job, LEASE_S)
        started = tx.now
    started_at = to_datetime(started)
    assert started_at is not None
    if claimed is None:
        return MaintenanceRun(
            job, started_at, started_at, "skipped", error="another process is running it"
        )
    try:
        outcome = work()
    except GraphmemError as exc:
        outcome = JobOutcome({}, 0, exc.message)
    except Exception:  # recorded, and tried again at the next period
        # Masked as the service masks INTERNAL_ERROR: any key may read the run, and an
        # unexpected error's text may hold paths or SQL. The details go to the log.
        _log.exception("maintenance job %s failed", job)
        outcome = JobOutcome({}, 0, UNEXPECTED)
    status: RunStatus = "failed" if outcome.error else "done"
    with store.transaction() as tx:
        tx.finish_run(claimed, status, outcome.changed, outcome.requests, outcome.error)
        finished = tx.now
    if outcome.error:
        _log.warning("maintenance job %s failed: %s", job, outcome.error)
    elif any(outcome.changed.values()):
        _log.info("maintenance job %s: %s", job, outcome.changed)
    return MaintenanceRun(
        job,
        started_at,
        to_datetime(finished),
        status,
        dict(outcome.changed),
        outcome.requests,
        outcome.error,
        claimed,
    )
