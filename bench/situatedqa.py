"""SituatedQA (temporal, dev split): does an as-of search return the version true at that date?

Recipe (../shared/bench-data/README.md): for each time-dependent question, store
F_prev = "{question} → {previous answer}" valid from prev_start, then
F_cur = "{question} → {current answer}" valid from cur_start, superseding F_prev. Every
question shares one namespace, so a search can also pick another question's fact. Each QA row
is searched with its plain question and as_of = its date; the gold is the version whose answer
matches the row's answer (rows matching both versions or neither are dropped). Metric:
version accuracy@1 per date_type.

Two scores. Strict (version identity): the top hit must be the gold fact of the queried
question itself. Answer-level: the top hit may also be a fact of a *duplicate* question (same
content words, see question_key: the dataset holds a few paraphrased copies of one question
under different ids, e.g. "... cleveland browns went to playoffs" / "... went to the
playoffs") provided that fact's answer matches the row's answer. Different questions that merely
share an answer ("2018") never count. The strict score stays the headline; the answer-level one
says how many strict errors are only a paraphrase twin answering correctly.

Controls: "latest wins" (the same rows searched at as_of = now, i.e. no time travel);
as-of-now returns F_cur; known_at a moment before F_cur was stored returns F_prev. A fake clock
separates the two writes: every F_prev is stored at t0, every F_cur at t0 + 60 s.

Dates: a start given as a year only means 1 January of that year, a year and month the 1st of
that month. A start missing from the structured field is parsed from its text form
("9 December 1946", "November 2020"). A question whose current start is still unknown is
dropped; an unknown previous start means "valid since ever" (year 1). A question whose
previous version starts after its current one is dropped (contradictory annotation). A row's
date ends its day: a bare year is 31 December 23:59:59 UTC, a full date that day's 23:59:59.

    python -m bench.situatedqa [--embedder hash|local|both] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import re
import string
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from graphmem import Memory, Settings

from .common import (
    OUT_DIR,
    CachingEmbedder,
    FakeClock,
    dataset,
    machine,
    make_embedder,
    markdown_table,
    write_json,
)

#: Start of validity when the previous version's start is unknown: "since ever".
OPEN_START: Final = datetime(1, 1, 1, tzinfo=UTC).timestamp()
#: When the fake clock starts (the first write): after every date in the dataset.
CLOCK_START: Final = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
DATE_TYPES: Final = ("start", "sampled_year", "sampled_date")
_FULL_DATE_FORMATS: Final = (
    "%d %B %Y",
    "%B %d, %Y",
    "%B %d %Y",
    "%d %b %Y",
    "%b %d, %Y",
    "%b %d %Y",
    "%B %Y",
    "%b %Y",
    "%Y",
)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    folder = dataset("situatedqa")
    if folder is None:
        return 0
    raw = [json.loads(line) for line in (folder / "raw.temp.dev.jsonl").open(encoding="utf-8")]
    rows = [json.loads(line) for line in (folder / "qa.temp.dev.jsonl").open(encoding="utf-8")]
    questions, dropped = select_questions(raw, args.limit)
    cases, row_counts = attach_rows(questions, rows)
    print(
        f"{len(questions)} questions stored ({dict(dropped)} dropped); "
        f"{len(cases)} QA rows evaluated ({dict(row_counts)})"
    )
    oracle = oracle_accuracy(questions, cases)
    duplicates = duplicate_questions(questions)
    results = {}
    embedders = ("hash", "local") if args.embedder == "both" else (args.embedder,)
    for name in embedders:
        variants: dict[str, dict[str, Any]] = {name: {}}
        if args.variants:
            variants |= {
                f"{name}, no vector dedup": {"vector_dedup": 1.0001},
                f"{name}, one namespace per question": {"isolated": True},
            }
        for label, options in variants.items():
            started = time.perf_counter()
            results[label] = run(questions, cases, name, duplicates=duplicates, **options)
            results[label]["seconds"] = time.perf_counter() - started
    report = {
        "benchmark": "situatedqa",
        "machine": machine(),
        "config": {"limit": args.limit, "mode": "hybrid"},
        "data": {
            "time_dependent_questions": sum(1 for r in raw if r["is_dependent"]),
            "questions_stored": len(questions),
            "questions_dropped": dict(dropped),
            "start_sources": dict(Counter(s for q in questions for s in q.start_sources)),
            "equal_starts": sum(1 for q in questions if q.prev_start == q.cur_start),
            "duplicate_question_groups": _duplicate_groups(questions, duplicates),
            "rows": dict(row_counts),
            "rows_evaluated": len(cases),
        },
        "oracle_start_date_filter": oracle,
        "results": results,
    }
    print(summary_markdown(report))
    write_json(args.out or OUT_DIR / f"situatedqa-{args.embedder}.json", report)
    return 0


# --------------------------------------------------------------------------------- data


@dataclass
class Question:
    id: int
    text: str
    prev_answers: list[str]
    cur_answers: list[str]
    prev_start: float
    cur_start: float
    start_sources: tuple[str, str]  # how prev_start and cur_start were obtained

    @property
    def prev_text(self) -> str:
        return f"{self.text} → {'; '.join(self.prev_answers)}"

    @property
    def cur_text(self) -> str:
        return f"{self.text} → {'; '.join(self.cur_answers)}"


@dataclass
class Case:
    """One QA row to search: its question, date, date type, which version is gold, and the
    row's own answers (normalised) for the answer-level score."""

    question: Question
    as_of: float
    date_type: str
    gold: str  # "prev" or "cur"
    answers: frozenset[str] = frozenset()


