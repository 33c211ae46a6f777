"""Scheduled maintenance: the jobs a namespace runs by itself, when each is due, and the record
each run leaves.

1. Each job is registered once, in :data:`REGISTRY`: its name, what it does, the setting of its
   period, its cost, the kinds of change it counts and its run. ``Memory.maintain``, the
   server's schedule, GraphQL's ``MaintenanceJob``, the MCP tool ``memory_maintain``, the CLI's
   ``maintain --job`` and docs/agents.md's table all read the registry.
2. A job is due when its period (its interval setting, seconds; 0 turns it off) has passed since
   its last recorded run started, or it has never run.
3. A run is claimed by recording it as ``running`` in the store, inside a write transaction: the
   store's writer lock makes the claim exclusive across processes and replicas, so a job that
   another process is running is skipped, not run twice. A run recorded as running for longer
   than ``LEASE_S`` was abandoned by a process that stopped; the next claim closes it as failed.
4. The job runs; its record gets what it changed (counts by kind), the model requests it made
   and, if it failed, why: an error changes nothing; a model answer that could not be used
   changes nothing of its batch (what other batches changed is counted). Either way the job is
   tried again at its next period.

``graphmem serve`` runs what is due for every open namespace (each minute, or sooner when a
period is shorter; at start-up the ``local`` jobs before the first request); ``graphmem
maintain`` does it once, for cron.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol

from .errors import GraphmemError, InvalidInput
from .models import MaintenanceRun, RunStatus
from .temporal import to_datetime

if TYPE_CHECKING:
    from .categorize import ClassifyReport
    from .consolidation import ConsolidateReport
    from .prune import PruneReport
    from .reflection import ReflectReport
    from .settings import Settings
    from .storage.interface import Store

#: What one run of a job costs: ``local``, the namespace's store alone (seconds at most: the
#: server runs it before answering its first request); ``model``, it may also send requests
#: to the chat model and wait on them for minutes (the server runs it in the background).
JobCost = Literal["local", "model"]


class Maintained(Protocol):
    """What the jobs run on: a ``graphmem.Memory``, as its settings and the verbs that do each
    job's work (named here, not imported: Memory runs the jobs, so this module is below it)."""

    settings: Settings

    def prune(self) -> PruneReport: ...
    def auto_classify(self) -> ClassifyReport: ...
    def reflect(self) -> ReflectReport: ...
    def consolidate(self) -> ConsolidateReport: ...


@dataclass(frozen=True, slots=True)
class Job:
    """A scheduled maintenance job, as every surface offers it."""

    #: Its name (GraphQL's enum value is the name in capitals).
    name: str
    #: What it does, a phrase that follows "It" (GraphQL's enum and the docs read it).
    description: str
    #: The setting of its period in seconds (0: never scheduled).
    interval_setting: str
    cost: JobCost
    #: The kinds of change it counts, each reported by every run that finishes.
    changes: tuple[str, ...]
    #: Does the work once, in the namespace of the memory given.
    run: Callable[[Maintained], JobOutcome]


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What a job reports: counts of what it changed, the model requests it made, and the
    problem that made it change nothing (a failed or malformed model answer)."""

    changed: dict[str, int]
    requests: int = 0
    error: str | None = None


def _prune(memory: Maintained) -> JobOutcome:
    report = memory.prune()
    return JobOutcome(
        {"expired": report.expired, "decayed": report.decayed, "faded": report.low_confidence}
    )


def _classify(memory: Maintained) -> JobOutcome:
    report = memory.auto_classify()
    changed = {"relabelled": sum(report.relabelled.values()), "discovered": len(report.discovered)}
    return JobOutcome(changed, report.requests, report.error)


def _reflect(memory: Maintained) -> JobOutcome:
    report = memory.reflect()
    changed = {"patterns": len(report.patterns), "rules": len(report.rules)}
    return JobOutcome(changed, report.requests, report.error)


def _consolidate(memory: Maintained) -> JobOutcome:
    report = memory.consolidate()
    changed = {"merged": len(report.merged), "superseded": report.superseded}
    return JobOutcome(changed, report.requests, report.error)


#: The jobs by name, in the order they run when several are due: pruning first, so that the
#: model is never asked about facts about to be deleted.
REGISTRY: Final[dict[str, Job]] = {
    job.name: job
    for job in (
        Job(
            "prune",
            "deletes expired facts, soft-decays ageing ones and deletes the faded (`Memory.prune`)",
            "prune_interval",
            "local",
            ("expired", "decayed", "faded"),
            _prune,
        ),
        Job(
            "classify",
            "relabels facts of category `other` by the chat model and discovers categories "
            "(`Memory.auto_classify`; with `classifier = llm`, else it changes nothing)",
            "classify_interval",
            "model",
            ("relabelled", "discovered"),
            _classify,
        ),
        Job(
            "reflect",
            "asks the chat model for patterns among recent facts, and rules from them "
            "(`Memory.reflect`)",
            "reflect_interval",
            "model",
            ("patterns", "rules"),
            _reflect,
        ),
        Job(
            "consolidate",
            "merges clusters of near-duplicate live facts into one that supersedes them "
            "(`Memory.consolidate`)",
            "consolidate_interval",
            "model",
            ("merged", "superseded"),
            _consolidate,
        ),
    )
}
#: Seconds after which a run still recorded as running counts as abandoned.
LEASE_S: Final = 3600.0
#: The longest the server waits between two looks at what is due.
CHECK_EVERY_S: Final = 60.0

_log = logging.getLogger("graphmem.maintenance")
#: A run's error when its job failed unexpectedly.
UNEXPECTED: Final = "unexpected error (the details are in the server's log)"


def interval(settings: Settings, job: str) -> float:
    """The period of ``job`` in seconds (0: off)."""
    return float(getattr(settings, REGISTRY[job].interval_setting))


def check_every(settings: Settings) -> float:
    """How often the server looks at what is due: every minute, or each shortest period."""
    periods = [interval(settings, job) for job in REGISTRY]
    return min([CHECK_EVERY_S, *(p for p in periods if p > 0)])


def local_jobs() -> tuple[str, ...]:
    """The jobs of cost ``local``: quick enough to run before the server's first answer."""
    return tuple(name for name, job in REGISTRY.items() if job.cost == "local")


