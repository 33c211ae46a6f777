"""Scheduled maintenance: what is due runs, each run is recorded and readable (Python, GraphQL,
metrics, the CLI), a job another process runs is skipped, an abandoned run is closed, a failed
job records why and changes nothing — on the store ``--store`` names."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphmem import InvalidInput, KeyStore, Memory, Settings
from graphmem.cli import cli
from graphmem.maintenance import LEASE_S, UNEXPECTED, check_every, interval
from resolvers.app import create_app

from ..support.clock import Clock
from ..support.graphql_clients import InProcess, bearer
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process
from ..support.openai_stub import OpenAIStub


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # prune alone by default here; the daily classify job is tested in test_auto_classify.py
    return settings.model_copy(update={"classify_interval": 0})


def test_the_default_schedule_prunes_hourly_and_classifies_daily() -> None:
    defaults = Settings()
    assert [
        (job, interval(defaults, job)) for job in ("prune", "classify", "reflect", "consolidate")
    ] == [("prune", 3600), ("classify", 86_400), ("reflect", 0), ("consolidate", 0)]


@pytest.mark.in_process("runs on the default periods, which the client's service turns off")
def test_a_job_runs_when_its_period_has_passed_and_each_run_is_recorded(
    mem: Memory, clock: Clock
) -> None:
    gone = mem.store("a note for this session", decay_class="session").fact
    assert gone is not None
    clock.advance(2 * 86_400)  # the session fact has expired
    [run] = mem.maintain()  # prune's period (an hour) has never passed: due; the others are off
    assert (run.job, run.status, run.requests, run.error) == ("prune", "done", 0, None)
    assert run.changed["expired"] == 1 and mem.get(gone.id) is None
    assert run.started_at.timestamp() == clock.now and run.finished_at is not None
    assert mem.maintain() == []  # not due again yet
    clock.advance(3_599)
    assert mem.maintain() == []
    clock.advance(1)
    assert [r.job for r in mem.maintain()] == ["prune"]
    runs = mem.maintenance_runs()
    assert [r.job for r in runs] == ["prune", "prune"] and runs[0].id > runs[1].id
    assert runs[1] == run
    assert mem.last_runs() == {"prune": runs[0]}


@pytest.mark.in_process("changes Memory.settings")
def test_settings_turn_jobs_on_and_off_and_force_runs_any_job(mem: Memory, clock: Clock) -> None:
    mem.settings = mem.settings.model_copy(update={"prune_interval": 0, "consolidate_interval": 60})
    assert [r.job for r in mem.maintain()] == ["consolidate"]
    assert mem.maintain() == []
    assert [r.job for r in mem.maintain(["prune", "consolidate"], force=True)] == [
        "prune",
        "consolidate",
    ]  # in the order jobs run, whatever the order asked
    assert [r.job for r in mem.maintain("prune", force=True)] == ["prune"]
    assert check_every(mem.settings) == 60
    clock.advance(60)
    assert [r.job for r in mem.maintain(["prune", "consolidate"])] == ["consolidate"]
    with pytest.raises(InvalidInput) as refused:
        mem.maintain(["defragment"])
    assert refused.value.field == "jobs"
    with pytest.raises(InvalidInput) as refused:
        mem.maintain(["prune"] * 50_000)
    assert refused.value.field == "jobs"
    with pytest.raises(InvalidInput):
        mem.maintenance_runs(job="defragment")
    with pytest.raises(InvalidInput):
        mem.maintenance_runs(limit=0)


@pytest.mark.in_process("claims a run in the store")
def test_a_job_another_process_is_running_is_skipped_and_an_abandoned_run_is_closed(
    mem: Memory, clock: Clock
) -> None:
    with mem._store.transaction() as tx:  # another process's claim
        claimed = tx.claim_run("prune", LEASE_S)
    assert claimed is not None
    [skipped] = mem.maintain(["prune"], force=True)
    assert skipped.status == "skipped" and skipped.id == 0
    assert [r.status for r in mem.maintenance_runs()] == ["running"]  # the skip is not recorded
    clock.advance(LEASE_S + 1)  # the other process stopped without finishing
    [run] = mem.maintain(["prune"], force=True)
    assert run.status == "done"
    newest, abandoned = mem.maintenance_runs()
    assert newest == run
    assert abandoned.status == "failed" and "abandoned" in (abandoned.error or "")


def test_two_processes_never_run_one_job_at_once(
    settings: Settings, clock: Clock, stub: OpenAIStub
) -> None:
    chat = {"llm_base_url": stub.base_url, "llm_api_key": "test", "llm_max_retries": 0}
    settings = settings.model_copy(update=chat)
    with (
        Memory.open(settings.data_dir, settings=settings, clock=clock) as first,
        Memory.open(settings.data_dir, settings=settings, clock=clock) as second,
    ):
        first.store_many([{"text": "Ana asked for French"}, {"text": "Ana wants French"}])
        asked = threading.Event()
        release = threading.Event()

        def slow(body: object) -> str:
            asked.set()
            release.wait(10)
            return '{"patterns": []}'

        stub.reply_next(slow)
        runs: list[object] = []
        worker = threading.Thread(
            target=lambda: runs.extend(first.maintain(["reflect"], force=True))
        )
        worker.start()
        assert asked.wait(10)
        [skipped] = second.maintain(["reflect"], force=True)
        release.set()
        worker.join(10)
    assert skipped.status == "skipped"
    assert [r.status for r in runs] == ["done"]  # type: ignore[attr-defined]
    assert len(stub.chat_requests) == 1


@pytest.mark.in_process("changes Memory.settings")
def test_a_failed_job_records_why_changes_nothing_and_is_tried_at_its_next_period(
    mem: Memory, clock: Clock
) -> None:
    mem.settings = mem.settings.model_copy(update={"prune_interval": 0, "reflect_interval": 600})
    mem.store_many([{"text": "Ana asked for French"}, {"text": "Ana wants French"}])
    before = mem.stats().facts
    [run] = mem.maintain()  # no chat endpoint is set
    assert run.status == "failed" and "llm_base_url" in (run.error or "")
    assert mem.stats().facts == before
    assert mem.maintain() == []  # not before its next period
    clock.advance(600)
    assert [r.status for r in mem.maintain()] == ["failed"]


def test_an_unexpected_failure_is_recorded_masked_and_logged_whole(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise OSError("/srv/graphmem/secret-path is not writable")

    monkeypatch.setattr(Memory, "prune", broken)
    with caplog.at_level("ERROR", logger="graphmem.maintenance"):
        [run] = mem.maintain(["prune"], force=True)
    assert run.status == "failed" and run.error == UNEXPECTED  # any key may read the run
    assert [r.error for r in mem.maintenance_runs(job="prune")] == [UNEXPECTED]
    assert "secret-path" in caplog.text  # the operator still sees what happened


MAINTAIN = """mutation($jobs: [MaintenanceJob!], $force: Boolean) {
  maintain(jobs: $jobs, force: $force) {
    runs { job status changed { kind count } requests error startedAt finishedAt }
    error { code }
  }
}"""
RUNS = "query($job: MaintenanceJob) { maintenanceRuns(job: $job) { job status requests } }"


def test_graphql_runs_and_lists_maintenance(settings: Settings, clock: Clock) -> None:
    with InProcess(create_app(settings, clock=clock)) as service:
        at_start = service.data(RUNS)["maintenanceRuns"]
        assert at_start == [{"job": "prune", "status": "done", "requests": 0}]  # serve's start
        ran = service.data(MAINTAIN, {"jobs": ["PRUNE"], "force": True})["maintain"]
        assert ran["error"] is None
        [run] = ran["runs"]
        assert (run["job"], run["status"]) == ("prune", "done")
        assert {c["kind"] for c in run["changed"]} == {"expired", "decayed", "faded"}
        assert service.data(MAINTAIN)["maintain"]["runs"] == []  # nothing due
        assert len(service.data(RUNS, {"job": "PRUNE"})["maintenanceRuns"]) == 2
        assert service.data(RUNS, {"job": "REFLECT"})["maintenanceRuns"] == []
        metrics = service.request("GET", "/metrics").text
        assert (
            'graphmem_maintenance_last_run_timestamp_seconds{job="prune",namespace="default",status="done"}'
            in metrics
        )
        assert (
            'graphmem_maintenance_last_run_changed{job="prune",kind="expired",namespace="default"} 0.0'
            in metrics
        )


def test_a_read_only_key_may_read_the_runs_but_not_run_jobs(
    settings: Settings, keys: KeyStore
) -> None:
    token, _ = keys.create(["default"], read_only=True)
    with InProcess(create_app(settings)) as service:
        refused = service.data(MAINTAIN, {"force": True}, **bearer(token))["maintain"]
        assert refused["error"]["code"] == "FORBIDDEN" and refused["runs"] == []
        assert service.data(RUNS, None, **bearer(token))["maintenanceRuns"][0]["job"] == "prune"


def test_the_cli_runs_what_is_due_for_cron_and_lists_the_runs(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path), "--embedder", "hash"]
    first = runner.invoke(
        cli, [*base, "maintain", "--json"], env={"GRAPHMEM_CLASSIFY_INTERVAL": "0"}
    )
    assert first.exit_code == 0, first.output
    assert [r["job"] for r in json.loads(first.output)] == ["prune"]
    again = runner.invoke(cli, [*base, "maintain"], env={"GRAPHMEM_CLASSIFY_INTERVAL": "0"})
    assert again.output.strip() == "nothing due"
    listed = runner.invoke(cli, [*base, "maintain", "--list", "--json"])
    assert [r["status"] for r in json.loads(listed.output)] == ["done"]
    for text in ("Ana asked for French", "Ana wants French"):
        assert runner.invoke(cli, [*base, "store", text]).exit_code == 0
    failed = runner.invoke(cli, [*base, "maintain", "--job", "reflect", "--force"])  # no endpoint
    assert failed.exit_code == 1 and "reflect  failed" in failed.output
    assert runner.invoke(cli, [*base, "maintain", "--job", "nap"]).exit_code == 2


@pytest.mark.in_process("calls the MCP tools in process")
def test_the_mcp_tool_runs_and_lists_and_a_read_only_key_may_only_list(mem: Memory) -> None:
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_maintain")
    assert failed and data["error"]["code"] == "FORBIDDEN"
    failed, data = call_in_process(mem, None, "memory_maintain")
    assert not failed and [r["job"] for r in data["runs"]] == ["prune"]
    failed, data = call_in_process(mem, None, "memory_maintain", jobs=["consolidate"], force=True)
    assert not failed and [r["status"] for r in data["runs"]] == ["done"]
    failed, data = call_in_process(
        mem, READ_ONLY_KEY, "memory_maintain", list_runs=True, jobs=["prune"]
    )
    assert not failed and [r["job"] for r in data["runs"]] == ["prune"]
    failed, data = call_in_process(mem, None, "memory_maintain", jobs=["nap"])
    assert failed and data["error"]["code"] == "INVALID_INPUT"
