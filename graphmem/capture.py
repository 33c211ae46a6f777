"""Auto-capture: a conversation kept as turns, with the facts worth knowing drawn on top.

``Memory.capture`` takes OpenAI-style chat messages (``{"role", "content"}``) and reads each
``user`` and ``assistant`` message (:func:`plan`):

1. recalled ``<memory-context>`` blocks and fenced code are removed, so memory never captures
   its own recall or pasted code;
2. a message holding a secret anywhere (:mod:`graphmem.sensitive`) is skipped whole: nothing of
   it is kept in any form;
3. with ``keep="conversation"`` (the default), the message is kept as a **turn** of the
   capture's episode, cut into parts of about a document chunk's size when long
   (:func:`turn_parts`): searchable, in the episode's windows of turns, dated by the episode,
   never deduplicated nor classified against other facts (a turn is an event);
4. each sentence a trigger marks as memorable, and not a question, becomes a **fact** with a
   category and, where a pattern fits, an entity, key and value (:func:`extract`), written
   through the rules (dedup, supersession) and linked PART_OF the turn it came from (origin
   ``capture``). A fact that is the whole message stands for the turn too: it is not stored
   twice, unless the rules do not write it (a repeat, a retraction), and then the turn is
   kept on its own. Facts are drawn only from messages of at least ``MIN_CHARS`` and at most
   ``capture_max_chars`` characters.

Everything is written in one ``store_many`` batch (one embedding pass, one classification,
one transaction). The results follow the messages: each message's turn (or a SKIP saying why
nothing of it was kept), then its facts.

With the LLM classifier, the chat model draws the facts instead of the triggers, in the one
request that classifies them (:func:`graphmem.classify.draw`): :func:`plan` is given what it
drew, and each drawn fact takes a trigger fact's place (linked to its turn, standing for it
when it is the whole message). Only what a plan's ``said`` holds is ever sent: never a message
skipped for a secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from . import documents
from .errors import InvalidInput
from .jsonform import json_fields
from .limits import MAX_BATCH, MAX_CAPTURE_MESSAGES, MAX_FIELD_LENGTH
from .models import (
    CAPTURED_ROLES,
    DEFAULT_KEEP,
    KEEPS,
    ROLES,
    TURN_SOURCE,
    Fact,
    FactKind,
    Keep,
    StoreResult,
    Verdict,
)
from .sensitive import sensitive
from .tagging import detect_category

if TYPE_CHECKING:
    from .classify import Drawn

CaptureAction = Literal["ADD", "UPDATE", "DELETE", "NOOP", "SKIP"]
#: Shortest message, and shortest sentence, worth reading.
MIN_CHARS: Final = 10
#: Longest value an extracted entity/key/value may have; a longer one is not extracted.
MAX_VALUE_CHARS: Final = 200
#: Longest turn part, in characters: a document chunk's size (about 400 tokens).
TURN_PART_CHARS: Final = documents.CHUNK_TOKENS * documents.CHARS_PER_TOKEN

_BLOCKS = re.compile(r"<memory-context>.*?(</memory-context>|$)|```.*?(```|$)", re.I | re.S)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")

#: What marks a sentence as memorable: a preference, decision, convention, personal detail,
#: contact, "remember…", or a retraction such as "no longer".
_TRIGGERS: Final = re.compile(
    r"\b(?:remember|don'?t forget|note that|keep in mind|prefers?|preferred|favou?rite"
    r"|(?:i|we|you|user)\s+(?:really\s+|also\s+|do\s+not\s+|don'?t\s+|never\s+)?"
    r"(?:like|love|hate|dislike|enjoy|want|need|use|avoid)s?"
    r"|decided|decision|chose|chosen|will use|going with|agreed|switch(?:ed)? to"
    r"|always|never|important|must"
    r"|is called|named|call me|born|birthday|lives?|living|moved|works?|working"
    r"|email|phone|address|allergic"
    r"|forget|no longer|anymore|not true)\b"
    r"|\bmy\s+[\w -]{1,40}?\s+(?:is|are|was)\b|\byour\s+[\w -]{1,40}?\s+(?:is|are|was)\b"
    r"|(?<![\w.+-])[\w.+-]{1,64}@[\w-]{1,63}\.[\w.]{1,253}|\+\d[\d\s().-]{7,}\d",
    re.I,
)

#: The most characters of fillers a value may end with that are cut before its length is
#: judged: past it the fillers' pattern, tried at each word of a long run, would cost the run's
#: length squared.
FILLER_ROOM: Final = 200
_FILLERS = re.compile(
    r"(?:\s+(?:now|these days|nowadays|at the moment|currently|anymore|too|as well|recently"
    r"|yesterday|today|(?:last|this|next) (?:year|month|week)|in \d{4}))+$",
    re.I,
)
_QUOTES: Final = "\"'\u201c\u201d\u2018\u2019"  # straight and curly quotes
_NOT_NAMES: Final = frozenset(
    {
        "it",
        "that",
        "there",
        "here",
        "what",
        "who",
        "let",
        "he",
        "she",
        "this",
        "where",
        "how",
        "today",
        "everyone",
    }
)


@dataclass(frozen=True, slots=True)
class Message:
    """A validated chat message: its role and its text."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Entry:
    """What capture means to do with a turn part or a sentence of message number ``message``:
    write ``Plan.items[item]`` (a ``kind`` turn or fact), or skip it (``item`` None, ``reason``
    says why; ``text`` None when a whole message is skipped)."""

    kind: FactKind
    message: int
    role: str
    text: str | None
    item: int | None
    reason: str = ""


