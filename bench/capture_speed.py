"""What capture costs beside storing the same messages, and what turns cost search and recall.

1. **Capture against store_many** (the default). LoCoMo's conversations as chat messages (the
   first speaker ``user``, the second ``assistant``, a message being the turn's text), each
   conversation in two namespaces: one written by ``Memory.capture(window, episode=session)``,
   the other by ``store_many([{"text": ...} for each message], episode=session)``. Every session
   is cut into windows of ``--window`` messages; the first ``--prior`` sessions, and windows
   shorter than ``--window``, are written untimed (so that each namespace holds earlier sessions,
   as an agent's does); every other window is written both ways and timed, which goes first
   alternating, so that the machine's load weighs on both alike. Each namespace has an embedder
   of its own that caches nothing, so embedding is part of the work timed. Reported: the median
   wall and CPU (all threads) milliseconds per call of each path and how much of it was spent
   embedding, the ratio of the medians and the median of the per-window ratios, texts embedded
   per call, and the turns and facts capture wrote. ``--embedding`` also times the embedder
   alone on each window's texts: the messages, capture's texts in one call, and the facts in a
   call of their own, with the tokens each runs. ``--profile`` runs cProfile (CPU time) around
   every timed call of both paths (bench/out/capture-speed-profile-*.txt); its times are then
   not the headline.
2. **Search and recall across commits** (``--reads DIR [DIR ...]``): each DIR a checkout (a git
   worktree) whose ``graphmem`` package a child process imports instead of this one's (the rest,
   bench and devtools, are this checkout's). For each, once, a namespace of ``--size`` synthetic
   facts (bench/synthetic.py, ``store_many`` in batches of 1,000, then ``optimize``) under
   ``--data``; with the local embedder, the facts' vectors are computed once and given to every
   build, so that the checkouts' namespaces hold the same vectors. Then ``--rounds`` rounds,
   each timing every checkout in a process of its own (the order reversed every other round):
   ``Memory.search(q)`` and ``Memory.recall(q, max_tokens=800)`` for ``--queries`` questions
   after WARMUP untimed ones, query embedding included, default settings (access tracking on).
   Reported per checkout: wall p50 and p95 and CPU p50, their median and range over the rounds,
   and the rounds' ratios of the last checkout to the first.

    python -m bench.capture_speed [--embedder local hash] [--samples A-B] [--embedding]
                                  [--profile]
    python -m bench.capture_speed --reads DIR_BEFORE DIR_AFTER [--embedder local hash]
                                  [--rounds 20] [--data DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, Final

import numpy as np
from tokenizers import Tokenizer

import graphmem
from graphmem import Memory, Settings
from graphmem import capture as captures
from graphmem.models import Vectors
from graphmem.usage import Meter
from graphmem.vectors.embedders import (
    LOCAL_DIMENSIONS,
    LOCAL_MAX_TOKENS,
    LOCAL_MODEL_NAME,
    Embedder,
)

from . import synthetic
from .common import (
    OUT_DIR,
    ROOT,
    dataset,
    machine,
    make_embedder,
    markdown_table,
    percentile,
    profile_text,
    write_json,
)
from .locomo import SESSION_DATE_FORMAT, _sessions

WINDOW: Final = 20
PRIOR: Final = 3
BATCH: Final = 1_000
WARMUP: Final = 20
BUDGET: Final = 800
#: Times the embedder alone runs each variant of a window (the least is kept).
REPEATS: Final = 3
#: The local embedder's batch (LocalEmbedder's default).
EMBED_BATCH: Final = 64
PATHS: Final = ("capture", "store_many")
CALL_FIGURES: Final = (
    "wall_ms",
    "cpu_ms",
    "embed_wall_ms",
    "embed_cpu_ms",
    "embedded",
    "turns",
    "facts",
)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.child:
        result = _child(args.child, Path(args.child_dir), args)
        Path(args.child_out).write_text(json.dumps(result), encoding="utf-8")
        return 0
    if args.reads:
        for embedder in args.embedder:
            _reads(args, embedder)
        return 0
    folder = dataset("locomo")
    if folder is None:
        return 0
    raw = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    first, last = args.samples or (0, len(raw) - 1)
    conversations = [_conversation(i, raw[i]) for i in range(first, min(last, len(raw) - 1) + 1)]
    for embedder in args.embedder:
        print(f"{embedder} embedder, conversations {first}-{conversations[-1].index} ...")
        report = {
            "benchmark": "capture-speed",
            "machine": machine(),
            "config": {
                "embedder": embedder,
                "samples": [first, conversations[-1].index],
                "window": args.window,
                "prior_sessions": args.prior,
                "profiled": args.profile,
                "embedding_alone": args.embedding,
            },
            **_capture_cost(conversations, embedder, args),
        }
        print(capture_markdown([report]))
        suffix = "-profiled" if args.profile else ""
        write_json(args.out or OUT_DIR / f"capture-speed-{embedder}{suffix}.json", report)
    return 0


# --------------------------------------------------------------------------------- capture


@dataclass
class Session:
    episode: dict[str, Any]
    messages: list[dict[str, str]]


@dataclass
class Conversation:
    index: int
    sessions: list[Session]


def _conversation(index: int, sample: dict[str, Any]) -> Conversation:
    """LoCoMo conversation ``index`` as chat sessions, each with its episode."""
    conv = sample["conversation"]
    sessions = []
    for n in _sessions(conv):
        when = datetime.strptime(conv[f"session_{n}_date_time"], SESSION_DATE_FORMAT)
        messages = [
            {
                "role": "user" if t["speaker"] == conv["speaker_a"] else "assistant",
                "content": t["text"],
            }
            for t in conv[f"session_{n}"]
        ]
        episode = {"id": f"c{index}/session-{n}", "time": when.replace(tzinfo=UTC).timestamp()}
        sessions.append(Session(episode, messages))
    return Conversation(index, sessions)


def _windows(
    conversation: Conversation, window: int, prior: int
) -> Iterator[tuple[Session, list[dict[str, str]], bool]]:
    """Each session's windows in order, and whether the window is timed."""
    for n, session in enumerate(conversation.sessions):
        for start in range(0, len(session.messages), window):
            part = session.messages[start : start + window]
            yield session, part, n >= prior and len(part) == window