def most_changed_kinds() -> int:
    """The most kinds of change one run reports."""
    return max(len(job.changes) for job in REGISTRY.values())


def checked_jobs(jobs: Sequence[str] | None) -> tuple[str, ...]:
    """``jobs`` in their running order (all of them when None); InvalidInput for an unknown
    one or for more names than there are jobs."""
    if jobs is None:
        return tuple(REGISTRY)
    if isinstance(jobs, str):
        jobs = [jobs]
    if len(jobs) > len(REGISTRY):
        raise InvalidInput(f"at most {len(REGISTRY)} jobs may be named", field="jobs")
    for job in jobs:
        check_job(job, field="jobs")
    return tuple(job for job in REGISTRY if job in jobs)


def check_job(job: str, *, field: str = "job") -> None:
    """InvalidInput (on ``field``) unless ``job`` is a registered job's name."""
    if job not in REGISTRY:
        raise InvalidInput(f"unknown job {job!r}; the jobs are {', '.join(REGISTRY)}", field=field)


def due(settings: Settings, last: Mapping[str, MaintenanceRun], now: float) -> list[str]:
    """The jobs whose period has passed since their last run started (or that never ran)."""
    out = []
    for job in REGISTRY:
        period = interval(settings, job)
        if period <= 0:
            continue
        previous = last.get(job)
        if previous is None or previous.started_at.timestamp() + period <= now:
            out.append(job)
    return out


def run(
    memory: Maintained, store: Store, jobs: Sequence[str] | None, *, force: bool
) -> list[MaintenanceRun]:
    """Run on ``memory`` the ``jobs`` (all when None) that are due by its settings — every one
    of them when ``force`` — each claimed and recorded in ``store``, its own; returns their
    runs, a job another process is running as ``skipped``."""
    chosen = checked_jobs(jobs)
    if not force:
        pending = due(memory.settings, store.last_runs(), store.now())
        chosen = tuple(job for job in chosen if job in pending)
    return [_run_one(memory, store, REGISTRY[job]) for job in chosen]


def _run_one(memory: Maintained, store: Store, job: Job) -> MaintenanceRun:
    with store.transaction() as tx:
        claimed = tx.claim_run(job.name, LEASE_S)
        started = tx.now
    started_at = to_datetime(started)
    assert started_at is not None
    if claimed is None:
        return MaintenanceRun(
            job.name, started_at, started_at, "skipped", error="another process is running it"
        )
    try:
        outcome = job.run(memory)
    except GraphmemError as exc:
        outcome = JobOutcome({}, 0, exc.message)
    except Exception:  # recorded, and tried again at the next period
        # Masked as the service masks INTERNAL_ERROR: any key may read the run, and an
        # unexpected error's text may hold paths or SQL. The details go to the log.
        _log.exception("maintenance job %s failed", job.name)
        outcome = JobOutcome({}, 0, UNEXPECTED)
    status: RunStatus = "failed" if outcome.error else "done"
    with store.transaction() as tx:
        tx.finish_run(claimed, status, outcome.changed, outcome.requests, outcome.error)
        finished = tx.now
    if outcome.error:
        _log.warning("maintenance job %s failed: %s", job.name, outcome.error)
    elif any(outcome.changed.values()):
        _log.info("maintenance job %s: %s", job.name, outcome.changed)
    return MaintenanceRun(
        job.name,
        started_at,
        to_datetime(finished),
        status,
        dict(outcome.changed),
        outcome.requests,
        outcome.error,
        claimed,
    )
