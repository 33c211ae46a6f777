"""Group commit: writes that arrive while another is being written share one transaction, and
each caller still gets exactly its own results and errors.

To make a group deterministic, a test holds the store's write lock while the writes queue: the
first write leads with a group of itself and waits for the lock; every write queued meanwhile is
written by the next leader as one group.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

from graphmem import Memory
from graphmem.errors import Conflict, InvalidInput, NotFound

from ..support.clock import Clock


class Held:
    """Writes submitted while the store's write lock is held, and the durable transactions
    begun (one per group commit)."""

    def __init__(self, mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
        self.mem = mem
        self.pool = ThreadPoolExecutor(16)
        self.transactions = 0
        store = mem._store
        begin = store.transaction

        def counted(**kwargs: Any) -> AbstractContextManager[Any]:
            self.transactions += kwargs.get("durable", True)  # not the outbox's bookkeeping
            return begin(**kwargs)

        monkeypatch.setattr(store, "transaction", counted)

    def queued(self) -> int:
        return len(self.mem._writer._group._waiting)

    @contextmanager
    def group(self) -> Iterator[Callable[..., Future[Any]]]:
        """Inside the block, ``submit(fn, *args)`` runs a write in a thread of its own; the
        first one submitted is written alone, the ones after it as one group when the block
        ends."""
        futures: list[Future[Any]] = []

        def submit(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
            future = self.pool.submit(fn, *args, **kwargs)
            futures.append(future)
            wanted = len(futures) - 1  # the first leads and is waiting for the lock
            _until(lambda: self.queued() == wanted or (not wanted and self.transactions > 0))
            return future

        lock = self.mem._store._db._write_lock  # type: ignore[attr-defined]
        with lock:
            before = self.transactions
            yield submit
            _until(lambda: self.queued() == len(futures) - 1)
        for future in futures:
            future.exception(timeout=30)
        self.groups = self.transactions - before


def _texts(mem: Memory) -> set[str]:
    return {f.text for _, f in mem.facts(first=500).items}


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the writes did not queue"
        time.sleep(0.005)


@pytest.fixture
def held(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    h = Held(mem, monkeypatch)
    yield h
    h.pool.shutdown(wait=True)


def test_queued_writes_share_one_transaction_and_each_gets_its_own_results(
    mem: Memory, held: Held
) -> None:
    texts = [f"Deploy window {i} is on Tuesday {i}" for i in range(6)]
    with held.group() as submit:
        first = submit(mem.store, "The release train leaves on Fridays")
        singles = [submit(mem.store, t) for t in texts[:4]]
        batch = submit(mem.store_many, [{"text": t} for t in texts[4:]])
    assert held.groups == 2  # the first write alone, then the five queued behind it together
    assert first.result().action == "ADD"
    for future, text in zip(singles, texts, strict=False):
        result = future.result()
        assert result.action == "ADD" and result.fact.text == text
    assert [r.fact.text for r in batch.result()] == texts[4:]
    stored = _texts(mem)
    assert set(texts) <= stored
    for text in texts:  # each is in the vector index once its write is answered
        assert mem.search(text, mode="vector", limit=1)[0].fact.text == text
    assert mem.check().ok


def test_a_write_that_fails_in_a_group_fails_alone(mem: Memory, held: Held) -> None:
    kept = mem.store("Ana lives in Lisbon").fact
    assert kept is not None
    with held.group() as submit:
        submit(mem.store, "Warm-up write that leads alone")
        good = submit(mem.store, "Bruno lives in Porto")
        unknown = submit(mem.store, "Carla lives in Braga", supersedes="no-such-fact")
        bad_batch = submit(
            mem.store_many, [{"text": "Dora lives in Faro"}, {"text": "Eva", "supersedes": "x"}]
        )
        forget_unknown = submit(mem.forget, "no-such-fact")
        bad_link = submit(mem.link, kept.id, "no-such-fact", "RELATED_TO")
        bad_links = submit(mem.link_many, [{"source_id": kept.id}])
        also_good = submit(mem.forget, kept.id)
    assert held.groups == 2
    assert good.result().action == "ADD"
    for future in (unknown, bad_batch, forget_unknown, bad_link):
        assert isinstance(future.exception(), NotFound)
    assert isinstance(bad_links.exception(), InvalidInput)
    assert also_good.result().id == kept.id
    texts = _texts(mem)
    assert "Bruno lives in Porto" in texts
    assert not texts & {"Carla lives in Braga", "Dora lives in Faro", "Eva", "Ana lives in Lisbon"}
    assert mem.stats().links == 0
    assert mem.check().ok


def test_two_supersessions_of_one_key_in_a_group_keep_one_current_version(
    mem: Memory, held: Held, clock: Clock
) -> None:
    original = mem.store("Ivy's team is Payments", entity="Ivy", key="team", value="Payments")
    assert original.fact is not None
    clock.advance(60)
    with held.group() as submit:
        submit(mem.store, "Warm-up write that leads alone")
        by_key = [
            submit(mem.store, f"Ivy's team is {v}", entity="Ivy", key="team", value=v)
            for v in ("Search", "Growth")
        ]
        explicit = [
            submit(mem.store, f"Ivy moved to {v}", supersedes=original.fact.id)
            for v in ("Ads", "Infra")
        ]
    assert held.groups == 2
    assert [f.result().action for f in by_key] == ["UPDATE", "UPDATE"]
    current = mem.lookup("Ivy", key="team")
    assert [f.value for f in current] == ["Growth"]
    # The first explicit supersession finds the original already superseded by the key update.
    outcomes = [f.exception() for f in explicit]
    assert all(isinstance(e, Conflict) for e in outcomes)
    history = mem.history(original.fact.id)
    assert len([f for f in history if f.superseded_by is None and f.retracted_at is None]) == 1


def test_duplicates_and_similar_facts_across_writes_of_a_group_are_found(
    mem: Memory, held: Held
) -> None:
    with held.group() as submit:
        submit(mem.store, "Warm-up write that leads alone")
        a = submit(mem.store, "The build server is ci-01")
        b = submit(mem.store, "The build server is CI 01!")  # the same vector (hash embedder)
        c = submit(mem.store, "The build server is ci-01")  # the same text
    assert held.groups == 2
    assert a.result().action == b.result().action == "ADD"
    assert c.result().action == "NOOP" and c.result().fact.id == a.result().fact.id
    assert mem.stats().vectors == 2  # the warm-up's and the build server's, shared
    found = {h.fact.id for h in mem.search("build server", mode="vector")}
    assert {a.result().fact.id, b.result().fact.id} <= found
    assert mem.check().ok


def test_a_write_whose_texts_cannot_be_embedded_fails_alone(
    mem: Memory, held: Held, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = mem._writer._cache.embedder
    embed = embedder.embed

    def failing(texts: list[str]) -> Any:
        if any("poison" in t for t in texts):
            raise RuntimeError("the embedder refused this text")
        return embed(texts)

    monkeypatch.setattr(embedder, "embed", failing)
    with held.group() as submit:
        submit(mem.store, "Warm-up write that leads alone")
        good = submit(mem.store, "Finn plays the cello")
        poisoned = submit(mem.store, "a poison text")
    assert held.groups == 2
    assert good.result().action == "ADD"
    assert "refused" in str(poisoned.exception())
    assert "a poison text" not in _texts(mem)


def test_concurrent_writers_are_answered_with_their_own_facts(mem: Memory) -> None:
    def write(worker: int) -> list[tuple[str, str]]:
        out = []
        for i in range(25):
            text = f"worker {worker} note {i} about topic {worker * 100 + i}"
            result = mem.store(text)
            assert result.fact is not None
            out.append((result.fact.id, text))
        return out

    with ThreadPoolExecutor(8) as pool:
        answers = [pair for chunk in pool.map(write, range(8)) for pair in chunk]
    facts = mem.get_many([i for i, _ in answers])
    assert len(facts) == 200
    assert all(facts[i].text == text for i, text in answers)
    assert mem.check().ok


def test_a_listener_may_write_without_deadlocking(mem: Memory) -> None:
    done = threading.Event()

    def echo(changes: list[Any]) -> None:
        if any(c.kind == "FACT_STORED" for c in changes) and not done.is_set():
            done.set()
            mem.store("Written by a listener")

    mem.subscribe(echo)
    mem.store("The first write")
    assert "Written by a listener" in _texts(mem)


def test_a_write_that_waited_past_its_time_limit_to_lead_is_still_written(
    mem: Memory, held: Held
) -> None:
    """A write that queues behind a group being written leads the next group, on its own
    request's thread, once that group is done: the request's read time limit, spent while it
    waited, stops none of the next group's work (its embedding cache reads among them)."""

    def limited(text: str) -> Any:
        with mem.time_limit(seconds=0.3):
            return mem.store_many([{"text": text}, {"text": f"{text}, second part"}])

    with held.group() as submit:
        ahead = submit(mem.store, "The write being written when the others queue")
        waited = submit(limited, "The write that waited its turn")
        other = submit(mem.store, "Another write of the next group")
        time.sleep(0.6)  # the group ahead holds the lock past the waiting write's time limit
    assert ahead.result().action == "ADD"
    assert [r.action for r in waited.result()] == ["ADD", "ADD"]
    assert other.result().action == "ADD"
    assert "The write that waited its turn, second part" in _texts(mem)