class TimedEmbedder:
    """Wraps an embedder and adds up the texts it embedded and the time it took (caching
    nothing): how much of a write is embedding."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.meter = inner.meter
        self.texts = 0
        self.wall = 0.0
        self.cpu = 0.0

    def embed(self, texts: Sequence[str]) -> Vectors:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner.embed(texts)
        finally:
            self.wall += time.perf_counter() - wall
            self.cpu += time.process_time() - cpu
            self.texts += len(texts)


@dataclass
class Target:
    """One path's namespace of one conversation, and its profiler when profiling."""

    path: str
    memory: Memory
    embedder: TimedEmbedder
    profiler: cProfile.Profile | None

    def write(self, session: Session, messages: list[dict[str, str]]) -> list[Any]:
        if self.path == "capture":
            return self.memory.capture(messages, episode=session.episode)
        items = [{"text": m["content"]} for m in messages]
        return self.memory.store_many(items, episode=session.episode)

    def timed(self, session: Session, messages: list[dict[str, str]]) -> dict[str, Any]:
        e = self.embedder
        texts, embed_wall, embed_cpu = e.texts, e.wall, e.cpu
        wall, cpu = time.perf_counter(), time.process_time()
        if self.profiler is not None:
            self.profiler.enable()
        results = self.write(session, messages)
        if self.profiler is not None:
            self.profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        kinds = Counter(
            getattr(r, "kind", "fact") for r in results if r.action in ("ADD", "UPDATE")
        )
        return {
            "wall_ms": 1000 * wall,
            "cpu_ms": 1000 * cpu,
            "embed_wall_ms": 1000 * (e.wall - embed_wall),
            "embed_cpu_ms": 1000 * (e.cpu - embed_cpu),
            "embedded": e.texts - texts,
            "turns": kinds["turn"] if self.path == "capture" else 0,
            "facts": kinds["fact"],
        }


