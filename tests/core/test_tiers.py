"""Tiers: pinned facts lead every recall block whatever the prompt, within its budget, and say
so; a pin follows its fact's new version, is read as memory knew it at a past known_at, leaves
with a purge and comes back from an export. Cold facts stay out of recall unless asked, search
still finds them. Through Python, GraphQL, MCP and the CLI, on the store ``--store`` names."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphmem import Conflict, InvalidInput, Memory, NotFound, Settings
from graphmem.cli import cli

from ..support.clock import Clock
from ..support.graphql_clients import InProcess
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process

pytestmark = [pytest.mark.engines, pytest.mark.client_api]


def test_a_pinned_fact_leads_every_recall_block_whatever_the_prompt(mem: Memory) -> None:
    rule = mem.store(
        "Deploys are frozen on Fridays", entity="team", key="deploy-rule", value="fridays"
    ).fact
    mem.store("Alice lives in Lisbon")
    assert rule is not None
    before = mem.recall("where does Alice live?")
    assert [i.fact.text for i in before.items] == ["Alice lives in Lisbon"]
    pinned = mem.pin(rule.id)
    assert pinned.pinned_at is not None and mem.get(rule.id).pinned_at == pinned.pinned_at  # type: ignore[union-attr]
    after = mem.recall("where does Alice live?")
    assert [(i.fact.text, i.source) for i in after.items] == [
        ("Deploys are frozen on Fridays", "pinned"),
        ("Alice lives in Lisbon", "keyword"),
    ]
    assert "[pinned/fact] Deploys are frozen on Fridays" in after.context
    assert "pinned fact: Deploys" in mem.recall("x", format="short").context
    assert "pinned: Deploys" in mem.recall("unrelated words", format="minimal").context
    unpinned = mem.unpin(rule.id)
    assert unpinned.pinned_at is None
    assert mem.recall("where does Alice live?").items[0].source == "keyword"
    assert mem.unpin(rule.id).pinned_at is None  # unpinning twice changes nothing


def test_pinned_facts_fit_the_budget_earliest_pinned_first(mem: Memory, clock: Clock) -> None:
    ids = []
    for i in range(5):
        fact = mem.store(f"Standing instruction number {i} " + "words " * 20).fact
        assert fact is not None
        ids.append(fact.id)
    for fact_id in reversed(ids):
        clock.advance(1)
        mem.pin(fact_id)
    block = mem.recall("anything", max_tokens=80)
    shown = [i.fact.id for i in block.items]
    assert shown == list(reversed(ids))[: len(shown)] and 0 < len(shown) < 5
    assert block.omitted == 5 - len(shown) and block.tokens <= 80


def test_a_new_version_of_a_pinned_fact_stays_pinned_and_history_shows_the_pin(
    mem: Memory,
) -> None:
    old = mem.store(
        "Deploys are frozen on Fridays", entity="team", key="deploy-rule", value="fridays"
    ).fact
    assert old is not None
    mem.pin(old.id)
    new = mem.store(
        "Deploys are frozen on Fridays and weekends",
        entity="team",
        key="deploy-rule",
        value="weekends",
    ).fact
    assert new is not None and new.supersedes_id == old.id and new.pinned_at is not None
    assert mem.get(new.id).pinned_at == new.pinned_at  # type: ignore[union-attr]
    block = mem.recall("what about Alice?")
    assert [i.fact.id for i in block.items if i.source == "pinned"] == [new.id]
    assert [f.pinned_at is not None for f in mem.history(new.id)] == [True, True]
    explicit = mem.store("Deploys are frozen all week", supersedes=new.id).fact
    assert explicit is not None and explicit.pinned_at == new.pinned_at
    assert [i.fact.id for i in mem.recall("lunch").items if i.source == "pinned"] == [explicit.id]


def test_a_pin_is_read_as_memory_knew_it(mem: Memory, clock: Clock) -> None:
    fact = mem.store("Always answer in French").fact
    assert fact is not None
    before = clock.now
    clock.advance(60)
    mem.pin(fact.id)
    assert mem.get(fact.id, known_at=before).pinned_at is None  # type: ignore[union-attr]
    assert all(i.source != "pinned" for i in mem.recall("hello", known_at=before).items)
    assert mem.recall("hello").items[0].source == "pinned"


def test_pinning_an_unknown_forgotten_or_replaced_fact_is_refused(mem: Memory) -> None:
    with pytest.raises(NotFound):
        mem.pin("01a00000-0000-7000-8000-000000000000")
    gone = mem.store("temporary").fact
    old = mem.store("v1", entity="team", key="deploy-rule", value="1").fact
    assert gone is not None and old is not None
    mem.forget(gone.id)
    mem.store("v2", entity="team", key="deploy-rule", value="2")
    for fact_id in (gone.id, old.id):
        with pytest.raises(Conflict):
            mem.pin(fact_id)


@pytest.mark.in_process("reads the store's pins and exports")
def test_a_purged_pin_is_gone_and_an_export_keeps_pins(
    mem: Memory, data_dir: Path, settings: Settings, clock: Clock
) -> None:
    kept = mem.store("Use pnpm, not npm").fact
    erased = mem.store("My card number is on file").fact
    assert kept is not None and erased is not None
    mem.pin(kept.id)
    mem.pin(erased.id)
    mem.purge(erased.id)
    assert [f.id for f in mem._store.pinned(mem._scope(None, None), limit=10)] == [kept.id]
    out = io.StringIO()
    mem.export_jsonl(out)
    with Memory.open(data_dir, namespace="copy", settings=settings, clock=clock) as copy:
        copy.import_jsonl(out.getvalue().splitlines())
        assert copy.get(kept.id).pinned_at == mem.get(kept.id).pinned_at  # type: ignore[union-attr]
        assert copy.recall("something else").items[0].fact.id == kept.id


@pytest.mark.in_process("export_jsonl is not in the GraphQL API")
def test_an_export_names_tiers_only_where_set_and_an_import_refuses_both(mem: Memory) -> None:
    plain = mem.store("Plain fact").fact
    pinned = mem.store("Pinned fact").fact
    assert plain is not None and pinned is not None
    mem.pin(pinned.id)
    out = io.StringIO()
    mem.export_jsonl(out)
    facts = {
        f["id"]: f for f in map(json.loads, out.getvalue().splitlines()) if f["kind"] == "fact"
    }
    assert "pinned_at" not in facts[plain.id] and "cold_at" not in facts[plain.id]
    assert facts[pinned.id]["pinned_at"] is not None
    both = {**facts[pinned.id], "id": "01a00000-0000-7000-8000-00000000000b"}
    both["cold_at"] = both["pinned_at"]
    with pytest.raises(InvalidInput):
        mem.import_jsonl([out.getvalue().splitlines()[0], json.dumps(both)])


def test_graphql_pins_and_unpins_and_recall_says_which(service: InProcess) -> None:
    stored = service.data(
        'mutation { storeFact(input: {text: "Never push to main"}) { fact { id } } }'
    )
    fact_id = stored["storeFact"]["fact"]["id"]
    pin = "mutation($id: ID!) { pinFact(id: $id) { fact { id pinnedAt } error { code } } }"
    pinned = service.data(pin, {"id": fact_id})["pinFact"]
    assert pinned["error"] is None and pinned["fact"]["pinnedAt"] is not None
    recall = service.data('{ recall(prompt: "lunch plans") { items { source fact { id } } } }')
    assert recall["recall"]["items"][0] == {"source": "PINNED", "fact": {"id": fact_id}}
    unpin = "mutation($id: ID!) { unpinFact(id: $id) { fact { pinnedAt } error { code } } }"
    assert service.data(unpin, {"id": fact_id})["unpinFact"]["fact"] == {"pinnedAt": None}
    unknown = service.data(pin, {"id": "nope"})["pinFact"]
    assert unknown == {"fact": None, "error": {"code": "NOT_FOUND"}}
    chill = "mutation($id: ID!) { setCold(id: $id) { fact { coldAt pinnedAt } error { code } } }"
    assert service.data(chill, {"id": fact_id})["setCold"]["fact"]["coldAt"] is not None
    left = '{ recall(prompt: "never push") { items { fact { id } } } }'
    assert service.data(left)["recall"]["items"] == []
    asked = '{ recall(prompt: "never push", includeCold: true) { items { fact { id } } } }'
    assert service.data(asked)["recall"]["items"] == [{"fact": {"id": fact_id}}]


@pytest.mark.in_process("calls the MCP tools in process")
def test_the_mcp_tool_sets_a_tier_and_a_read_only_key_may_not(mem: Memory) -> None:
    fact = mem.store("Reply in English").fact
    assert fact is not None
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_tier", id=fact.id, tier="pinned")
    assert failed and data["error"]["code"] == "FORBIDDEN"
    failed, data = call_in_process(mem, None, "memory_tier", id=fact.id, tier="pinned")
    assert not failed and data["fact"]["pinned_at"] is not None
    failed, data = call_in_process(mem, None, "memory_tier", id=fact.id, tier="cold")
    assert not failed and data["fact"]["pinned_at"] is None and data["fact"]["cold_at"]
    failed, data = call_in_process(mem, None, "memory_tier", id=fact.id, tier="normal")
    assert not failed and (data["fact"]["pinned_at"], data["fact"]["cold_at"]) == (None, None)
    failed, data = call_in_process(mem, None, "memory_tier", id="unknown", tier="cold")
    assert failed and data["error"]["code"] == "NOT_FOUND"
    failed, data = call_in_process(mem, None, "memory_tier", id=fact.id, tier="frozen")
    assert failed and data["error"]["code"] == "INVALID_INPUT"


def test_a_cold_fact_stays_out_of_recall_unless_asked_and_search_still_finds_it(
    mem: Memory,
) -> None:
    task = mem.store("Task: migrate Alice's invoices to the new ledger", entity="alice").fact
    mem.store("Alice lives in Lisbon", entity="alice")
    assert task is not None
    assert task.id in [i.fact.id for i in mem.recall("what about Alice?").items]
    cold = mem.set_cold(task.id)
    assert cold.cold_at is not None and cold.pinned_at is None
    assert task.id not in [i.fact.id for i in mem.recall("what about Alice?").items]
    assert task.id in [i.fact.id for i in mem.recall("what about Alice?", include_cold=True).items]
    assert task.id in [h.fact.id for h in mem.search("migrate invoices ledger")]
    assert mem.set_cold(task.id, False).cold_at is None
    assert task.id in [i.fact.id for i in mem.recall("what about Alice?").items]


def test_a_cold_hit_does_not_set_the_bar_for_the_facts_recall_keeps(mem: Memory) -> None:
    closed = mem.store("Lisbon flat lease renewal signed for the Lisbon flat").fact
    weak = mem.store("Alice mentioned a lease once").fact
    mem.store("The weather was sunny")
    assert closed is not None and weak is not None
    prompt = "Lisbon flat lease renewal"
    assert [i.fact.id for i in mem.recall(prompt).items] == [closed.id]  # weak is under the bar
    mem.set_cold(closed.id)
    assert [i.fact.id for i in mem.recall(prompt).items] == [weak.id]


@pytest.mark.in_process("calls the MCP tools in process")
def test_memory_context_leaves_cold_facts_out_unless_asked(mem: Memory) -> None:
    fact = mem.store("Task: renew the TLS certificate").fact
    assert fact is not None
    mem.set_cold(fact.id)

    _, left = call_in_process(mem, None, "memory_context", prompt="TLS certificate")
    _, asked = call_in_process(
        mem, None, "memory_context", prompt="TLS certificate", include_cold=True
    )
    assert fact.id not in json.dumps(left)
    assert [i["fact"]["id"] for i in asked["items"]] == [fact.id]


def test_unpinning_a_cold_fact_and_warming_a_pinned_one_change_nothing(mem: Memory) -> None:
    fact = mem.store("Keep the changelog up to date").fact
    assert fact is not None
    mem.set_cold(fact.id)
    assert mem.unpin(fact.id).cold_at is not None
    mem.pin(fact.id)
    assert mem.set_cold(fact.id, False).pinned_at is not None


def test_pinned_and_cold_exclude_each_other_and_a_new_version_is_not_cold(mem: Memory) -> None:
    old = mem.store("The release is blocked", entity="release", key="state", value="blocked").fact
    assert old is not None
    assert mem.pin(old.id).pinned_at is not None
    made_cold = mem.set_cold(old.id)
    assert made_cold.pinned_at is None and made_cold.cold_at is not None
    assert mem.pin(old.id).cold_at is None
    mem.set_cold(old.id)
    new = mem.store("The release is unblocked", entity="release", key="state", value="ok").fact
    assert new is not None and new.supersedes_id == old.id and new.cold_at is None
    assert mem.unpin(new.id).cold_at is None  # unpinning what is not pinned changes nothing


def test_facts_untouched_for_cold_after_days_are_cold_unless_pinned(
    data_dir: Path, settings: Settings, clock: Clock
) -> None:
    chilly = settings.model_copy(update={"cold_after_days": 30})
    with Memory.open(data_dir, settings=chilly, clock=clock) as mem:
        stale = mem.store("Alice used to cycle to work").fact
        kept = mem.store("Alice prefers the train").fact
        assert stale is not None and kept is not None
        mem.pin(kept.id)
        clock.advance(31 * 86_400)
        recalled = [i.fact.id for i in mem.recall("Alice work commute").items]
        assert kept.id in recalled and stale.id not in recalled
        assert stale.id in [i.fact.id for i in mem.recall("Alice work", include_cold=True).items]
        fresh = mem.store("Alice now cycles again").fact
        assert fresh is not None and fresh.id in [
            i.fact.id for i in mem.recall("Alice cycles").items
        ]


def test_the_cli_pins_and_unpins(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path), "--embedder", "hash"]
    stored = runner.invoke(cli, [*base, "store", "Keep answers short", "--json"])
    assert stored.exit_code == 0, stored.output
    fact_id = json.loads(stored.output)["fact"]["id"]
    pinned = runner.invoke(cli, [*base, "pin", fact_id, "--json"])
    assert pinned.exit_code == 0 and json.loads(pinned.output)["pinned_at"] is not None
    unpinned = runner.invoke(cli, [*base, "pin", fact_id, "--off", "--json"])
    assert unpinned.exit_code == 0 and json.loads(unpinned.output)["pinned_at"] is None
    assert runner.invoke(cli, [*base, "pin", "unknown"]).exit_code != 0
    made_cold = runner.invoke(cli, [*base, "cold", fact_id, "--json"])
    assert made_cold.exit_code == 0 and json.loads(made_cold.output)["cold_at"] is not None
    left_out = runner.invoke(cli, [*base, "recall", "answers", "--json"])
    assert left_out.exit_code == 0 and fact_id not in left_out.output
    asked = runner.invoke(cli, [*base, "recall", "answers", "--include-cold", "--json"])
    assert asked.exit_code == 0 and fact_id in asked.output
