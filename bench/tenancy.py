"""One tenant against another: how long another namespace's trivial query waits, and how much
memory the server takes, while one key (or a client with no key) attacks it.

Two runs, each on a real ``graphmem serve`` (hash embedder, a free port) over a data directory
holding 60 facts with every pair linked (1,770 links) in one namespace and one fact in
``other``, with API keys for each:

1. ``python -m bench.tenancy [--seconds 30] [--revocations 20]`` (``rate_limit_per_minute`` 0,
   so that the loop is never turned away):

   a. The nested-links bomb, ``fact { links(first: 1000) { edges { neighbour { links(...``
      three deep under 30 aliases: the answer's status, code and time.
   b. The heaviest accepted document: the same nesting with ``first: 78`` once (cost 480,714 of
      the 500,000 budget; about 216,000 items here): its time and size; then posted in a loop
      for ``--seconds`` while another client asks ``{ namespace }`` of ``other`` every 20 ms,
      and the same trivial query alone before, for comparison.
   c. Revocation: ``--revocations`` times, a key opens a graphql-transport-ws socket, is revoked
      (``KeyStore.revoke``, as ``graphmem revoke-key`` does) at a random moment, and the
      socket's close code and the delay until it closed are noted.

2. ``python -m bench.tenancy --attack NAME[,NAME...]|all|checks [--seconds 20]``: the attacks of
   docs/security.md's table (rows 26-39) and a control for row 7 (bench/tenancy_attacks.py; ``all`` runs every one),
   each against a fresh server with default settings over a copy of the data with 3,000 more
   facts (each linked to three others) in the attacked namespace. The server is bound to
   127.0.0.1 with keys, to 0.0.0.0 with keys (contacted at 127.0.0.1) for the rows without a
   key, or to 127.0.0.1 with every key revoked (``keyless``: the probe names ``other`` by header
   and shares the keyless callers' share with the attacker, so the p99 target does not apply).
   Per attack: the other tenant's ``{ namespace }`` every 20 ms alone for 5 s, then for
   ``--seconds`` while the attack runs in its own process (latency p50/p95/p99/max); the
   server's resident memory (VmRSS of /proc/<pid>/status every 100 ms: idle, peak during the
   attack and its growth, 3 s after), the CPU seconds it, the attacker and any other process
   used, its log's growth (tracebacks counted); what the attacker was answered. Each attack
   waits for idle cores first. For the chat rows, a hostile chat endpoint on 127.0.0.1
   (``tenancy_attacks.Hostile``); in ``slow-chat`` the other tenant also stores 2,000 facts
   every 4 s (timed). Then the short checks of rows 11-14.

Exit status 1 when an attack's probe p99 is over 100 ms (``keyless`` aside), the server died,
or anything answered INTERNAL_ERROR.

    python -m bench.tenancy [--seconds 30] [--revocations 20] [--attack NAME,...|all|checks]
                            [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from graphmem import KeyStore, Memory, Settings
from graphmem.storage.sqlite.keys import KeyFile

from .common import OUT_DIR, ROOT, machine, markdown_table, percentile, write_json
from .http import NAMESPACE, _free_port, _server, _wait_for_quiet, _wait_healthy, stop
from .tenancy_attacks import (
    ATTACKS,
    HEAVIEST,
    NESTED_LINKS,
    Attack,
    Hostile,
    Target,
    client_check,
    run,
)

FACTS: Final = 60
#: Facts added to the attacked namespace for the attack rows, each linked to three before it.
MORE_FACTS: Final = 3_000
TRIVIAL: Final = "{ namespace }"
TRIVIAL_EVERY_S: Final = 0.02
#: The other tenant's trivial query alone, before each attack.
ALONE_S: Final = 5.0
#: The bound another tenant's p99 is held to while an attack runs.
TARGET_P99_MS: Final = 100.0
SAMPLE_EVERY_S: Final = 0.1
#: Before each attack, other processes must use less than this many cores (waited for at
#: most IDLE_WAIT_S): the figures are of this bench alone.
IDLE_CORES: Final = 0.15
IDLE_LOOK_S: Final = 5.0
IDLE_WAIT_S: Final = 900.0
WRITE_BATCH: Final = 2_000
#: How often the other tenant stores WRITE_BATCH facts while attacked: an ordinary pace, not a
#: load of its own.
WRITE_EVERY_S: Final = 4.0
STORE_FACTS: Final = "mutation($i: [FactInput!]!) { storeFacts(inputs: $i) { error { code } } }"
#: Rows 11 and 12 are files on disk, not load: their regression tests hold them.
SEE_TESTS: Final = {
    11: "a synced note swapped for a hard link to another namespace's file: tests/core/"
    "test_documents.py::test_a_synced_note_swapped_for_a_hard_link_to_another_file_is_refused_for_a_reader",
    12: "modes under the data directory, LanceDB's included: tests/vectors/test_mirror.py::"
    "test_every_file_of_the_vector_index_is_its_owners_alone_whatever_the_umask",
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tenancy", description=__doc__.split("\n\n")[0].replace("\n", " ")
    )
    parser.add_argument("--seconds", type=float, default=None, help="30, or 20 with --attack")
    parser.add_argument("--revocations", type=int, default=20)
    parser.add_argument(
        "--attack",
        metavar="NAME[,NAME...]|all|checks",
        default=None,
        help="run the attacks of docs/security.md (rows 26-39) instead of the documents and revocations: the ones "
        f"named ({', '.join(ATTACKS)}), all of them and then the checks of rows 11-14, or only "
        "the checks",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    if args.attack is not None:
        names = {"all": list(ATTACKS), "checks": []}.get(args.attack, args.attack.split(","))
        if unknown := [n for n in names if n not in ATTACKS]:
            parser.error(f"no attack named {', '.join(unknown)}")
        seconds = 20.0 if args.seconds is None else args.seconds
        _wait_for_quiet()
        return _attack_rows(names, seconds, args.out, checks=args.attack in ("all", "checks"))
    _wait_for_quiet()
    return _documents(30.0 if args.seconds is None else args.seconds, args.revocations, args.out)


# ---------------------------------------------------------------- documents and revocations


def _documents(seconds: float, revocations: int, out_path: Path | None) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-tenancy-") as tmp:
        root = Path(tmp) / "data"
        fact_id = _fill(root)
        keys = KeyFile(root)
        mine, _ = keys.create([NAMESPACE])
        theirs, _ = keys.create(["other"])
        os.environ["GRAPHMEM_RATE_LIMIT_PER_MINUTE"] = "0"
        with _server(root, "hash", Path(tmp) / "server.log") as (url, _, _):
            attack = _timed(url, mine, NESTED_LINKS, fact_id)
            heaviest = _timed(url, mine, HEAVIEST, fact_id)
            alone = _probe(url, _bearer(theirs), min(5.0, seconds)).waits
            loaded, completed = _under_load(url, mine, theirs, fact_id, seconds)
            revoked = [_revocation(url, keys) for _ in range(revocations)]
    delays = [d for _, d in revoked]
    out: dict[str, Any] = {
        "benchmark": "tenancy",
        "attack": attack,
        "heaviest": heaviest,
        "trivial_alone_ms": _summary(alone),
        "trivial_under_load_ms": _summary(loaded),
        "heaviest_completed_in_loop": completed,
        "loop_seconds": seconds,
        "revocations": len(revoked),
        "revocation_close_codes": sorted({c for c, _ in revoked}, key=str),
        "revocation_delay_ms": _summary(delays),
        "machine": machine(),
    }
    print(
        markdown_table(
            ["document", "status", "code", "cost", "ms", "answer bytes"],
            [
                [name, d["status"], d["code"] or "", d["cost"] or "", f"{d['ms']:.0f}", d["bytes"]]
                for name, d in (("attack", attack), ("heaviest accepted", heaviest))
            ],
        )
    )
    print()
    print(
        markdown_table(
            ["another tenant's `{ namespace }`", "n", "p50 ms", "p95 ms", "p99 ms", "max ms"],
            [
                [name, s["n"], *(f"{s[k]:.1f}" for k in ("p50", "p95", "p99", "max"))]
                for name, s in (
                    ("alone", out["trivial_alone_ms"]),
                    (
                        f"while the heaviest runs in a loop ({completed} runs)",
                        out["trivial_under_load_ms"],
                    ),
                )
            ],
        )
    )
    print()
    revocation = out["revocation_delay_ms"]
    print(
        f"revoked key's socket closed with {out['revocation_close_codes']} after "
        f"p50 {revocation['p50']:.0f} ms, max {revocation['max']:.0f} ms ({len(revoked)} keys)"
    )
    write_json(out_path or OUT_DIR / "tenancy.json", out)
    refused = attack["code"] == "TOO_COSTLY" and heaviest["code"] is None
    return 0 if refused and out["revocation_close_codes"] == [4403] else 1


def _fill(root: Path, more: int = 0) -> str:
    """FACTS facts with every pair linked, then ``more`` facts each linked to three before it,
    in NAMESPACE; one fact in ``other``. The first fact's id."""
    settings = Settings(embedder="hash", data_dir=root)
    with Memory.open(root, namespace=NAMESPACE, settings=settings) as mem:
        ids = [
            r.fact.id  # type: ignore[union-attr]
            for r in mem.store_many(
                [{"text": f"Fact {n} about topic {n % 7}", "dedup": False} for n in range(FACTS)]
            )
        ]
        for a, b in itertools.combinations(ids, 2):
            mem.link(a, b, "RELATED_TO")
        rng = random.Random(58)
        for start in range(0, more, 1000):
            batch = [
                {"text": f"Fact {n} about topic {n % 7} and person {n % 97}", "dedup": False}
                for n in range(FACTS + start, FACTS + min(more, start + 1000))
            ]
            links = []
            for result in mem.store_many(batch, autolink=False):
                new = result.fact.id  # type: ignore[union-attr]
                links += [
                    {"source_id": new, "target_id": old, "type": "RELATED_TO"}
                    for old in rng.sample(ids, 3)
                ]
                ids.append(new)
            mem.link_many(links)
    with Memory.open(root, namespace="other", settings=settings) as mem:
        mem.store("The other tenant's only fact")
    return ids[0]