def _capture_cost(
    conversations: Sequence[Conversation], embedder: str, args: argparse.Namespace
) -> dict[str, Any]:
    calls: dict[str, list[dict[str, Any]]] = {p: [] for p in PATHS}
    alone: list[dict[str, float]] = []
    # CPU time, so that the profile says where the work goes whatever else the cores run.
    profilers = {p: cProfile.Profile(time.process_time) for p in PATHS} if args.profile else {}
    settings = Settings()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-capture-speed-") as tmp:
        for conversation in conversations:
            paths = []
            for name in PATHS:
                model = TimedEmbedder(make_embedder(embedder))
                model.embed(["the model warmed up before the first write"])
                memory = Memory.open(
                    Path(tmp) / f"{name}-{conversation.index}",
                    namespace="capture-speed",
                    embedder=model,
                    settings=settings,
                )
                paths.append(Target(name, memory, model, profilers.get(name)))
            try:
                timed = 0
                for session, messages, counted in _windows(conversation, args.window, args.prior):
                    if not counted:
                        for p in paths:
                            p.write(session, messages)
                        continue
                    for p in paths if timed % 2 == 0 else paths[::-1]:
                        calls[p.path].append(p.timed(session, messages))
                    if args.embedding:
                        alone.append(_embedding_alone(paths[0].embedder.inner, messages, settings))
                    timed += 1
            finally:
                for p in paths:
                    p.memory.close()
            print(
                f"  conversation {conversation.index}: {timed} windows timed, "
                + _one_line(calls)
                + f" ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    out: dict[str, Any] = {"windows": len(calls["capture"])}
    for name in PATHS:
        out[name] = {
            key: statistics.median(c[key] for c in calls[name]) for key in CALL_FIGURES
        } | {
            "wall_ms_p25": percentile([c["wall_ms"] for c in calls[name]], 25),
            "wall_ms_p75": percentile([c["wall_ms"] for c in calls[name]], 75),
            "embedded_mean": statistics.fmean(c["embedded"] for c in calls[name]),
            "facts_mean": statistics.fmean(c["facts"] for c in calls[name]),
            "turns_mean": statistics.fmean(c["turns"] for c in calls[name]),
        }
    pairs = list(zip(calls["capture"], calls["store_many"], strict=True))
    out["ratio"] = {
        "of_median_wall": out["capture"]["wall_ms"] / out["store_many"]["wall_ms"],
        "of_median_cpu": out["capture"]["cpu_ms"] / out["store_many"]["cpu_ms"],
        "median_per_window_wall": statistics.median(c["wall_ms"] / s["wall_ms"] for c, s in pairs),
        "median_per_window_cpu": statistics.median(c["cpu_ms"] / s["cpu_ms"] for c, s in pairs),
    }
    if alone:
        out["embedding_alone"] = {k: statistics.median(a[k] for a in alone) for k in alone[0]}
        for name in ("capture", "apart"):
            out["embedding_alone"][f"{name}_ratio"] = statistics.median(
                a[f"{name}_cpu_ms"] / a["messages_cpu_ms"] for a in alone
            )
            out["embedding_alone"][f"{name}_tokens_ratio"] = statistics.median(
                a[f"{name}_tokens"] / a["messages_tokens"] for a in alone
            )
    if profilers:
        path = OUT_DIR / f"capture-speed-profile-{embedder}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "\n\n".join(f"=== {k}\n{profile_text(v, 40)}" for k, v in profilers.items())
        )
        out["profile_file"] = str(path)
    out["seconds"] = time.perf_counter() - started
    return out


def _embedding_alone(
    model: Embedder, messages: list[dict[str, str]], settings: Settings
) -> dict[str, float]:
    """The embedder alone on one window's texts, CPU ms (the least of REPEATS) and tokens run
    (each batch padded to its longest text, as the local embedder runs it): the messages, as
    store_many embeds them; the capture's texts (messages and the facts drawn) in one call, as
    capture embeds them; and the facts in a call of their own."""
    planned = captures.plan(
        captures.parse_messages(messages),
        max_chars=settings.capture_max_chars,
        turn_decay_class=settings.turn_decay_class,
    )
    texts = [item["text"] for item in planned.items]
    facts = [t for i, t in enumerate(texts) if i in planned.drawn]
    turns = [t for i, t in enumerate(texts) if i not in planned.drawn]
    variants = {
        "messages": [[m["content"] for m in messages]],
        "capture": [texts],
        "apart": [turns, facts] if facts else [turns],
    }
    out: dict[str, float] = {"facts": len(facts)}
    for name, calls in variants.items():
        spent = []
        for _ in range(REPEATS):
            used = time.process_time()
            for call in calls:
                model.embed(call)
            spent.append(1000 * (time.process_time() - used))
        out[f"{name}_cpu_ms"] = min(spent)
        out[f"{name}_tokens"] = sum(_padded_tokens(call) for call in calls)
    return out


