"""The secret detector (graphmem's ``sensitive``, which every write and capture runs): how often
ordinary conversation is taken for a secret, and how long adversarial texts take to check.

1. Every LoCoMo turn: a flagged turn is a false positive (LoCoMo's conversations hold no
   credentials). Reports the share flagged per half (conversations 0-4 and 5-9) and overall,
   and lists every flagged turn with what it was taken for.
2. Texts of ``ADVERSARIAL_CHARS`` characters, each one short piece repeated (``ADVERSARIAL``:
   the prefix of each pattern that once cost its length squared, and the cue words): the best
   of three times of ``findings``, the slowest first. Needs no data set.

    python -m bench.secrets [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphmem.sensitive import findings, sensitive

from .common import dataset
from .locomo import _sessions

HALVES = {"conversations 0-4": range(0, 5), "conversations 5-9": range(5, 10)}
#: The length of each adversarial text: twice the longest field a write takes (MAX_TEXT_LENGTH),
#: the size the attack run measured.
ADVERSARIAL_CHARS = 20_000
#: The pieces repeated: the prefixes of detect-secrets' OpenAI, JWT and npm patterns and of
#: graphmem's own token pattern, cue words of the credentials-in-words layer, and a few others.
ADVERSARIAL = (
    "sk-",
    "sk-a",
    "eyJ",
    "eyJ-",
    "//",
    "//a/",
    "://",
    "a://b:",
    "pw:",
    "pw-",
    "password:",
    "token=",
    "api_key=",
    "secret ",
    "code ",
    "pin 1234 ",
    "aws key '",
    "glagent-",
    "xoxb-1-",
    "1 ",
    "a-",
    "hello world ",
)


def adversarial_times() -> list[tuple[str, float]]:
    """(the piece repeated, milliseconds) for each of ``ADVERSARIAL``, the slowest first."""
    findings("warm up: detect-secrets is imported on first use")
    times = []
    for piece in ADVERSARIAL:
        text = (piece * (ADVERSARIAL_CHARS // len(piece) + 1))[:ADVERSARIAL_CHARS]
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            findings(text)
            best = min(best, time.perf_counter() - started)
        times.append((piece, best * 1000))
    return sorted(times, key=lambda row: -row[1])


def flagged_turns(samples: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Every turn the detector flags (sample, dia_id, what, text), and how many turns there are."""
    found: list[dict[str, Any]] = []
    total = 0
    for index, sample in enumerate(samples):
        conv = sample["conversation"]
        for session in _sessions(conv):
            for turn in conv[f"session_{session}"]:
                total += 1
                what = sensitive(turn["text"])
                if what is not None:
                    found.append(
                        {
                            "sample": index,
                            "dia_id": turn["dia_id"],
                            "what": what,
                            "text": turn["text"],
                        }
                    )
    return found, total


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.secrets", description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    args = parser.parse_args(argv)
    times = adversarial_times()
    print(f"| {ADVERSARIAL_CHARS:,} characters of | findings (ms, best of 3) |\n|---|---|")
    print("\n".join(f"| {piece!r} repeated | {ms:.1f} |" for piece, ms in times))
    print()
    folder = dataset("locomo")
    if folder is None:
        return 0
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    rows = []
    report: dict[str, Any] = {"adversarial_ms": dict(times)}
    for name, indexes in {**HALVES, "all": range(len(samples))}.items():
        found, total = flagged_turns([samples[i] for i in indexes])
        report[name] = {"turns": total, "flagged": len(found)}
        rows.append(f"| {name} | {total:,} | {len(found)} | {100 * len(found) / total:.2f}% |")
    everything, _ = flagged_turns(samples)
    report["flagged_turns"] = everything
    print("| LoCoMo | turns | flagged | share |\n|---|---|---|---|")
    print("\n".join(rows))
    print("\nflagged:")
    for item in everything:
        print(f"- conversation {item['sample']} {item['dia_id']} ({item['what']}): {item['text']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
