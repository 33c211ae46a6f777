"""Shared pieces of the benchmark harnesses: data location, machine facts, metrics, output."""

from __future__ import annotations

import cProfile
import io
import json
import math
import os
import platform
import pstats
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import numpy as np

from devtools.cluster import Postgres
from graphmem import Settings
from graphmem.models import Vectors
from graphmem.vectors.embedders import Embedder, create_embedder

ROOT: Final = Path(__file__).resolve().parents[1]
#: Public datasets live next to the project, never inside it (see their README).
BENCH_DATA: Final = ROOT.parent / "shared" / "bench-data"
OUT_DIR: Final = ROOT / "bench" / "out"


def dataset(name: str) -> Path | None:
    """The dataset folder ``name`` under the shared bench data, or None (with a message)."""
    path = BENCH_DATA / name
    if not path.is_dir():
        print(f"skipped: {path} is absent (the public bench data lives in ../shared/bench-data)")
        return None
    return path


def make_embedder(name: str) -> Embedder:
    """A graphmem embedder by name ("local" or "hash"), with default settings."""
    return create_embedder(name, Settings())


class CachingEmbedder:
    """Wraps an embedder and remembers every text it embedded.

    Quality benches search the same questions under many settings and store the same turns
    in several variants; embedding each text once keeps the runs short. Never used for speed.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.meter = inner.meter
        self._memo: dict[str, Vectors] = {}

    def remember(self, texts: Sequence[str], vectors: Vectors) -> None:
        """Vectors computed earlier (by the same model) for ``texts``."""
        self._memo.update(zip(texts, vectors, strict=True))

    def embed(self, texts: Sequence[str]) -> Vectors:
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if todo:
            for text, vector in zip(todo, self.inner.embed(todo), strict=True):
                self._memo[text] = vector
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._memo[text]
        return out


class FakeClock:
    """A settable clock for Memory.open(clock=...): epoch seconds that move only when told."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


# --------------------------------------------------------------------------------- metrics


def recall_frac(ranked: Sequence[frozenset[str]], gold: frozenset[str], k: int) -> float:
    """Share of the gold items found in the top ``k`` results (each result covers a set)."""
    found = set().union(*ranked[:k]) & gold
    return len(found) / len(gold)


def recall_all(ranked: Sequence[frozenset[str]], gold: frozenset[str], k: int) -> float:
    """1.0 when every gold item is in the top ``k``, else 0.0."""
    return float(gold <= set().union(*ranked[:k]))


def ndcg(ranked: Sequence[frozenset[str]], gold: frozenset[str], k: int) -> float:
    """Binary-relevance NDCG@k; a result's gain is the number of new gold items it covers."""
    seen: set[str] = set()
    dcg = 0.0
    for i, items in enumerate(ranked[:k]):
        new = (items & gold) - seen
        seen |= new
        dcg += len(new) / math.log2(i + 2)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else math.nan


def latency(call: Callable[[Any], Any], inputs: Sequence[Any], warmup: int) -> dict[str, float]:
    """``call`` on each of ``inputs``: the first ``warmup`` untimed, then p50/p95/mean in ms."""
    for item in inputs[:warmup]:
        call(item)
    times = []
    for item in inputs[warmup:]:
        began = time.perf_counter()
        call(item)
        times.append(1000 * (time.perf_counter() - began))
    return {
        "p50_ms": percentile(times, 50),
        "p95_ms": percentile(times, 95),
        "mean_ms": sum(times) / len(times),
        "n": len(times),
    }


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else math.nan


# --------------------------------------------------------------------------------- output


def machine() -> dict[str, Any]:
    """Where and when a run happened, and with which code and libraries."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for package in ("lancedb", "onnxruntime", "numpy", "pyarrow", "tokenizers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    versions["sqlite"] = sqlite3.sqlite_version
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "cpu": cpu,
        # 1/5/15-minute load at the end of the run (this run included): > cores means the
        # run shared the CPU with other work.
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "worktree_dirty": bool(_git("status", "--porcelain", "--", "graphmem")),
        "versions": versions,
        "command": "python -m " + " ".join([_module_name(), *sys.argv[1:]]),
    }


@contextmanager
def patched(module: Any, name: str, value: Any) -> Iterator[None]:
    """``module.name`` set to ``value`` inside the block (bench sweeps of tuning constants)."""
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "n/a" if math.isnan(v) else f"{v:.3f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def process_memory_mb(pid: int) -> dict[str, float]:
    """A process's memory in MiB: resident now (VmRSS) and at its peak (VmHWM), and of what is
    resident now, its own heap (Anonymous) and its proportional share (Pss).

    VmRSS counts a page of the database file once per connection that maps it (each reader
    thread's SQLite connection maps the file, see graphmem/storage/sqlite/database.py), so with many threads it
    overstates memory use; Pss counts every page once.
    """
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    rollup = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    )
    return {
        **{name: int(status[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM")},
        **{name: int(rollup[name].split()[0]) / 1024 for name in ("Anonymous", "Pss")},
    }


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _module_name() -> str:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec.name if spec is not None else Path(sys.argv[0]).stem


@contextmanager
def store(choice: str) -> Iterator[str | None]:
    """The store a bench runs on, from its ``--store`` option: ``sqlite`` (None: files in the
    bench's directory), ``postgresql`` (a throwaway server on loopback, removed afterwards),
    or a ``postgresql://`` URL."""
    if choice == "sqlite":
        yield None
    elif choice == "postgresql":
        server = Postgres().start()
        try:
            yield server.url
        finally:
            server.remove()
    else:
        yield choice


def lend_nothing(
    store: Any, matched: Any, relevance: Mapping[str, float], *_: Any, **__: Any
) -> dict[str, float]:
    """graphmem.windows.lend with no window lending: for runs without windows."""
    return dict(relevance)


def session_any(ranked: Sequence[frozenset[str]], gold: frozenset[str], k: int) -> float:
    """1.0 when a session holding an evidence turn is among the first ``k`` distinct sessions of
    the ranked turns ("D12:3" is of session "D12"): the session-level recall that published
    LoCoMo retrievers report."""
    sessions: list[str] = []
    for turns in ranked:
        for s in sorted({t.partition(":")[0] for t in turns}):
            if s not in sessions:
                sessions.append(s)
        if len(sessions) >= k:
            break
    return float(bool({t.partition(":")[0] for t in gold} & set(sessions[:k])))


def profile_text(profiler: cProfile.Profile, top: int) -> str:
    """A profile's ``top`` functions by own time, then by cumulative time, as pstats prints
    them."""
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()