def _padded_tokens(texts: Sequence[str]) -> int:
    """Tokens the local embedder runs for ``texts``: batches of similar lengths, each padded to
    its longest (see LocalEmbedder.embed)."""
    lengths = sorted(len(e.ids) for e in _tokenizer().encode_batch(list(texts)))
    return sum(
        len(lengths[i : i + EMBED_BATCH]) * max(lengths[i : i + EMBED_BATCH])
        for i in range(0, len(lengths), EMBED_BATCH)
    )


@functools.cache
def _tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_str(
        (resources.files("graphmem") / "data" / "tokenizer.json").read_text(encoding="utf-8")
    )
    tokenizer.enable_truncation(max_length=LOCAL_MAX_TOKENS)
    tokenizer.no_padding()  # the file's own padding setting; the batches are padded above
    return tokenizer


def _one_line(calls: dict[str, list[dict[str, Any]]]) -> str:
    if not calls["capture"]:
        return "nothing timed yet"
    wall = {p: statistics.median(c["wall_ms"] for c in calls[p]) for p in PATHS}
    return (
        f"median capture {wall['capture']:.0f} ms, store_many {wall['store_many']:.0f} ms, "
        f"ratio {wall['capture'] / wall['store_many']:.2f}"
    )


def capture_markdown(reports: Sequence[dict[str, Any]]) -> str:
    """Medians per call: wall and CPU ms, of which embedding, and the ratio of the paths."""

    def ms(r: dict[str, Any]) -> str:
        return (
            f"{r['wall_ms']:.0f} / {r['cpu_ms']:.0f} "
            f"({r['embed_wall_ms']:.0f} / {r['embed_cpu_ms']:.0f})"
        )

    return markdown_table(
        [
            "embedder",
            "windows",
            "capture ms wall / CPU (embedding)",
            "store_many ms wall / CPU (embedding)",
            "ratio of medians wall / CPU",
            "median ratio per window wall / CPU",
            "texts embedded capture / store_many",
            "capture writes turns + facts",
        ],
        [
            [
                r["config"]["embedder"],
                r["windows"],
                ms(r["capture"]),
                ms(r["store_many"]),
                f"{r['ratio']['of_median_wall']:.2f} / {r['ratio']['of_median_cpu']:.2f}",
                f"{r['ratio']['median_per_window_wall']:.2f} / "
                f"{r['ratio']['median_per_window_cpu']:.2f}",
                f"{r['capture']['embedded_mean']:.1f} / {r['store_many']['embedded_mean']:.1f}",
                f"{r['capture']['turns_mean']:.1f} + {r['capture']['facts_mean']:.1f}",
            ]
            for r in reports
        ],
    )


# --------------------------------------------------------------------------------- reads


def _reads(args: argparse.Namespace, embedder: str) -> None:
    codes = [Path(c).resolve() for c in args.reads]
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    vectors = None
    if embedder == "local":
        vectors = data / f"local-vectors-{args.size}.npy"
        if not vectors.exists():
            _embed_facts(args.size, vectors)
    builds = {}
    for code in codes:
        directory = data / f"{_commit(code)}-{embedder}-{args.size}"
        marker = directory / "built.json"
        if not marker.exists():
            print(f"building {args.size} facts with {code}'s graphmem in {directory} ...")
            built = _run_child("build", code, directory, embedder, args, vectors)
            marker.write_text(json.dumps(built), encoding="utf-8")
        builds[code] = (directory, json.loads(marker.read_text(encoding="utf-8")))
    rounds: list[dict[str, Any]] = []
    for n in range(args.rounds):
        timed = {}
        for code in codes if n % 2 == 0 else codes[::-1]:
            timed[str(code)] = _run_child("time", code, builds[code][0], embedder, args)
        rounds.append(timed)
        print(f"  round {n + 1}: " + _round_line(rounds[-1], codes), flush=True)
    report = {
        "benchmark": "capture-speed-reads",
        "machine": machine(),
        "config": {
            "embedder": embedder,
            "size": args.size,
            "queries": args.queries,
            "warmup": WARMUP,
            "max_tokens": BUDGET,
            "settings": "defaults (access tracking on)",
        },
        "codes": [{"dir": str(c), "commit": _commit(c), "build": builds[c][1]} for c in codes],
        "rounds": rounds,
        "summary": _reads_summary(rounds, codes),
    }
    print(reads_markdown(report))
    write_json(args.out or OUT_DIR / f"capture-speed-reads-{embedder}.json", report)