def _timed(url: str, token: str, query: str, fact_id: str) -> dict[str, Any]:
    began = time.perf_counter()
    response = httpx.post(
        f"{url}/graphql",
        json={"query": query, "variables": {"id": fact_id}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=600,
    )
    ms = 1000 * (time.perf_counter() - began)
    body = response.json()
    errors = body.get("errors") or []
    return {
        "status": response.status_code,
        "code": errors[0]["extensions"]["code"] if errors else None,
        "message": errors[0]["message"] if errors else None,
        "cost": (body.get("extensions") or {}).get("cost", {}).get("requested"),
        "ms": ms,
        "bytes": len(response.content),
    }


def _under_load(
    url: str, mine: str, theirs: str, fact_id: str, seconds: float
) -> tuple[list[float], int]:
    """The trivial query's waits while the heaviest document runs in a loop, and how many
    times it completed meanwhile."""
    stop = threading.Event()
    completed = 0

    def loop() -> None:
        nonlocal completed
        body = {"query": HEAVIEST, "variables": {"id": fact_id}}
        with httpx.Client(base_url=url, timeout=600, headers=_bearer(mine)) as client:
            while not stop.is_set():
                client.post("/graphql", json=body).raise_for_status()
                completed += 1

    worker = threading.Thread(target=loop)
    worker.start()
    try:
        time.sleep(1.0)  # the loop's first answer is under way
        waits = _probe(url, _bearer(theirs), seconds).waits
    finally:
        stop.set()
        worker.join()
    return waits, completed


def _revocation(url: str, keys: KeyStore) -> tuple[int | None, float]:
    """A fresh key's socket, acknowledged, then the key revoked: (close code, ms to close)."""
    token, key = keys.create([NAMESPACE])
    with connect(
        url.replace("http://", "ws://") + "/graphql",
        subprotocols=[Subprotocol("graphql-transport-ws")],
    ) as ws:
        ws.send(json.dumps({"type": "connection_init", "payload": _bearer(token)}))
        assert json.loads(ws.recv(timeout=30))["type"] == "connection_ack"
        # At a random moment of the server's 0.5 s round of looks at its sockets' keys: one
        # trial right after another would otherwise always revoke just after a look.
        time.sleep(random.uniform(0, 0.5))
        revoked = time.perf_counter()
        keys.revoke(key.id)
        try:
            while True:
                ws.recv(timeout=30)
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
        except TimeoutError:
            code = None
        return code, 1000 * (time.perf_counter() - revoked)


# ----------------------------------------------------------------------------- attack rows


def _attack_rows(names: list[str], seconds: float, out_path: Path | None, *, checks: bool) -> int:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-tenancy-") as tmp:
        if not names:
            return _report(rows, _checks(), seconds, out_path)
        template = Path(tmp) / "template"
        print(f"filling {FACTS + MORE_FACTS:,} linked facts ...", flush=True)
        fact_id = _fill(template, MORE_FACTS)
        keys = KeyFile(template)
        tokens = {
            "key": keys.create([NAMESPACE], label="attacker")[0],
            "read-only key": keys.create([NAMESPACE], read_only=True, label="reader")[0],
            "other": keys.create(["other"], label="other tenant")[0],
        }
        keys.close()
        for name in names:
            row = _attack_row(ATTACKS[name], template, tokens, fact_id, seconds, Path(tmp))
            rows.append(row)
            print(_one_line(row), flush=True)
    return _report(rows, _checks() if checks else [], seconds, out_path)


def _report(
    rows: list[dict[str, Any]], checks: list[dict[str, Any]], seconds: float, out_path: Path | None
) -> int:
    out: dict[str, Any] = {
        "benchmark": "tenancy-attacks",
        "seconds": seconds,
        "target_p99_ms": TARGET_P99_MS,
        "attacks": rows,
        "checks": checks,
        "machine": machine(),
        "uncommitted": _uncommitted(),
    }
    print()
    print(attack_markdown(out))
    write_json(out_path or OUT_DIR / "tenancy-attacks.json", out)
    return 0 if all(_passed(r) for r in rows) else 1


def _attack_row(
    attack: Attack,
    template: Path,
    tokens: dict[str, str],
    fact_id: str,
    seconds: float,
    tmp: Path,
) -> dict[str, Any]:
    """One attack against a fresh server on a copy of ``template``: what it measured."""
    waited = _wait_for_idle_cores()
    data = tmp / attack.name
    shutil.copytree(template, data)
    keyless = attack.server == "keyless"
    if keyless:
        keys = KeyFile(data)
        for key in keys.list():
            keys.revoke(key.id)
        keys.close()
    log = tmp / f"{attack.name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env.update(attack.environment)
    with contextlib.ExitStack() as stack:
        if attack.chat is not None:
            chat = stack.enter_context(Hostile(attack.chat))
            env.update(GRAPHMEM_LLM_BASE_URL=chat.url + "/v1", GRAPHMEM_LLM_API_KEY="bench")
        host = "0.0.0.0" if attack.server == "public" else "127.0.0.1"
        port, process = stack.enter_context(_serve(data, host, env, log))
        target = Target(
            "127.0.0.1",
            port,
            key=None if keyless or attack.attacker == "no key" else tokens["key"],
            read_only=None if keyless or attack.attacker == "no key" else tokens["read-only key"],
            fact_id=fact_id,
        )
        probe = {"X-Graphmem-Namespace": "other"} if keyless else _bearer(tokens["other"])
        memory = stack.enter_context(_Sampler(process.pid))
        alone = _probe(target.url, probe, ALONE_S)
        writes_alone = [_store_batch(target.url, probe) for _ in range(2)] if attack.writes else []
        idle = memory.reset()
        log_start = log.stat().st_size
        result, probed, writes = _while_attacked(attack, target, probe, seconds, server=process.pid)
        peak = memory.reset()
        time.sleep(3.0)
        after = memory.reset()
        exited = process.poll()
        logged = log.read_bytes()[log_start:]
    return {
        "row": attack.row,
        "attack": attack.name,
        "waited_for_idle_cores_s": waited,
        "what": attack.what,
        "server": attack.server,
        "attacker": attack.attacker,
        "alone_ms": _summary(alone.waits),
        "alone_outcomes": dict(alone.outcomes),
        "under_attack_ms": _summary(probed.waits),
        "probe_outcomes": dict(probed.outcomes),
        "probe_over_target_at_s_ms": probed.slow(),
        "store_2000_alone_s": writes_alone,
        "store_2000_under_attack_s": writes,
        "rss_idle_mib": idle["rss"],
        "rss_peak_mib": peak["rss"],
        "rss_growth_mib": round(peak["rss"] - idle["rss"], 1),
        "rss_after_mib": after["last"],
        "hwm_mib": peak["hwm"],
        "cpu_s": result["cpu_s"],
        "log_bytes": len(logged),
        "tracebacks": logged.count(b"Traceback"),
        "first_traceback": _first_traceback(logged),
        "log_commonest_line": Counter(
            line[:100].decode(errors="replace") for line in logged.splitlines()
        ).most_common(1),
        "server_exited": exited,
        "attacker_outcomes": result["outcomes"],
        "attacker_notes": result["notes"],
    }


def _while_attacked(
    attack: Attack,
    target: Target,
    probe: dict[str, str],
    seconds: float,
    *,
    server: int,
) -> tuple[dict[str, Any], _Probed, list[tuple[float, str]]]:
    """Run ``attack`` in a process of its own; once it is under way, the probe (and the other
    tenant's writes) for ``seconds``: the attacker's tally (with the CPU seconds the
    ``server`` process, the attacker, this process and all others used meanwhile, under
    ``cpu_s``), the probe's, and each write's (seconds, outcome)."""
    context = multiprocessing.get_context("spawn")
    stop, ready = context.Event(), context.Event()
    tallies: multiprocessing.Queue[dict[str, Any]] = context.Queue()
    attacker = context.Process(
        target=run, args=(attack.name, target, stop, ready, tallies), daemon=True
    )
    attacker.start()
    ready.wait(120)
    writes: list[tuple[float, str]] = []
    writer = None
    if attack.writes:
        writer = threading.Thread(target=_store_loop, args=(target.url, probe, seconds, writes))
        writer.start()
    began = _cpu_use(server, attacker.pid)
    probed = _probe(target.url, probe, seconds)
    used = {k: v - began[k] for k, v in _cpu_use(server, attacker.pid).items()}
    stop.set()
    if writer is not None:
        writer.join()
    try:
        result = tallies.get(timeout=120)
    except queue.Empty:
        result = {"outcomes": {"the attacker did not stop": 1}, "notes": {}}
    attacker.join(30)
    if attacker.is_alive():
        attacker.kill()
    others = used.pop("machine") - sum(used.values())
    cpu = {k: round(v, 1) for k, v in {**used, "others": others}.items()}
    return {**result, "cpu_s": cpu}, probed, writes


@dataclass
class _Probed:
    """The other tenant's trivial queries: each one's wait (ms), when it was sent (s after the
    first) and what came back (``ok``, a status, an exception's name)."""

    waits: list[float] = field(default_factory=list)
    sent: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)

    def slow(self) -> list[tuple[float, float]]:
        """(when sent, ms) of the waits over the target."""
        return [
            (round(t, 1), round(w))
            for t, w in zip(self.sent, self.waits, strict=True)
            if w > TARGET_P99_MS
        ]


