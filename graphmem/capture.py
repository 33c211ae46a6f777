"""Auto-capture: the facts worth keeping in a turn's messages, found without an LLM.

``Memory.capture`` takes OpenAI-style chat messages (``{"role", "content"}``) and reads each
``user`` and ``assistant`` message (:func:`_message_candidates`):

1. recalled ``<memory-context>`` blocks and fenced code are removed, so memory never captures
   its own recall or pasted code;
2. a message holding a secret anywhere (:mod:`graphmem.sensitive`), shorter than ``MIN_CHARS``
   or longer than ``capture_max_chars`` is skipped whole;
3. each sentence a trigger marks as memorable, and not a question, is a candidate, with a
   category and, where a pattern fits, an entity, key and value (:func:`extract`).

The candidates are stored in one ``store_many`` batch (one embedding pass, one classification):
one result per candidate, and a SKIP for each message without one, in message order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from .errors import InvalidInput
from .limits import MAX_CAPTURE_MESSAGES, MAX_FIELD_LENGTH
from .models import Fact, StoreResult
from .sensitive import sensitive
from .tagging import detect_category

CaptureAction = Literal["ADD", "UPDATE", "DELETE", "NOOP", "SKIP"]

#: Message roles accepted (others are an error).
ROLES: Final = ("system", "developer", "user", "assistant", "tool")
#: Roles whose messages are read for facts.
CAPTURED_ROLES: Final = ("user", "assistant")
#: Shortest message, and shortest sentence, worth reading.
MIN_CHARS: Final = 10
#: Longest value an extracted entity/key/value may have; a longer one is not extracted.
MAX_VALUE_CHARS: Final = 200

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
class Candidate:
    """A sentence to store (``item``, the write's fields) or a skip (``reason``), from message
    number ``message``. ``text`` is None when a whole message is skipped."""

    message: int
    role: str
    text: str | None
    item: dict[str, Any] | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CaptureResult:
    """What capture did with one candidate: ADD, UPDATE, DELETE or NOOP as the write path decided,
    or SKIP (not stored, ``reason`` says why). ``fact`` is the fact stored, repeated (NOOP) or
    retracted (DELETE); ``message`` the index of the message it came from; ``text`` the sentence
    (None when a whole message was skipped, so a secret is never repeated)."""

    action: CaptureAction
    fact: Fact | None
    reason: str
    message: int
    role: str
    text: str | None
    target_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "fact": None if self.fact is None else self.fact.to_dict(),
            "reason": self.reason,
            "message": self.message,
            "role": self.role,
            "text": self.text,
            "target_ids": list(self.target_ids),
        }


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


def candidates(messages: Sequence[Message], max_chars: int) -> list[Candidate]:
    """The candidates of every message, in order (:func:`_message_candidates`)."""
    out: list[Candidate] = []
    for i, m in enumerate(messages):
        out.extend(_message_candidates(i, m, max_chars))
    return out


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


def _message_candidates(index: int, m: Message, max_chars: int) -> list[Candidate]:
    """The candidates of message number ``index``, or one skip saying why it has none. The
    result of a message skipped for a secret does not repeat its text. Each candidate's
    category comes from fast regexes (:func:`graphmem.tagging.detect_category`)."""

    def skip(reason: str) -> list[Candidate]:
        return [Candidate(index, m.role, None, None, reason)]

    if m.role not in CAPTURED_ROLES:
        return skip(f"{m.role} messages are not captured")
    text = _BLOCKS.sub(" ", m.content).strip()
    if len(text) > max_chars:  # before anything reads it: nothing of it is stored anyway
        return skip(f"longer than {max_chars} characters (capture_max_chars)")
    if (what := sensitive(m.content)) is not None:
        return skip(f"sensitive content ({what}); nothing of this message is stored")
    if len(text) < MIN_CHARS:
        return skip(f"shorter than {MIN_CHARS} characters")
    out = []
    for raw in _SENTENCES.split(text):
        sentence = _BULLET.sub("", raw).strip()
        if len(sentence) < MIN_CHARS or sentence.endswith("?") or not _TRIGGERS.search(sentence):
            continue
        item: dict[str, Any] = {
            "text": sentence,
            "category": detect_category(sentence),
            "source": f"capture:{m.role}",
            **extract(sentence, m.role),
        }
        out.append(Candidate(index, m.role, sentence, item))
    return out or skip("nothing memorable (no trigger in any sentence)")


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


def results(found: Sequence[Candidate], stored: Sequence[StoreResult]) -> list[CaptureResult]:
    """One result per candidate, in order: what the write path did with each stored one (the
    ``stored`` results are those of the candidates with an item, in order), a SKIP for the
    others."""
    written = iter(stored)
    out = []
    for c in found:
        if c.item is None:
            out.append(CaptureResult("SKIP", None, c.reason, c.message, c.role, None))
            continue
        r = next(written)
        out.append(
            CaptureResult(r.action, r.fact, r.reason, c.message, c.role, c.text, r.target_ids)
        )
    return out