def _child(kind: str, directory: Path, args: argparse.Namespace) -> dict[str, Any]:
    """In a child process whose ``graphmem`` is the checkout's: build or time a namespace."""
    pairs = synthetic.pairs(args.size)
    where = {"graphmem": graphmem.__file__, "pid": os.getpid()}
    items = list(synthetic.facts(pairs))
    embedder: str | Embedder = args.embedder[0]
    if kind == "build" and args.child_vectors:
        embedder = StoredVectors([f["text"] for f in items], np.load(args.child_vectors))
    memory = Memory.open(directory, namespace="speed", embedder=embedder, settings=Settings())
    try:
        if kind == "build":
            began = time.perf_counter()
            for start in range(0, len(items), BATCH):
                memory.store_many(items[start : start + BATCH])
            stored = time.perf_counter() - began
            memory.optimize()
            return where | {
                "vectors": args.child_vectors,
                "embedded_unstored": getattr(embedder, "missed", None),
                "facts": memory.stats().facts,
                "store_seconds": stored,
                "seconds": time.perf_counter() - began,
            }
        questions = synthetic.queries(pairs, WARMUP + args.queries)
        return where | {
            "search": _latency(memory.search, questions),
            "recall": _latency(lambda q: memory.recall(q, max_tokens=BUDGET), questions),
            "load_average": os.getloadavg()[0],
        }
    finally:
        memory.close()


def _embed_facts(size: int, path: Path) -> None:
    """The local embedder's vectors of the ``size`` synthetic facts, saved in ``path``."""
    texts = [f["text"] for f in synthetic.facts(synthetic.pairs(size))]
    model = make_embedder("local")
    out = np.empty((len(texts), model.dimensions), dtype=np.float32)
    began = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        out[start : start + BATCH] = model.embed(texts[start : start + BATCH])
        if start % (20 * BATCH) == 0:
            print(f"  embedded {start + BATCH} facts ({time.perf_counter() - began:.0f} s)")
    np.save(path, out)


class StoredVectors:
    """The local embedder, for texts whose vectors it computed earlier (``_embed_facts``): the
    checkouts' namespaces get the same vectors, and the slow part of their builds is done once.
    Other texts are embedded by the model (and counted in ``missed``)."""

    provider = "local"
    model = LOCAL_MODEL_NAME
    dimensions = LOCAL_DIMENSIONS

    def __init__(self, texts: Sequence[str], vectors: Vectors) -> None:
        self.meter = Meter("embedding", self.provider, self.model)
        self.missed = 0
        self._rows = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors
        self._model: Embedder | None = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.meter.record(inputs=len(texts))
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        unknown = [i for i, t in enumerate(texts) if t not in self._rows]
        for i, t in enumerate(texts):
            if t in self._rows:
                out[i] = self._vectors[self._rows[t]]
        if unknown:
            self._model = self._model or make_embedder("local")
            out[unknown] = self._model.embed([texts[i] for i in unknown])
            self.missed += len(unknown)
        return out


def _latency(call: Callable[[str], Any], questions: Sequence[str]) -> dict[str, float]:
    """Wall p50/p95 ms, and the process's CPU ms per call (all its threads: what the call
    cost, whatever else the cores ran meanwhile)."""
    for q in questions[:WARMUP]:
        call(q)
    wall, cpu = [], []
    for q in questions[WARMUP:]:
        began, used = time.perf_counter(), time.process_time()
        call(q)
        wall.append(1000 * (time.perf_counter() - began))
        cpu.append(1000 * (time.process_time() - used))
    return {
        "p50_ms": percentile(wall, 50),
        "p95_ms": percentile(wall, 95),
        "cpu_p50_ms": percentile(cpu, 50),
        "n": len(wall),
    }