def _probe(url: str, headers: dict[str, str], seconds: float) -> _Probed:
    """``{ namespace }`` once every TRIVIAL_EVERY_S for ``seconds``."""
    probed = _Probed()
    with httpx.Client(base_url=url, timeout=30, headers=headers) as client:
        start = time.monotonic()
        while time.monotonic() < start + seconds:
            began = time.perf_counter()
            probed.sent.append(time.monotonic() - start)
            try:
                response = client.post("/graphql", json={"query": TRIVIAL})
                ok = response.status_code == 200 and "namespace" in (response.json()["data"] or {})
                probed.outcomes["ok" if ok else f"HTTP {response.status_code}"] += 1
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
                probed.outcomes[type(error).__name__] += 1
            probed.waits.append(1000 * (time.perf_counter() - began))
            time.sleep(TRIVIAL_EVERY_S)
    return probed


def _store_batch(url: str, headers: dict[str, str]) -> tuple[float, str]:
    """One ``storeFacts`` of WRITE_BATCH facts by the other tenant: (seconds, outcome)."""
    facts = [
        {"text": f"Other tenant's note {random.random():.12f} number {n}", "dedup": False}
        for n in range(WRITE_BATCH)
    ]
    body = {"query": STORE_FACTS, "variables": {"i": facts}}
    began = time.perf_counter()
    try:
        response = httpx.post(f"{url}/graphql", json=body, headers=headers, timeout=600)
        outcome = "ok" if response.status_code == 200 else f"HTTP {response.status_code}"
        if outcome == "ok" and (response.json().get("errors") or [None])[0]:
            outcome = response.json()["errors"][0]["extensions"].get("code", "error")
    except httpx.HTTPError as error:
        outcome = type(error).__name__
    return round(time.perf_counter() - began, 2), outcome


