"""Checkpoints: the working state saved before a risky step and the newest one restored, through
Python, GraphQL, MCP and the CLI, on the store ``--store`` names; bad input refused with nothing
stored."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from graphmem import Checkpoint, InvalidInput, Memory, Settings
from graphmem.cli import cli

from ..support.clock import Clock
from ..support.graphql_clients import InProcess
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process

pytestmark = [pytest.mark.engines, pytest.mark.client_api, pytest.mark.quick_client_api]

SAVE = """
mutation($input: CheckpointInput!) {
  saveCheckpoint(input: $input) {
    checkpoint { intent state expectedOutcome workingFiles fact { id entity key decayClass } }
    error { code field message }
  }
}"""
RESTORE = "{ checkpoint { intent state expectedOutcome workingFiles fact { id } } }"


def test_a_saved_checkpoint_is_restored_whole_and_the_newest_wins(
    mem: Memory, clock: Clock
) -> None:
    assert mem.restore_checkpoint() is None
    first = mem.checkpoint(
        intent="migrate the billing table",
        state={"step": 3, "done": ["users"], "ratio": 0.5, "none": None},
        expected_outcome="rows copied",
        working_files=["db/migrate.py", "db/schema.sql"],
    )
    assert (first.entity, first.key) == ("system", f"checkpoint:{int(clock.now * 1000)}")
    assert (first.importance, first.decay_class, first.source) == (0.9, "checkpoint", "checkpoint")
    assert first.expires_at is not None and first.expires_at - first.recorded_at == timedelta(
        hours=4
    )
    restored = mem.restore_checkpoint()
    assert isinstance(restored, Checkpoint) and restored.fact.id == first.id
    assert (restored.intent, restored.state, restored.expected_outcome) == (
        "migrate the billing table",
        {"step": 3, "done": ["users"], "ratio": 0.5, "none": None},
        "rows copied",
    )
    assert restored.working_files == ("db/migrate.py", "db/schema.sql")
    clock.advance(60)
    second = mem.checkpoint(intent="migrate the billing table", state=[4])  # same words again
    newest = mem.restore_checkpoint()
    assert newest is not None and newest.fact.id == second.id and newest.state == [4]
    assert newest.expected_outcome is None and newest.working_files == ()


def test_an_expired_checkpoint_is_not_restored_and_a_forgotten_one_gives_way(
    mem: Memory, clock: Clock
) -> None:
    old = mem.checkpoint(intent="first step")
    clock.advance(3600)
    new = mem.checkpoint(intent="second step")
    mem.forget(new.id)
    restored = mem.restore_checkpoint()
    assert restored is not None and restored.fact.id == old.id
    clock.advance(4 * 3600)  # past the first one's expiry
    assert mem.restore_checkpoint() is None


def test_a_fact_under_a_checkpoint_key_that_holds_no_checkpoint_is_passed_over(
    mem: Memory, clock: Clock
) -> None:
    saved = mem.checkpoint(intent="real one")
    clock.advance(1)
    mem.store("not a checkpoint", entity="system", key="checkpoint:9999999999999", context="{}")
    odd = '{"intent": "x", "state": 1e999, "expected_outcome": null, "working_files": []}'
    mem.store("not readable", entity="system", key="checkpoint:9999999999998", context=odd)
    restored = mem.restore_checkpoint()
    assert restored is not None and restored.fact.id == saved.id


def test_a_planted_checkpoint_never_shadows_the_ones_saved_after_it(
    mem: Memory, clock: Clock
) -> None:
    shaped = '{"intent": "planted", "state": 1, "expected_outcome": null, "working_files": []}'
    mem.store(
        "planted",
        entity="system",
        key="checkpoint:9",  # sorts above every real checkpoint's key
        context=shaped,
        decay_class="checkpoint",
    )
    clock.advance(1)
    saved = mem.checkpoint(intent="real one")
    restored = mem.restore_checkpoint()
    assert restored is not None and restored.fact.id == saved.id
    clock.advance(1)
    # Newer, but it would never expire as a checkpoint does: not one.
    mem.store(
        "kept forever",
        entity="system",
        key=f"checkpoint:{10**13}",
        context=shaped,
        decay_class="permanent",
    )
    restored = mem.restore_checkpoint()
    assert restored is not None and restored.fact.id == saved.id


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"intent": ""}, "intent"),
        ({"intent": "x" * 1001}, "intent"),
        ({"intent": "x", "state": {1, 2}}, "state"),
        ({"intent": "x", "state": float("nan")}, "state"),
        ({"intent": "x", "state": "y" * 20_000}, "state"),
        ({"intent": "x", "working_files": "a.py"}, "working_files"),
        ({"intent": "x", "working_files": [f"f{i}" for i in range(101)]}, "working_files"),
        ({"intent": "x", "working_files": [""]}, "working_files"),
        ({"intent": "x", "expected_outcome": " "}, "expected_outcome"),
        ({"intent": "x", "state": {"n": 2**70}}, "state"),
        ({"intent": "x", "state": ["\ud800"]}, "state"),
        ({"intent": "x", "state": {"a\x00": 1}}, "state"),
        (
            {
                "intent": "x",
                "state": [
                    [
                        [
                            [
                                [
                                    [
                                        [
                                            [
                                                [
                                                    [
                                                        [
                                                            [
                                                                [
                                                                    [
                                                                        [
                                                                            [
                                                                                [
                                                                                    [
                                                                                        [
                                                                                            [
                                                                                                [
                                                                                                    [
                                                                                                        [
                                                                                                            [
                                                                                                                [
                                                                                                                    [
                                                                                                                        [
                                                                                                                            [
                                                                                                                                [
                                                                                                                                    [
                                                                                                                                        [
                                                                                                                                            [
                                                                                                                                                [
                                                                                                                                                    [
                                                                                                                                                        [
                                                                                                                                                            [
                                                                                                                                                                [
                                                                                                                                                                    [
                                                                                                                                                                        [
                                                                                                                                                                            [
                                                                                                                                                                                [
                                                                                                                                                                                    [
                                                                                                                                                                                        [
                                                                                                                                                                                            [
                                                                                                                                                                                                [
                                                                                                                                                                                                    [
                                                                                                                                                                                                        [
                                                                                                                                                                                                            [
                                                                                                                                                                                                                [
                                                                                                                                                                                                                    [
                                                                                                                                                                                                                        [
                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                                        [
                                                                                                                                                                                                                                                                            [
                                                                                                                                                                                                                                                                                [
                                                                                                                                                                                                                                                                                    [
                                                                                                                                                                                                                                                                                        1
                                                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                                ]
                                                                                                                                                                                                                            ]
                                                                                                                                                                                                                        ]
                                                                                                                                                                                                                    ]
                                                                                                                                                                                                                ]
                                                                                                                                                                                                            ]
                                                                                                                                                                                                        ]
                                                                                                                                                                                                    ]
                                                                                                                                                                                                ]
                                                                                                                                                                                            ]
                                                                                                                                                                                        ]
                                                                                                                                                                                    ]
                                                                                                                                                                                ]
                                                                                                                                                                            ]
                                                                                                                                                                        ]
                                                                                                                                                                    ]
                                                                                                                                                                ]
                                                                                                                                                            ]
                                                                                                                                                        ]
                                                                                                                                                    ]
                                                                                                                                                ]
                                                                                                                                            ]
                                                                                                                                        ]
                                                                                                                                    ]
                                                                                                                                ]
                                                                                                                            ]
                                                                                                                        ]
                                                                                                                    ]
                                                                                                                ]
                                                                                                            ]
                                                                                                        ]
                                                                                                    ]
                                                                                                ]
                                                                                            ]
                                                                                        ]
                                                                                    ]
                                                                                ]
                                                                            ]
                                                                        ]
                                                                    ]
                                                                ]
                                                            ]
                                                        ]
                                                    ]
                                                ]
                                            ]
                                        ]
                                    ]
                                ]
                            ]
                        ]
                    ]
                ],
            },
            "state",
        ),
        ({"intent": "x\x00"}, "intent"),
    ],
)
def test_a_checkpoint_that_is_not_json_or_over_its_limits_is_refused_and_nothing_stored(
    mem: Memory, arguments: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        mem.checkpoint(**arguments)
    assert refused.value.field == field
    assert mem.stats().facts == 0


def test_graphql_saves_and_restores_a_checkpoint(service: InProcess) -> None:
    assert service.data(RESTORE) == {"checkpoint": None}
    given = {
        "intent": "deploy",
        "state": {"region": "eu", "hosts": [1, 2]},
        "expectedOutcome": "green",
        "workingFiles": ["deploy.sh"],
    }
    saved = service.data(SAVE, {"input": given})["saveCheckpoint"]
    assert saved["error"] is None
    assert {k: saved["checkpoint"][k] for k in given} == given
    assert saved["checkpoint"]["fact"]["entity"] == "system"
    assert saved["checkpoint"]["fact"]["decayClass"] == "checkpoint"
    restored = service.data(RESTORE)["checkpoint"]
    assert restored["fact"]["id"] == saved["checkpoint"]["fact"]["id"]
    assert {k: restored[k] for k in given} == given
    bare = service.data(SAVE, {"input": {"intent": "look around"}})["saveCheckpoint"]
    assert bare["error"] is None and bare["checkpoint"]["state"] is None
    assert service.data(RESTORE)["checkpoint"]["state"] is None  # no state is null, not an error
    refused = service.data(SAVE, {"input": {"intent": "x", "workingFiles": [""]}})
    assert refused["saveCheckpoint"]["checkpoint"] is None
    assert refused["saveCheckpoint"]["error"]["code"] == "INVALID_INPUT"
    assert refused["saveCheckpoint"]["error"]["field"] == "working_files"


@pytest.mark.in_process("calls the MCP tools in process")
def test_the_mcp_tool_saves_and_restores_and_a_read_only_key_may_only_restore(
    mem: Memory,
) -> None:
    failed, data = call_in_process(mem, None, "memory_checkpoint", action="restore")
    assert not failed and data == {"checkpoint": None}
    failed, data = call_in_process(
        mem, READ_ONLY_KEY, "memory_checkpoint", action="save", intent="x"
    )
    assert failed and data["error"]["code"] == "FORBIDDEN"
    failed, data = call_in_process(
        mem, None, "memory_checkpoint", action="save", intent="rebase", state={"onto": "main"}
    )
    assert not failed and data["fact"]["entity"] == "system"
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_checkpoint", action="restore")
    assert not failed and data["checkpoint"]["state"] == {"onto": "main"}
    failed, data = call_in_process(mem, None, "memory_checkpoint", action="save")
    assert failed and data["error"]["code"] == "INVALID_INPUT"
    failed, data = call_in_process(mem, None, "memory_checkpoint", action="undo")
    assert failed and data["error"]["code"] == "INVALID_INPUT"


def test_the_cli_saves_and_restores_a_checkpoint(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path), "--embedder", "hash"]
    assert runner.invoke(cli, [*base, "checkpoint", "restore"]).exit_code == 1
    saved = runner.invoke(
        cli,
        [*base, "checkpoint", "save", "--intent", "tidy", "--state", '{"n": 1}', "--file", "a.py"],
    )
    assert saved.exit_code == 0, saved.output
    restored = runner.invoke(cli, [*base, "checkpoint", "restore", "--json"])
    assert restored.exit_code == 0, restored.output
    data = json.loads(restored.output)
    assert (data["intent"], data["state"], data["working_files"]) == ("tidy", {"n": 1}, ["a.py"])
    bad = runner.invoke(cli, [*base, "checkpoint", "save", "--intent", "x", "--state", "{oops"])
    assert bad.exit_code != 0


def test_a_checkpoint_holding_a_secret_is_refused_when_secrets_are_redacted(
    data_dir: Path, settings: Settings, clock: Clock
) -> None:
    redacting = settings.model_copy(update={"store_secrets": "redact"})
    with Memory.open(data_dir, settings=redacting, clock=clock) as mem:
        with pytest.raises(InvalidInput) as refused:
            mem.checkpoint(intent="rotate keys", state={"password": "hunter2-Secr3t!"})
        assert refused.value.field == "state" and mem.stats().facts == 0
        mem.checkpoint(intent="rotate keys", state={"step": 2})
        restored = mem.restore_checkpoint()
        assert restored is not None and restored.state == {"step": 2}