def _run_child(
    kind: str,
    code: Path,
    directory: Path,
    embedder: str,
    args: argparse.Namespace,
    vectors: Path | None = None,
) -> dict[str, Any]:
    """This module run in a child process that imports ``graphmem`` from ``code`` and
    everything else (bench, devtools) from this checkout."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        child_out = Path(handle.name)
    argv = [
        "--child",
        kind,
        "--child-dir",
        str(directory),
        "--child-out",
        str(child_out),
        "--embedder",
        embedder,
        "--size",
        str(args.size),
        "--queries",
        str(args.queries),
        *(["--child-vectors", str(vectors)] if vectors is not None else []),
    ]
    program = "\n".join(
        [
            "import sys",
            f"sys.path.insert(0, {str(code)!r})",
            "import graphmem",
            f"assert graphmem.__file__.startswith({str(code) + os.sep!r}), graphmem.__file__",
            f"sys.path[0] = {str(ROOT)!r}",
            "from bench.capture_speed import main",
            f"raise SystemExit(main({argv!r}))",
        ]
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        # -P: the working directory is not put first on the path (it would be this checkout).
        subprocess.run([sys.executable, "-P", "-c", program], check=True, cwd=ROOT, env=env)
        result: dict[str, Any] = json.loads(child_out.read_text(encoding="utf-8"))
    finally:
        child_out.unlink(missing_ok=True)
    return result


def _commit(code: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(code), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    dirty = subprocess.run(
        ["git", "-C", str(code), "status", "--porcelain", "--", "graphmem"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return done.stdout.strip() + ("-dirty" if dirty else "")


def _round_line(timed: dict[str, dict[str, Any]], codes: Sequence[Path]) -> str:
    return "; ".join(
        f"{_commit(c)} search {timed[str(c)]['search']['p50_ms']:.1f} ms, "
        f"recall {timed[str(c)]['recall']['p50_ms']:.1f} ms"
        for c in codes
    )


def _reads_summary(rounds: Sequence[dict[str, Any]], codes: Sequence[Path]) -> dict[str, Any]:
    """Per operation and checkout, each figure's median and range over the rounds; and the
    rounds' ratios of the last checkout to the first."""
    out: dict[str, Any] = {}
    for op in ("search", "recall"):
        for stat in ("p50_ms", "p95_ms", "cpu_p50_ms"):
            for c in codes:
                out[f"{op} {stat} {_commit(c)}"] = _spread([r[str(c)][op][stat] for r in rounds])
            out[f"{op} {stat} ratio"] = _spread(
                [r[str(codes[-1])][op][stat] / r[str(codes[0])][op][stat] for r in rounds]
            )
    return out


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def reads_markdown(report: dict[str, Any]) -> str:
    s = report["summary"]

    def cell(figure: dict[str, float], digits: int = 1) -> str:
        return (
            f"{figure['median']:.{digits}f} ({figure['min']:.{digits}f}-{figure['max']:.{digits}f})"
        )

    stats = ("p50_ms", "p95_ms", "cpu_p50_ms")
    rows = [
        [op, c["commit"], *(cell(s[f"{op} {stat} {c['commit']}"]) for stat in stats)]
        for op in ("search", "recall")
        for c in report["codes"]
    ]
    rows += [
        [op, "ratio", *(cell(s[f"{op} {stat} ratio"], 3) for stat in stats)]
        for op in ("search", "recall")
    ]
    return markdown_table(["operation", "commit", "p50 ms", "p95 ms", "CPU p50 ms"], rows)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.capture_speed", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--embedder", nargs="+", choices=("hash", "local"), default=["local", "hash"]
    )
    parser.add_argument("--samples", type=_span, default=None, help="conversations A-B")
    parser.add_argument("--window", type=int, default=WINDOW, help="messages per call")
    parser.add_argument(
        "--prior", type=int, default=PRIOR, help="sessions of each conversation written untimed"
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the timed calls (bench/out/*.txt)"
    )
    parser.add_argument(
        "--embedding",
        action="store_true",
        help="also time the embedder alone on each window's texts, as each path embeds them",
    )
    parser.add_argument("--reads", nargs="+", metavar="DIR", help="checkouts to compare")
    parser.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "bench-reads"))
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--queries", type=int, default=200, help="timed calls per operation")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    parser.add_argument("--child", choices=("build", "time"), help=argparse.SUPPRESS)
    parser.add_argument("--child-dir", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    parser.add_argument("--child-vectors", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _span(text: str) -> tuple[int, int]:
    first, _, last = text.partition("-")
    return int(first), int(last or first)


if __name__ == "__main__":
    raise SystemExit(main())
