"""Markdown notes as documents: how fast ``sync_files`` indexes a notes folder, and what a re-sync
costs when nothing or one file changed.

Two corpora, each copied to a fresh folder and synced into a fresh namespace:

* ``docs``: the project's own docs/ (a few long, structured pages);
* ``daily``: ``--notes`` generated daily notes (``2024-01-01.md`` …), 20-60 lines each with
  headings, bullets and prose, deterministic for a seed.

For each: the first sync (files/s, chunks/s), a re-sync with nothing changed, and a re-sync
after one line of one file changed, with how many texts the embedder was asked for each time
(only the changed chunk should be). Times are wall-clock, best of ``--repeat`` re-syncs.

    python -m bench.notes [--embedder local|hash] [--notes 1000] [--repeat 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from graphmem import Memory, Settings

from .common import OUT_DIR, machine, markdown_table, write_json

ROOT = Path(__file__).resolve().parent.parent

_PEOPLE = ("Ana", "Bob", "Chen", "Dara", "Emeka", "Fatima", "Goran", "Hana", "Ivo", "Jun")
_PROJECTS = ("checkout", "search", "billing", "onboarding", "mobile app", "data pipeline")
_PLACES = ("the Lisbon office", "the café on Rua Augusta", "home", "the library", "the train")
_DOING = (
    "reviewed the {p} design with {a}",
    "fixed a flaky test in {p}",
    "paired with {a} on the {p} migration",
    "wrote the {p} release notes",
    "met {a} and {b} at {w} to plan {p}",
    "read about vector indexes for {p}",
    "gave {a} feedback on the {p} proposal",
)
_THOUGHTS = (
    "I should move the {p} standup to the afternoon; mornings are for deep work.",
    "{a} prefers written proposals over meetings, which suits the {p} work.",
    "The {p} deadline slipped a week because the API review took longer than planned.",
    "Remember to book the dentist before the end of the month.",
    "Running in the morning helps; I ran 5 km before work and felt sharper.",
    "{a} recommended a book on distributed systems; {b} has a copy at {w}.",
)


def daily_note(day: date, rng: random.Random) -> str:
    """One realistic daily note: a title, what was done, thoughts, tasks."""

    def fill(template: str) -> str:
        a, b = rng.sample(_PEOPLE, 2)
        return template.format(a=a, b=b, p=rng.choice(_PROJECTS), w=rng.choice(_PLACES))

    lines = [f"# {day.isoformat()} ({day.strftime('%A')})", "", "## Done", ""]
    lines += [f"- {fill(rng.choice(_DOING))}" for _ in range(rng.randint(3, 10))]
    lines += ["", "## Notes", ""]
    for _ in range(rng.randint(2, 6)):
        lines += [" ".join(fill(rng.choice(_THOUGHTS)) for _ in range(rng.randint(1, 3))), ""]
    lines += ["## Tomorrow", ""]
    lines += [f"- [ ] {fill(rng.choice(_DOING))}" for _ in range(rng.randint(1, 5))]
    return "\n".join(lines) + "\n"


def make_daily(folder: Path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = date(2024, 1, 1)
    for n in range(count):
        day = start + timedelta(days=n)
        (folder / f"{day.isoformat()}.md").write_text(daily_note(day, rng), encoding="utf-8")


def measure(name: str, folder: Path, embedder: str, repeat: int) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="bench-notes-"))
    try:
        with Memory.open(data, settings=Settings(embedder=embedder)) as mem:

            def asked() -> int:
                return mem.stats().embedding_usage.inputs

            files = sum(1 for _ in folder.rglob("*.md"))
            before, start = asked(), time.perf_counter()
            first = mem.sync_files([folder])
            first_s = time.perf_counter() - start
            first_embedded = asked() - before

            unchanged = []
            for _ in range(repeat):
                before, start = asked(), time.perf_counter()
                report = mem.sync_files([folder])
                unchanged.append((time.perf_counter() - start, asked() - before, report))

            victim = sorted(folder.rglob("*.md"))[len(first.added) // 2]
            changed = []
            for n in range(repeat):
                with victim.open("a", encoding="utf-8") as f:
                    f.write(f"\nOne more line, edit {n}.\n")
                before, start = asked(), time.perf_counter()
                report = mem.sync_files([folder])
                changed.append((time.perf_counter() - start, asked() - before, report))
            best_unchanged = min(unchanged, key=lambda x: x[0])
            best_changed = min(changed, key=lambda x: x[0])
            return {
                "corpus": name,
                "embedder": embedder,
                "files": files,
                "bytes": sum(p.stat().st_size for p in folder.rglob("*.md")),
                "chunks": first.chunks,
                "first_sync_s": round(first_s, 3),
                "files_per_s": round(files / first_s, 1),
                "chunks_per_s": round(first.chunks / first_s, 1),
                "first_embedded": first_embedded,
                "resync_unchanged_s": round(best_unchanged[0], 3),
                "resync_unchanged_embedded": best_unchanged[1],
                "resync_unchanged_written": best_unchanged[2].chunks,
                "resync_one_changed_s": round(best_changed[0], 3),
                "resync_one_changed_embedded": best_changed[1],
                "resync_one_changed_written": best_changed[2].chunks,
            }
    finally:
        shutil.rmtree(data, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.notes", description=__doc__)
    parser.add_argument("--embedder", choices=("local", "hash"), default="local")
    parser.add_argument("--notes", type=int, default=1000, help="generated daily notes")
    parser.add_argument("--repeat", type=int, default=3, help="re-syncs timed (best is kept)")
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-notes-src-") as tmp:
        docs = Path(tmp, "docs")
        shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("*.png"))
        daily = Path(tmp, "daily")
        daily.mkdir()
        make_daily(daily, args.notes)
        for name, folder in (("docs/", docs), (f"{args.notes} daily notes", daily)):
            results.append(measure(name, folder, args.embedder, args.repeat))
            print(results[-1], flush=True)
    print(
        markdown_table(
            (
                "corpus",
                "files",
                "chunks",
                "first sync s",
                "files/s",
                "chunks/s",
                "re-sync unchanged s (embedded)",
                "re-sync, one file changed s (embedded / chunks written)",
            ),
            [
                (
                    r["corpus"],
                    r["files"],
                    r["chunks"],
                    r["first_sync_s"],
                    r["files_per_s"],
                    r["chunks_per_s"],
                    f"{r['resync_unchanged_s']} ({r['resync_unchanged_embedded']})",
                    f"{r['resync_one_changed_s']} ({r['resync_one_changed_embedded']} / "
                    f"{r['resync_one_changed_written']})",
                )
                for r in results
            ],
        )
    )
    write_json(
        args.out or OUT_DIR / f"notes-{args.embedder}.json",
        {"machine": machine(), "args": vars(args) | {"out": str(args.out)}, "results": results},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