@dataclass(slots=True)
class Plan:
    """A capture's writes: ``items`` for ``store_many``, in order, and one entry per result.

    With turns kept, ``chained`` lists the items that make up the episode, in order (its turns,
    and the whole-message facts standing for theirs); ``drawn`` maps each fact's item to the
    turn item it was drawn from; ``standins`` maps a whole-message fact's item to the turn
    written in its place when the rules do not write the fact (a repeat, a retraction). Without
    turns, ``chained`` is None and every new fact joins the episode, as ``store_many``'s do.

    ``said`` holds what each message read said (its text once recalled context and code are
    removed), by message number: what an LLM may draw facts from. A message skipped for a
    secret is never in it. ``verdicts`` holds, by item, the verdicts of the facts a chat model
    drew (see :func:`plan`)."""

    items: list[dict[str, Any]]
    entries: list[Entry]
    chained: list[int] | None = None
    drawn: dict[int, int] = field(default_factory=dict)
    standins: dict[int, dict[str, Any]] = field(default_factory=dict)
    said: dict[int, Message] = field(default_factory=dict)
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    #: Filled by the write: the standins validated, and the results of those written.
    parsed: dict[int, Any] = field(default_factory=dict)
    written: dict[int, StoreResult] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CaptureResult:
    """What capture did with a turn or a sentence: ADD, UPDATE, DELETE or NOOP as the write path
    decided, or SKIP (not stored, ``reason`` says why). ``kind`` says whether it is a ``turn``
    (a message, or a part of a long one, kept as said) or a ``fact`` drawn from one. ``fact``
    is the fact stored, repeated (NOOP) or retracted (DELETE); ``message`` the index of the
    message it came from; ``text`` the turn's or the sentence's text (None when a whole
    message was skipped, so a secret is never repeated); ``turn_id`` the turn a fact was drawn
    from (None for a turn, for a fact that is the whole message and so stands for its turn,
    and without turns)."""

    action: CaptureAction
    fact: Fact | None
    reason: str
    message: int
    role: str
    text: str | None
    target_ids: tuple[str, ...] = ()
    kind: FactKind = "fact"
    turn_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # The JSON lists ``kind`` beside ``action``; as a field with a default it comes last.
        return {"action": self.action, "kind": self.kind, **json_fields(self)}


