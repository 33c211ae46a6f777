"""Scheduled maintenance: what is due runs, each run is recorded and readable (Python, GraphQL,
metrics, the CLI), a job another process runs is skipped, an abandoned run is closed, a failed
job records why and changes nothing — on the store ``--store`` names; a job registered once is
offered by every surface."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphmem.server.http.app import create_app

from graphmem import InvalidInput, KeyStore, Memory, Settings
from graphmem.cli import cli
from graphmem.maintenance import LEASE_S, REGISTRY, UNEXPECTED, check_every, interval

from ..support.clock import Clock
from ..support.graphql_clients import InProcess, bearer
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process
from ..support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.engines, pytest.mark.client_api]


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


def test_every_job_has_a_period_setting_of_its_own() -> None:
    settings = [job.interval_setting for job in REGISTRY.values()]
    assert len(set(settings)) == len(settings)
    assert all(Settings.model_fields[name].metadata for name in settings)  # bounded (0 or more)
    assert all(name == f"{job}_interval" for job, name in zip(REGISTRY, settings, strict=True))


def test_a_finished_run_reports_each_kind_of_change_its_job_declares(mem: Memory) -> None:
    runs = [run for run in mem.maintain(force=True) if run.status == "done"]
    assert {run.job for run in runs} >= {"prune", "consolidate"}
    for run in runs:
        assert sorted(run.changed) == sorted(REGISTRY[run.job].changes)


#: Registers a job before the surfaces are imported, then reads each of them (run in a process
#: of its own: the GraphQL schema, the MCP tools and the CLI are built once, at import).
REGISTERED = """
import json, sys
from click.testing import CliRunner
from graphmem import Memory, Settings, maintenance

def vacuum(memory):
    return maintenance.JobOutcome({"swept": 1})

# Its period would be a setting of its own; reflect's is off by default, as this job should be.
maintenance.REGISTRY["vacuum"] = maintenance.Job(
    "vacuum", "sweeps the namespace", "reflect_interval", "local", ("swept",), vacuum
)

from graphmem.cli import cli
from graphmem.server import create_app, schema_sdl
from graphmem.server.mcp.tools import BY_NAME
from tests.project.test_docs import render_maintenance_jobs
from tests.support.graphql_clients import InProcess
from tests.support.mcp_clients import call_in_process

data_dir = sys.argv[1]
settings = Settings(embedder="hash", data_dir=data_dir, prune_interval=0, classify_interval=0)
out = {}
with Memory.open(data_dir, settings=settings) as mem:
    out["memory"] = [(r.job, r.status, r.changed) for r in mem.maintain(["vacuum"], force=True)]
    failed, data = call_in_process(mem, None, "memory_maintain", jobs=["vacuum"], force=True)
    out["mcp"] = [r["job"] for r in data["runs"]]
spec = BY_NAME["memory_maintain"].spec()
out["mcp_enum"] = spec.input_schema["properties"]["jobs"]["items"]["enum"]
out["mcp_description"] = spec.description
sdl = schema_sdl()
out["graphql_enum"] = sdl[sdl.index("enum MaintenanceJob"):].split("}")[0]
with InProcess(create_app(settings)) as service:
    ran = service.data(
        "mutation { maintain(jobs: [VACUUM], force: true) { runs { job status } } }"
    )
    out["graphql"] = [r["job"] for r in ran["maintain"]["runs"]]
    listed = service.data("{ maintenanceRuns(job: VACUUM) { job } }")["maintenanceRuns"]
    out["graphql_runs"] = [r["job"] for r in listed]
base = ["--data-dir", data_dir, "--embedder", "hash"]
cli_run = CliRunner().invoke(cli, [*base, "maintain", "--job", "vacuum", "--force", "--json"])
out["cli"] = [r["job"] for r in json.loads(cli_run.output)]
out["docs"] = render_maintenance_jobs()
print(json.dumps(out))
"""


def test_a_job_registered_once_is_offered_by_every_surface(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", REGISTERED, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["memory"] == [["vacuum", "done", {"swept": 1}]]
    assert out["mcp"] == ["vacuum"] and out["mcp_enum"][-1] == "vacuum"
    assert "prune, classify, reflect, consolidate, vacuum" in out["mcp_description"]
    assert '"""It sweeps the namespace."""\n  VACUUM' in out["graphql_enum"]
    assert out["graphql"] == ["vacuum"] and out["graphql_runs"] == ["vacuum"] * 3
    assert out["cli"] == ["vacuum"]
    assert (
        "| `vacuum` | sweeps the namespace | `swept` | `local` | `reflect_interval` |"
        in (out["docs"])
    )
