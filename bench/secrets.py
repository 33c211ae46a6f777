"""How often ordinary conversation is taken for a secret: the secret detector (graphmem's
``sensitive``, which capture uses to skip a message) over every LoCoMo turn.

A flagged turn is a false positive: LoCoMo's conversations hold no credentials. Reports the
share flagged per half (conversations 0-4 and 5-9) and overall, and lists every flagged turn
with what it was taken for.

    python -m bench.secrets [--out PATH]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphmem.sensitive import sensitive

from .common import dataset
from .locomo import _sessions

HALVES = {"conversations 0-4": range(0, 5), "conversations 5-9": range(5, 10)}


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
    folder = dataset("locomo")
    if folder is None:
        return 0
    samples = json.loads((folder / "locomo10.json").read_text(encoding="utf-8"))
    rows = []
    report: dict[str, Any] = {}
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