def parse_messages(messages: Any) -> list[Message]:
    """Validated messages; InvalidInput (naming the message) for anything that is not a list of
    ``{role, content}`` objects with a known role and text content. Content may also be a list
    of parts, whose ``text`` parts are read."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidInput("messages must be a list of {role, content} objects", field="messages")
    if len(messages) > MAX_CAPTURE_MESSAGES:
        raise InvalidInput(
            f"at most {MAX_CAPTURE_MESSAGES} messages per capture, got {len(messages)}",
            field="messages",
        )
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InvalidInput(
                f"expected a {{role, content}} object, got {type(m).__name__}", index=i
            )
        role = m.get("role")
        if not isinstance(role, str) or role.lower() not in ROLES:
            raise InvalidInput(
                f"unknown role {role!r}; use one of {', '.join(ROLES)}", field="role", index=i
            )
        if "content" not in m:
            raise InvalidInput("a message needs content", field="content", index=i)
        out.append(Message(role.lower(), _text(m["content"], i)))
    return out


def plan(
    messages: Sequence[Message],
    *,
    keep: Keep = DEFAULT_KEEP,
    max_chars: int,
    turn_decay_class: str = "turn",
    drawn: Sequence[Drawn] | None = None,
) -> Plan:
    """What capturing ``messages`` writes (see the module's steps). ``drawn``: the facts a chat
    model drew from them (:func:`graphmem.classify.draw`), written in place of the trigger
    facts, each from its message, with its verdict. InvalidInput for an unknown ``keep``, or
    for more turns and facts than one batch holds."""
    if keep not in KEEPS:
        raise InvalidInput(f"unknown keep {keep!r}; use conversation or facts", field="keep")
    out = Plan([], [], [] if keep == "conversation" else None)
    for i, m in enumerate(messages):
        given = None if drawn is None else [d for d in drawn if d.message == i]
        _plan_message(out, i, m, max_chars, turn_decay_class, given)
    if len(out.items) > MAX_BATCH:
        raise InvalidInput(
            f"a capture writes at most {MAX_BATCH} turns and facts, these messages make "
            f"{len(out.items)}",
            field="messages",
        )
    return out


def turn_parts(text: str, limit: int = TURN_PART_CHARS) -> list[str]:
    """``text`` cut into parts of at most ``limit`` characters: at line ends, else at sentence
    ends, else at spaces, as a document is chunked; ``[text]`` when it fits."""
    if len(text) <= limit:
        return [text]
    pieces: list[tuple[str, str]] = []  # (text, what joins it to the piece before)
    for line in text.splitlines():
        joiner = "\n"
        for sentence in _SENTENCES.split(line) if len(line) > limit else [line]:
            while len(sentence) > limit:
                cut = sentence.rfind(" ", limit // 2, limit)
                cut = cut if cut > 0 else limit
                pieces.append((sentence[:cut].strip(), joiner))
                sentence, joiner = sentence[cut:], " "
            pieces.append((sentence.strip(), joiner))
            joiner = " "
    parts: list[str] = []
    current = ""
    for piece, joiner in pieces:
        if not piece:
            continue
        if current and len(current) + 1 + len(piece) > limit:
            parts.append(current)
            current = piece
        else:
            current = f"{current}{joiner}{piece}" if current else piece
    if current:
        parts.append(current)
    return parts


def extract(sentence: str, role: str) -> dict[str, str]:
    """Entity, key and value (and ``why``) the sentence states, when a pattern fits; else {}.

    The user's first person ("I", "my") and, in the assistant's words, the second person
    ("you", "your") are the entity ``user``: "My birthday is Nov 13" is user / birthday /
    Nov 13. So the entity/key rules can supersede "My favourite editor is vim" with "My
    favourite editor is helix".
    """
    s = sentence.strip().rstrip(".!;").strip()
    me, my, i_am = (
        ("i", "my", r"(?:i am|i'm)") if role == "user" else ("you", "your", r"(?:you are|you're)")
    )
    # (regex, key, entity): with a key, the groups are (value); without one, (key, value) or,
    # without an entity either, (entity, key, value). Only names must be capitalised.
    patterns: list[tuple[str, str | None, str | None]] = [
        (rf"\b(?:{i_am} called|call me|{my} name'?s) (.+)", "name", "user"),
        (
            rf"\b{me}(?: now)? (?:live|{'am' if role == 'user' else 'are'} living) in (.+)",
            "location",
            "user",
        ),
        (rf"\b{me}(?: have|'ve)? (?:just )?moved to (.+)", "location", "user"),
        (rf"\b{i_am} (?:based|located) in (.+)", "location", "user"),
        (rf"\b{me} (?:now )?work (?:at|for) (.+)", "employer", "user"),
        (rf"\b{me} work as an? (.+)", "occupation", "user"),
        (rf"\b{me} was born (?:on|in) (.+)", "born", "user"),
        (
            rf"\b{my} ((?:[\w-]+ ){{0,2}}[\w-]+) (?:is|are|was) (?:called |named )?(.+)",
            None,
            "user",
        ),
        (r"\b(?:the )?user'?s ((?:[\w-]+ ){0,2}[\w-]+) (?:is|are|was) (.+)", None, "user"),
        (
            r"\b([A-Z][\w-]{1,40}(?: [A-Z][\w-]{1,40})?)'s ((?i:(?:[\w-]+ ){0,2}[\w-]+ (?:is|are|was))) (.+)",
            None,
            None,
        ),
        (
            r"\b(always|never) ((?:use|do|write|put|run|commit|deploy|add|push|call|name)\b.+)",
            None,
            "convention",
        ),
    ]
    for regex, key, entity in patterns:
        m = re.search(regex, s, 0 if entity is None else re.I)
        if m is None:
            continue
        if entity == "convention":
            fields = {"entity": "convention", "key": _key(m.group(2)), "value": m.group(1).lower()}
        elif key is not None:
            fields = {"entity": "user", "key": key, "value": m.group(1)}
        elif entity == "user":
            fields = {"entity": "user", "key": _key(m.group(1)), "value": m.group(2)}
        else:
            if m.group(1).lower() in _NOT_NAMES:
                continue
            key_words = re.sub(r"\s+(?:is|are|was)$", "", m.group(2), flags=re.I)
            fields = {"entity": m.group(1), "key": _key(key_words), "value": m.group(3)}
        value = _value(fields["value"])
        if value and fields["key"] and len(fields["key"]) <= 60:
            return {**fields, "value": value}
    decision = re.search(
        r"\b(?:we|i|you)(?: have|'ve)? (?:decided|chose|agreed|are going|'re going|will)"
        r" (?:to use|to go with|on|with|use) (.+?)(?:,? because (.+))?$",
        s,
        re.I,
    )
    if decision is not None and (value := _value(decision.group(1))):
        out = {"entity": "decision", "value": value}
        if decision.group(2):
            out["why"] = decision.group(2).strip()[:MAX_FIELD_LENGTH]
        return out
    if re.search(
        rf"\b{me} (?:really |also |strongly |do not |don'?t )?(?:prefer|like|love|hate"
        r"|dislike|enjoy|want|need|avoid)s?\b",
        s,
        re.I,
    ):
        return {"entity": "user"}
    return {}


def _plan_message(
    out: Plan,
    index: int,
    m: Message,
    max_chars: int,
    decay_class: str,
    drawn: Sequence[Drawn] | None,
) -> None:
    """Add what capture keeps of message number ``index`` to ``out``: its turn parts (when turns
    are kept) and the facts its sentences state (or those ``drawn`` from it), or one skip
    saying why nothing is kept. The skip of a message holding a secret does not repeat its
    text. Each trigger fact's category comes from fast regexes
    (:func:`graphmem.tagging.detect_category`)."""

    def skip(reason: str, kind: FactKind = "turn") -> None:
        out.entries.append(Entry(kind, index, m.role, None, None, reason))

    if m.role not in CAPTURED_ROLES:
        return skip(f"{m.role} messages are not captured")
    text = _BLOCKS.sub(" ", m.content).strip()
    keep_turns = out.chained is not None
    if len(text) > max_chars and not keep_turns:  # nothing of it is stored: read no further
        return skip(f"longer than {max_chars} characters (capture_max_chars)")
    if (what := sensitive(m.content)) is not None:
        return skip(f"sensitive content ({what}); nothing of this message is stored")
    if not text:
        return skip("no text once recalled context and code are removed")
    if len(text) < MIN_CHARS and not keep_turns:
        return skip(f"shorter than {MIN_CHARS} characters")
    out.said[index] = Message(m.role, text)
    if drawn is not None:
        facts = [{"category": detect_category(d.fields["text"]), **d.fields} for d in drawn]
    elif MIN_CHARS <= len(text) <= max_chars:
        facts = [
            {"text": sentence, "category": detect_category(sentence), **extract(sentence, m.role)}
            for sentence in _memorable(text)
        ]
    else:
        facts = []
    parts = turn_parts(text) if keep_turns else []
    whole = next(
        (k for k, f in enumerate(facts) if len(parts) == 1 and _same(f["text"], text)), None
    )
    turns: list[int] = []
    for part in [] if whole is not None else parts:
        turns.append(len(out.items))
        out.items.append(_turn_item(part, m.role, decay_class))
        out.entries.append(Entry("turn", index, m.role, part, turns[-1]))
    first = len(out.items)
    if whole is not None:  # it stands for the turn, unless the rules do not write it
        out.standins[first + whole] = _turn_item(text, m.role, decay_class)
        turns.append(first + whole)
    for k, fact in enumerate(facts):
        out.items.append({**fact, "source": f"capture:{m.role}"})
        out.entries.append(Entry("fact", index, m.role, fact["text"], first + k))
        if drawn is not None:
            out.verdicts[first + k] = drawn[k].verdict
    for k, fact in enumerate(facts):
        if k != whole and turns:
            out.drawn[first + k] = next(
                (t for t in turns if fact["text"] in out.items[t]["text"]), turns[0]
            )
    if out.chained is not None:
        out.chained.extend(turns)
    if not facts and not turns:
        skip(
            f"shorter than {MIN_CHARS} characters"
            if len(text) < MIN_CHARS
            else f"longer than {max_chars} characters (capture_max_chars)"
            if len(text) > max_chars
            else "nothing memorable (no trigger in any sentence)"
            if drawn is None
            else "the chat model drew no fact from it",
            "fact",
        )
    return None


def _turn_item(text: str, role: str, decay_class: str) -> dict[str, Any]:
    """A turn's write: never a repeat of anything, never classified, linked only in its
    episode (see :func:`plan`)."""
    return {
        "text": text,
        "source": f"{TURN_SOURCE}{role}",
        "decay_class": decay_class,
        "classify": False,
        "dedup": False,
        "autolink": False,
        "entity_links": False,
    }


def _memorable(text: str) -> list[str]:
    """The sentences of ``text`` a trigger marks as memorable, questions left out."""
    out = []
    for raw in _SENTENCES.split(text):
        sentence = _BULLET.sub("", raw).strip()
        if len(sentence) >= MIN_CHARS and not sentence.endswith("?") and _TRIGGERS.search(sentence):
            out.append(sentence)
    return out


def _same(sentence: str, text: str) -> bool:
    """Whether a sentence is the whole of a message, spacing and case aside."""
    return " ".join(sentence.split()).casefold() == " ".join(text.split()).casefold()


def _text(content: Any, index: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                if not isinstance(part.get("text"), str):
                    raise InvalidInput(
                        "a text part needs a text string", field="content", index=index
                    )
                parts.append(part["text"])
        return "\n".join(parts)
    raise InvalidInput(
        f"content must be text or a list of parts, got {type(content).__name__}",
        field="content",
        index=index,
    )


def _key(words: str) -> str:
    return re.sub(r"[^\w]+", "_", words.strip().lower()).strip("_")


def _value(raw: str) -> str:
    value = raw.strip().strip(_QUOTES).strip()
    if len(value) > FILLER_ROOM + MAX_VALUE_CHARS:  # too long whatever fillers it ends with
        return ""
    value = _FILLERS.sub("", value).rstrip(",;:").strip()
    return value if 0 < len(value) <= MAX_VALUE_CHARS else ""


def results(planned: Plan, stored: Sequence[StoreResult]) -> list[CaptureResult]:
    """One result per entry, in order: what the write path did with each item (``stored``, in
    item order) or a SKIP. A whole-message fact the rules did not write is preceded by the
    result of the turn written in its place (``planned.written``, by the fact's item); a fact drawn
    from a turn names it (``turn_id``): the whole-message fact standing for it, or the turn
    written in that fact's place."""
    standins = planned.written
    out = []
    for e in planned.entries:
        if e.item is None:
            out.append(CaptureResult("SKIP", None, e.reason, e.message, e.role, None, kind=e.kind))
            continue
        if (standin := standins.get(e.item)) is not None:
            out.append(_result(standin, e, "turn", None))
        r = stored[e.item]
        turn = planned.drawn.get(e.item)
        turn_fact = None if turn is None else standins.get(turn, stored[turn]).fact
        out.append(_result(r, e, e.kind, None if turn_fact is None else turn_fact.id))
    return out


def _result(r: StoreResult, e: Entry, kind: FactKind, turn_id: str | None) -> CaptureResult:
    return CaptureResult(
        r.action, r.fact, r.reason, e.message, e.role, e.text, r.target_ids, kind, turn_id
    )