def _store_loop(
    url: str, headers: dict[str, str], seconds: float, out: list[tuple[float, str]]
) -> None:
    """WRITE_BATCH facts stored every WRITE_EVERY_S (or as soon as the last is done)."""
    start = time.monotonic()
    while (now := time.monotonic()) < start + seconds:
        out.append(_store_batch(url, headers))
        time.sleep(max(0.0, now + WRITE_EVERY_S - time.monotonic()))


@contextlib.contextmanager
def _serve(
    root: Path, host: str, env: dict[str, str], log: Path
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """``graphmem serve`` bound to ``host`` on a free port, with ``env``: (port, process)."""
    port = _free_port()
    command = [
        str(Path(sys.executable).parent / "graphmem"),
        *("--data-dir", str(root), "--namespace", NAMESPACE, "--embedder", "hash"),
        *("serve", "--host", host, "--port", str(port), "--log-level", "warning"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT, env=env
        )
        try:
            _wait_healthy(f"http://127.0.0.1:{port}", process, log)
            yield port, process
        finally:
            stop(process)


class _Sampler:
    """A process's resident memory, read every SAMPLE_EVERY_S: the most since the last reset."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._peak = 0.0
        self._last = 0.0
        self._hwm = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def reset(self) -> dict[str, float]:
        """The largest VmRSS since the last reset, the latest, and VmHWM (MiB); start anew."""
        self._read()
        seen = {"rss": round(self._peak, 1), "last": round(self._last, 1), "hwm": self._hwm}
        self._peak = self._last
        return seen

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            self._read()

    def _read(self) -> None:
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:  # the server has exited
            return
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        self._last = int(fields["VmRSS"].split()[0]) / 1024
        self._hwm = round(int(fields["VmHWM"].split()[0]) / 1024, 1)
        self._peak = max(self._peak, self._last)


def _wait_for_idle_cores() -> float:
    """Wait (at most IDLE_WAIT_S) until other processes use less than IDLE_CORES of the CPU:
    the cores are shared with whatever else runs on the machine (tests, other benches).
    Seconds waited."""
    began = time.monotonic()
    while time.monotonic() < began + IDLE_WAIT_S:
        before, mine = _machine_busy(), sum(os.times()[:2])
        time.sleep(IDLE_LOOK_S)
        others = (_machine_busy() - before - (sum(os.times()[:2]) - mine)) / IDLE_LOOK_S
        if others < IDLE_CORES:
            break
        print(f"waiting for idle cores (others use {others:.1f} of them)", flush=True)
    return round(time.monotonic() - began, 1)


def _machine_busy() -> float:
    """CPU seconds the machine has spent busy (every core, every process) since boot."""
    busy = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in busy)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _cpu_use(server: int, attacker: int | None) -> dict[str, float]:
    """CPU seconds used so far by the whole machine, the server, the attacker and this
    process: what none of them used shows that something else shared the cores."""
    mine = os.times()
    return {
        "machine": _machine_busy(),
        "server": _cpu_seconds(server),
        "attacker": _cpu_seconds(attacker) if attacker is not None else 0.0,
        "bench": mine.user + mine.system,
    }


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------ rows 11-14


def _checks() -> list[dict[str, Any]]:
    """Rows 11-14: the two held by tests, secret detection's time, the client's bounds."""
    from graphmem.sensitive import findings

    checks: list[dict[str, Any]] = [
        {"row": row, "check": what, "result": "see tests"} for row, what in SEE_TESTS.items()
    ]
    text = ("sk-" * 6_667)[:20_000]
    times = []
    for _ in range(3):
        began = time.perf_counter()
        findings(text)
        times.append(1000 * (time.perf_counter() - began))
    checks.append(
        {
            "row": 13,
            "check": "secret detection of 20,000 characters of `sk-` repeated",
            "result": f"{min(times):.1f} ms (best of 3)",
        }
    )
    context = multiprocessing.get_context("spawn")
    for mode, what in (
        ("huge", "an answer of 150 MB"),
        ("drip", "an answer dripped 1 byte / 2 s, timeout=5"),
        ("list", "an answer that is a JSON list"),
        ("deep", "an answer nested 100,000 deep"),
    ):
        answers: multiprocessing.Queue[dict[str, Any]] = context.Queue()
        worker = context.Process(target=client_check, args=(mode, answers))
        worker.start()
        try:
            got = answers.get(timeout=120)
            result = f"{got['raised']} after {got['seconds']} s, peak memory +{got['peak_growth_mib']} MiB"
        except queue.Empty:
            result = "no answer in 120 s"
        worker.join(10)
        if worker.is_alive():
            worker.kill()
        checks.append({"row": 14, "check": f"graphmem.Client: {what}", "result": result})
    return checks


# --------------------------------------------------------------------------------- report


def attack_markdown(out: dict[str, Any]) -> str:
    """The attack rows as markdown tables: the other tenant's wait and the server's memory,
    what the attacker was answered, and the short checks."""
    rows = out["attacks"]
    checks = markdown_table(
        ["row", "check", "result"], [[c["row"], c["check"], c["result"]] for c in out["checks"]]
    )
    if not rows:
        return checks
    main = markdown_table(
        [
            "row",
            "attack",
            "by",
            "alone p50 / p99",
            "p50",
            "p95",
            "p99",
            "max ms",
            "probe not ok",
            "RSS idle → peak MiB",
            "growth",
            "3 s after",
            "CPU s: server / attacker / others",
        ],
        [
            [
                r["row"],
                f"`{r['attack']}`",
                r["attacker"] + (" (keyless server)" if r["server"] == "keyless" else ""),
                f"{r['alone_ms']['p50']:.1f} / {r['alone_ms']['p99']:.1f}",
                *(f"{r['under_attack_ms'][k]:.1f}" for k in ("p50", "p95")),
                ("**{:.1f}**" if not _passed(r) else "{:.1f}").format(r["under_attack_ms"]["p99"]),
                f"{r['under_attack_ms']['max']:.0f}",
                sum(n for k, n in r["probe_outcomes"].items() if k != "ok") or "",
                f"{r['rss_idle_mib']:.0f} → {r['rss_peak_mib']:.0f}",
                f"+{r['rss_growth_mib']:.0f}",
                f"{r['rss_after_mib']:.0f}",
                # Others' share is what the machine used less the three; it reads a second or
                # two below zero when threads' ticks fall between the two looks.
                "{:.0f} / {:.0f} / {:.0f}".format(
                    r["cpu_s"]["server"], r["cpu_s"]["attacker"], max(0.0, r["cpu_s"]["others"])
                ),
            ]
            for r in rows
        ],
    )
    answered = markdown_table(
        ["attack", "what the attacker sent", "what it was answered", "notes"],
        [[f"`{r['attack']}`", r["what"], _outcomes(r), _notes(r)] for r in rows],
    )
    peak = max(rows, key=lambda r: r["rss_peak_mib"])
    growth = max(rows, key=lambda r: r["rss_growth_mib"])
    bound = (
        f"Server memory: peak {peak['rss_peak_mib']:.0f} MiB (`{peak['attack']}`), growth at most "
        f"+{growth['rss_growth_mib']:.0f} MiB over idle (`{growth['attack']}`)."
    )
    return "\n\n".join([main, answered, bound, *([checks] if out["checks"] else [])])


def _outcomes(row: dict[str, Any]) -> str:
    counted = sorted(row["attacker_outcomes"].items(), key=lambda kv: -kv[1])
    return "; ".join(f"{k} x{n:,}" for k, n in counted[:6]) + ("; …" if len(counted) > 6 else "")


def _notes(row: dict[str, Any]) -> str:
    notes = {k: v for k, v in row["attacker_notes"].items() if k != "seconds"}
    parts = [f"{k}: {f'{v:,}' if isinstance(v, int) else v}" for k, v in notes.items()]
    if slow := row["probe_over_target_at_s_ms"]:
        shown = ", ".join(f"{ms:,} ms at {t} s" for t, ms in slow[:4])
        parts.append(
            f"probe over {TARGET_P99_MS:.0f} ms {len(slow)} times ({shown}{', …' if len(slow) > 4 else ''})"
        )
    if row["tracebacks"] or row["log_bytes"] > 10_000:
        [(line, n)] = row["log_commonest_line"] or [("", 0)]
        parts.append(
            f"log +{row['log_bytes']:,} bytes, {row['tracebacks']} tracebacks, "
            f"commonest line ({n:,} times): {line.strip()}"
        )
    if row["store_2000_under_attack_s"]:
        alone = ", ".join(f"{s} s" for s, _ in row["store_2000_alone_s"])
        under = ", ".join(
            f"{s} s {o}" if o != "ok" else f"{s} s" for s, o in row["store_2000_under_attack_s"]
        )
        parts.append(f"other tenant's 2,000-fact storeFacts: alone {alone}; attacked {under}")
    if row["cpu_s"]["others"] > 2.0:
        parts.append(f"**other processes used {row['cpu_s']['others']} CPU s meanwhile**")
    if row["server_exited"] is not None:
        parts.append(f"**server exited ({row['server_exited']})**")
    return "; ".join(parts)


def _passed(row: dict[str, Any]) -> bool:
    internal = any("INTERNAL_ERROR" in k for k in row["attacker_outcomes"])
    fast = row["server"] == "keyless" or row["under_attack_ms"]["p99"] <= TARGET_P99_MS
    return fast and not internal and row["server_exited"] is None


def _one_line(row: dict[str, Any]) -> str:
    w = row["under_attack_ms"]
    return (
        f"{row['attack']}: other tenant p50 {w['p50']:.1f} p99 {w['p99']:.1f} max {w['max']:.0f} ms; "
        f"RSS {row['rss_idle_mib']:.0f} -> {row['rss_peak_mib']:.0f} MiB; {_outcomes(row)}"
    )


def _first_traceback(logged: bytes) -> str | None:
    """The server log's first traceback, with the line before it (the error logged)."""
    at = logged.find(b"Traceback")
    if at < 0:
        return None
    start = logged.rfind(b"\n", 0, max(0, at - 1)) + 1
    return logged[start : at + 4000].decode(errors="replace")


def _uncommitted() -> list[str]:
    done = subprocess.run(
        ["git", "status", "--short", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.splitlines()


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
    }


if __name__ == "__main__":
    raise SystemExit(main())
