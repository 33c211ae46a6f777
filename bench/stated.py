"""What reading stated time costs at write time: the reader alone (µs per text, how many texts
state a time) over LoCoMo's turns, and ``store_many`` ingest (facts/s) with it on and off, with
the hash and the local embedder.

    python -m bench.stated [--turns 2000] [--batch 500] [--out FILE]

Each ingest stores the turns as ``"{speaker}: {text}"`` dated by their session, in batches of
``--batch`` through one ``store_many`` each, into a fresh namespace; on and off alternate twice
per embedder and the better of each is kept (the machine's noise is larger than the cost).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphmem import Memory, Settings
from graphmem.statedtime import stated_time

from .common import OUT_DIR, dataset, machine, make_embedder, markdown_table, write_json
from .locomo import SESSION_DATE_FORMAT, _sessions


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("locomo")
    if folder is None:
        return 0
    turns = _turns(json.loads((folder / "locomo10.json").read_text(encoding="utf-8")))
    reader = _reader(turns)
    print(
        f"reader: {reader['us_per_text']:.1f} µs a text, {reader['stating']} of "
        f"{reader['texts']} texts state a time"
    )
    rows: list[dict[str, Any]] = []
    for name in ("hash", "local"):
        embedder = make_embedder(name)
        chosen = turns[: args.turns]
        best = {on: 0.0 for on in (True, False)}
        for _ in range(2):
            for on in (True, False):
                best[on] = max(best[on], _ingest(chosen, embedder, on, args.batch))
        for on in (True, False):
            rows.append({"embedder": name, "stated_time": on, "facts_per_s": best[on]})
            print(f"{name}, stated time {'on' if on else 'off'}: {best[on]:.0f} facts/s")
    out = {
        "benchmark": "stated-time",
        "machine": machine(),
        "turns": args.turns,
        "batch": args.batch,
        "reader": reader,
        "ingest": rows,
    }
    print(
        markdown_table(
            ["embedder", "stated time", "facts/s"],
            [
                [r["embedder"], "on" if r["stated_time"] else "off", f"{r['facts_per_s']:.0f}"]
                for r in rows
            ],
        )
    )
    write_json(args.out or OUT_DIR / "stated-time.json", out)
    return 0


def _turns(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for sample in samples:
        conv = sample["conversation"]
        for session in _sessions(conv):
            when = datetime.strptime(conv[f"session_{session}_date_time"], SESSION_DATE_FORMAT)
            epoch = when.replace(tzinfo=UTC).timestamp()
            for turn in conv[f"session_{session}"]:
                out.append(
                    {
                        "text": f"{turn['speaker']}: {turn['text']}",
                        "source_date": epoch,
                        "valid_from": epoch,
                        "classify": False,
                    }
                )
    return out


def _reader(turns: list[dict[str, Any]]) -> dict[str, Any]:
    started = time.perf_counter()
    stating = sum(stated_time(t["text"], t["source_date"]) is not None for t in turns)
    seconds = time.perf_counter() - started
    return {"texts": len(turns), "stating": stating, "us_per_text": 1e6 * seconds / len(turns)}


def _ingest(turns: list[dict[str, Any]], embedder: Any, on: bool, batch: int) -> float:
    settings = Settings(track_access=False, read_stated_time=on)
    with (
        tempfile.TemporaryDirectory(prefix="bench-stated-") as tmp,
        Memory.open(Path(tmp), embedder=embedder, settings=settings) as mem,
    ):
        started = time.perf_counter()
        for start in range(0, len(turns), batch):
            mem.store_many(turns[start : start + batch])
        return len(turns) / (time.perf_counter() - started)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.stated", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--turns", type=int, default=2000, help="turns ingested per run")
    parser.add_argument("--batch", type=int, default=500, help="facts per store_many")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