def select_questions(
    raw: Sequence[dict[str, Any]], limit: int | None
) -> tuple[list[Question], Counter[str]]:
    """Time-dependent questions with a usable previous/current timeline (the first listed
    timeline that has both answers and a known current start)."""
    out: list[Question] = []
    dropped: Counter[str] = Counter()
    for r in raw:
        if not r["is_dependent"]:
            continue
        if limit is not None and len(out) >= limit:
            break
        timelines = [t for t in r["timelines"] or [] if t["prev_answers"] and t["cur_answers"]]
        if not timelines:
            dropped["no previous answer"] += 1
            continue
        chosen = None
        for t in timelines:
            cur, cur_source = start_of(t.get("cur_start"), t.get("cur_start_full"))
            if cur is not None:
                chosen = (t, cur, cur_source)
                break
        if chosen is None:
            dropped["current start unknown"] += 1
            continue
        t, cur, cur_source = chosen
        prev, prev_source = start_of(t.get("prev_start"), t.get("prev_start_full"))
        if prev is None:
            prev, prev_source = OPEN_START, "open"
        if prev > cur:
            dropped["previous starts after current"] += 1
            continue
        out.append(
            Question(
                id=r["id"],
                text=r["question"].strip(),
                prev_answers=t["prev_answers"],
                cur_answers=t["cur_answers"],
                prev_start=prev,
                cur_start=cur,
                start_sources=(f"prev:{prev_source}", f"cur:{cur_source}"),
            )
        )
    return out, dropped


def start_of(parts: dict[str, Any] | None, full: str | None) -> tuple[float | None, str]:
    """Epoch of a start given as {year, month, date} (missing parts: the first), else parsed
    from its text; (None, "missing") when neither gives a year."""
    if parts and parts.get("year"):
        moment = datetime(
            int(parts["year"]),
            int(parts.get("month") or 1),
            int(parts.get("date") or 1),
            tzinfo=UTC,
        )
        precision = "day" if parts.get("date") else "month" if parts.get("month") else "year"
        return moment.timestamp(), f"field:{precision}"
    if full:
        text = full.strip().rstrip(".")
        for fmt in _FULL_DATE_FORMATS:
            try:
                return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp(), "text"
            except ValueError:
                continue
    return None, "missing"


def attach_rows(
    questions: Sequence[Question], rows: Sequence[dict[str, Any]]
) -> tuple[list[Case], Counter[str]]:
    """QA rows of the stored questions, each with its as-of time and gold version."""
    by_id = {q.id: q for q in questions}
    cases: list[Case] = []
    counts: Counter[str] = Counter()
    for row in rows:
        q = by_id.get(row["id"])
        if q is None:
            counts["question not stored"] += 1
            continue
        answers = {_normalize(a) for a in row["answer"]}
        prev = bool(answers & {_normalize(a) for a in q.prev_answers})
        cur = bool(answers & {_normalize(a) for a in q.cur_answers})
        if prev == cur:
            counts["matches both versions" if prev else "matches neither version"] += 1
            continue
        counts["evaluated"] += 1
        cases.append(
            Case(
                q,
                as_of(row["date"]),
                row["date_type"],
                "prev" if prev else "cur",
                frozenset(answers),
            )
        )
    return cases, counts


def as_of(date: str) -> float:
    """The end of a row's date: "2015" → 2015-12-31T23:59:59Z; "December 13, 1999" → that
    day's 23:59:59."""
    text = date.strip()
    if re.fullmatch(r"\d{4}", text):
        return datetime(int(text), 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
    day = datetime.strptime(text, "%B %d, %Y").replace(tzinfo=UTC)
    return day.timestamp() + 86_399


def _normalize(answer: str) -> str:
    """SQuAD-style answer normalisation: lower case, no punctuation, articles or extra spaces."""
    text = answer.lower()
    text = "".join(ch for ch in text if ch not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


#: Words that do not tell two questions apart: articles, auxiliaries, prepositions and
#: conjunctions. Question words ("when" vs "where") and every content word ("last", "first",
#: "new", names, numbers) count.
_QUESTION_STOPWORDS: Final = frozenset(
    {
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "will",
        "would",
        "can",
        "could",
    }
)
#: Inflections stripped before comparing (suffix, shortest word it is stripped from).
_SUFFIXES: Final = (("ing", 6), ("ed", 5), ("s", 4))


def question_key(text: str) -> frozenset[str]:
    """A question's content words: lower case, punctuation removed, stopwords dropped, one
    inflection stripped ("episodes" → "episode", "airing" → "air"). Two questions are
    duplicates when their keys are equal: the same content words, so only function words,
    inflection or word order differ."""
    words = "".join(" " if ch in string.punctuation else ch for ch in text.lower()).split()
    out = set()
    for word in words:
        if word in _QUESTION_STOPWORDS:
            continue
        for suffix, shortest in _SUFFIXES:
            if len(word) >= shortest and word.endswith(suffix) and not word.endswith("ss"):
                word = word[: -len(suffix)]
                break
        out.add(word)
    return frozenset(out)


def duplicate_questions(questions: Sequence[Question]) -> dict[int, frozenset[int]]:
    """Each stored question's id → the ids of the other stored questions with the same
    question_key (empty for most). The dataset holds a few paraphrased copies of one
    question under different ids ("... went to playoffs" / "... went to the playoffs")."""
    groups: dict[frozenset[str], list[int]] = defaultdict(list)
    for q in questions:
        groups[question_key(q.text)].append(q.id)
    return {q.id: frozenset(groups[question_key(q.text)]) - {q.id} for q in questions}


def _duplicate_groups(
    questions: Sequence[Question], duplicates: dict[int, frozenset[int]]
) -> list[list[str]]:
    text = {q.id: q.text for q in questions}
    groups = {frozenset({qid, *others}) for qid, others in duplicates.items() if others}
    return sorted(sorted(text[i] for i in g) for g in groups)


# --------------------------------------------------------------------------------- evaluation


def oracle_accuracy(questions: Sequence[Question], cases: Sequence[Case]) -> dict[str, float]:
    """What filtering by start date alone achieves on these versions (no search involved):
    the version whose start is the latest not after as_of. The ceiling for graphmem here."""
    hits: dict[str, list[bool]] = defaultdict(list)
    for c in cases:
        ok = oracle_pick(c) == c.gold
        hits[c.date_type].append(ok)
        hits["overall"].append(ok)
    return {k: sum(v) / len(v) for k, v in _ordered(hits).items()}


def oracle_pick(case: Case) -> str | None:
    """The version valid at the case's date by start dates alone (None: neither yet)."""
    q = case.question
    return "cur" if case.as_of >= q.cur_start else "prev" if case.as_of >= q.prev_start else None


def run(
    questions: Sequence[Question],
    cases: Sequence[Case],
    embedder_name: str,
    *,
    duplicates: dict[int, frozenset[int]] | None = None,
    isolated: bool = False,
    vector_dedup: float = 0.95,
) -> dict[str, Any]:
    """Store both versions of every question, then search every row.

    All questions share one namespace, or with ``isolated`` each has its own (so that only
    the time logic, not retrieval among similar questions, decides). ``duplicates`` (see
    duplicate_questions) widens the answer-level score; the strict score ignores it."""
    clock = FakeClock(CLOCK_START)
    embedder = CachingEmbedder(make_embedder(embedder_name))
    settings = Settings(track_access=False, vector_dedup_threshold=vector_dedup)
    groups = [[q] for q in questions] if isolated else [list(questions)]
    by_question: dict[int, list[Case]] = defaultdict(list)
    for c in cases:
        by_question[c.question.id].append(c)
    tally = Tally(duplicates=duplicates or {})
    with tempfile.TemporaryDirectory(prefix="bench-situatedqa-") as tmp:
        for n, group in enumerate(groups):
            memory = Memory.open(
                tmp, namespace=f"situatedqa-{n}", embedder=embedder, settings=settings, clock=clock
            )
            try:
                group_cases = [c for q in group for c in by_question[q.id]]
                run_group(memory, clock, group, group_cases, tally)
            finally:
                memory.close()
    return {
        "embedder": embedder_name,
        "namespaces": len(groups),
        "vector_dedup_threshold": vector_dedup,
        **tally.summary(),
    }


@dataclass
class Tally:
    """Outcomes accumulated over the namespaces of a run."""

    duplicates: dict[int, frozenset[int]] = field(default_factory=dict)
    as_of: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    latest: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    as_of_answer: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    latest_answer: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))
    other_question_hits: list[dict[str, Any]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    now_current: list[bool] = field(default_factory=list)
    before_previous: list[bool] = field(default_factory=list)
    history: list[bool] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {
            "store_actions": dict(self.actions),
            "as_of_accuracy": _rates(self.as_of),
            "as_of_rows": {k: len(v) for k, v in _ordered(self.as_of).items()},
            "as_of_answer_accuracy": _rates(self.as_of_answer),
            "as_of_errors": dict(self.errors),
            "errors_where_oracle_is_right": self.disagreements,
            "as_of_other_question_hits": self.other_question_hits,
            "latest_wins_accuracy": _rates(self.latest),
            "latest_wins_answer_accuracy": _rates(self.latest_answer),
            "as_of_now_returns_current": _share(self.now_current),
            "known_before_current_returns_previous": _share(self.before_previous),
            "history_is_prev_then_cur": _share(self.history),
        }


def run_group(
    memory: Memory,
    clock: FakeClock,
    questions: Sequence[Question],
    cases: Sequence[Case],
    tally: Tally,
) -> None:
    """Store F_prev for every question (one batch), a minute later F_cur (one batch), then
    search each case and the controls."""
    prev_results = memory.store_many(
        [
            {"text": q.prev_text, "valid_from": q.prev_start, "tags": ["situatedqa"]}
            for q in questions
        ]
    )
    prev_stored_at = clock.now
    clock.advance(60)
    cur_results = memory.store_many(
        [
            {
                "text": q.cur_text,
                "valid_from": q.cur_start,
                "supersedes": r.fact.id,
                "tags": ["situatedqa"],
            }
            for q, r in zip(questions, prev_results, strict=True)
            if r.fact is not None
        ]
    )
    clock.advance(60)
    ids = {}
    for q, old, new in zip(questions, prev_results, cur_results, strict=True):
        assert old.fact is not None and new.fact is not None
        ids[q.id] = {"prev": old.fact.id, "cur": new.fact.id}
    tally.actions.update(r.action for r in [*prev_results, *cur_results])
    texts = {r.fact.id: r.fact.text for r in [*prev_results, *cur_results] if r.fact}
    # Which question and version each stored fact is, for the answer-level score.
    owner = {fid: (q, version) for q in questions for version, fid in ids[q.id].items()}

    def top(query: str, **scope: Any) -> str | None:
        hits = memory.search(query, limit=1, mode="hybrid", **scope)
        return hits[0].fact.id if hits else None

    def answer_ok(c: Case, got: str | None) -> bool:
        """The gold version, or a duplicate question's fact giving the row's answer."""
        if got == ids[c.question.id][c.gold]:
            return True
        if got not in owner:
            return False
        q, version = owner[got]
        answers = q.prev_answers if version == "prev" else q.cur_answers
        return q.id in tally.duplicates.get(c.question.id, ()) and bool(
            c.answers & {_normalize(a) for a in answers}
        )

    for c in cases:
        versions = ids[c.question.id]
        got = top(c.question.text, as_of=c.as_of)
        ok = got == versions[c.gold]
        _add(tally.as_of, c.date_type, ok)
        _add(tally.as_of_answer, c.date_type, answer_ok(c, got))
        if not ok:
            oracle_ok = oracle_pick(c) == c.gold
            kind = _error_kind(got, versions)
            tally.errors[kind + ("" if oracle_ok else " (start-date oracle also wrong)")] += 1
            if oracle_ok and len(tally.disagreements) < 25:
                tally.disagreements.append(_describe(c, got, versions, texts))
            if got in owner and got not in versions.values():
                other = owner[got][0]
                tally.other_question_hits.append(
                    {
                        **_describe(c, got, versions, texts),
                        "row_answers": sorted(c.answers),
                        "oracle_right": oracle_ok,
                        "duplicate_question": other.id in tally.duplicates.get(c.question.id, ()),
                        "answer_level_hit": answer_ok(c, got),
                    }
                )
        latest = top(c.question.text)
        _add(tally.latest, c.date_type, latest == versions[c.gold])
        _add(tally.latest_answer, c.date_type, answer_ok(c, latest))
    for q in questions:
        tally.now_current.append(top(q.text) == ids[q.id]["cur"])
        tally.before_previous.append(top(q.text, known_at=prev_stored_at + 30) == ids[q.id]["prev"])
        chain = [f.id for f in memory.history(ids[q.id]["cur"])]
        tally.history.append(chain == [ids[q.id]["prev"], ids[q.id]["cur"]])


def _add(hits: dict[str, list[bool]], date_type: str, ok: bool) -> None:
    hits[date_type].append(ok)
    hits["overall"].append(ok)


def _rates(hits: dict[str, list[bool]]) -> dict[str, float]:
    return {k: sum(v) / len(v) for k, v in _ordered(hits).items()}


def _share(values: Sequence[bool]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _describe(
    case: Case, got: str | None, versions: dict[str, str], texts: dict[str, str]
) -> dict[str, Any]:
    return {
        "question": case.question.text,
        "as_of": datetime.fromtimestamp(case.as_of, UTC).isoformat(),
        "gold": case.gold,
        "got": None if got is None else _error_kind(got, versions),
        "got_text": None if got is None else texts[got],
        "prev_start": datetime.fromtimestamp(case.question.prev_start, UTC).isoformat(),
        "cur_start": datetime.fromtimestamp(case.question.cur_start, UTC).isoformat(),
    }


def _error_kind(got: str | None, versions: dict[str, str]) -> str:
    if got is None:
        return "no hit (no version valid at that date)"
    if got in versions.values():
        return "other version of the question"
    return "another question's fact"


def _ordered(hits: dict[str, list[bool]]) -> dict[str, list[bool]]:
    order = [*DATE_TYPES, "overall"]
    return {k: hits[k] for k in sorted(hits, key=lambda k: order.index(k) if k in order else 99)}


# --------------------------------------------------------------------------------- report


def summary_markdown(report: dict[str, Any]) -> str:
    """Accuracy@1 by date type (rows: the start-date oracle, then each run, strict and
    answer-level), then controls."""
    results: dict[str, dict[str, Any]] = report["results"]
    oracle: dict[str, float] = report["oracle_start_date_filter"]
    types = list(next(iter(results.values()))["as_of_rows"].items())
    headers = ["as-of accuracy@1", *(f"{t} ({n})" for t, n in types), "latest wins (overall)"]
    rows: list[list[Any]] = [["start-date oracle", *(oracle[t] for t, _ in types), ""]]
    for name, r in results.items():
        rows.append(
            [
                name,
                *(r["as_of_accuracy"][t] for t, _ in types),
                r["latest_wins_accuracy"]["overall"],
            ]
        )
        rows.append(
            [
                f"{name} (answer-level)",
                *(r["as_of_answer_accuracy"][t] for t, _ in types),
                r["latest_wins_answer_accuracy"]["overall"],
            ]
        )
    controls = markdown_table(
        [
            "run",
            "as-of-now → F_cur",
            "known_at before F_cur → F_prev",
            "history prev→cur",
            "as-of errors",
        ],
        [
            [
                name,
                r["as_of_now_returns_current"],
                r["known_before_current_returns_previous"],
                r["history_is_prev_then_cur"],
                json.dumps(r["as_of_errors"]),
            ]
            for name, r in results.items()
        ],
    )
    return "\n\n".join([markdown_table(headers, rows), controls])


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.situatedqa", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--embedder", choices=("hash", "local", "both"), default="both")
    parser.add_argument(
        "--limit", type=int, default=None, help="first N time-dependent questions only"
    )
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also run without vector dedup, and with one namespace per question",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON output path")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
