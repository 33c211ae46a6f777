"""What goes in and what comes out: the validated write input, Fact, Link and result types."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final, Literal, Protocol, get_args

import numpy as np
import numpy.typing as npt
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .decay import DECAY_CLASSES, DECAY_RULES, ttl_in_words
from .errors import InvalidInput
from .jsonform import NOT_SHOWN, JSONForm, json_fields
from .limits import (
    MAX_CAPTURE_MESSAGES,
    MAX_DEPTH,
    MAX_FIELD_LENGTH,
    MAX_LIMIT,
    MAX_METADATA_BYTES,
    MAX_NOTE_LENGTH,
    MAX_TEXT_LENGTH,
)
from .settings import Settings
from .statedtime import StatedTime
from .tagging import CATEGORY_LIST, MAX_CATEGORY_LENGTH, check_category, normalize_tags
from .temporal import ACCEPTED_TIMES, TimeInput, TimeScope, parse_time, to_iso
from .timehints import TimeHint

#: Embeddings, one a row (float32).
Vectors = npt.NDArray[np.float32]
Action = Literal["ADD", "UPDATE", "DELETE", "NOOP"]


class LinkType(StrEnum):
    """The link types; every API taking a type accepts these or their names as strings."""

    SUPERSEDES = "SUPERSEDES"
    CAUSED_BY = "CAUSED_BY"
    PART_OF = "PART_OF"
    RELATED_TO = "RELATED_TO"
    DEPENDS_ON = "DEPENDS_ON"


LINK_TYPES: Final = tuple(t.value for t in LinkType)
#: What ``source -[TYPE]-> target`` means for each type; the GraphQL enum's values, the MCP tools
#: and the CLI describe the types with it.
LINK_TYPE_MEANINGS: Final[Mapping[str, str]] = {
    LinkType.SUPERSEDES: "The source is a newer version of the target.",
    LinkType.CAUSED_BY: "The source was caused by the target.",
    LinkType.PART_OF: "The source is a part of the target.",
    LinkType.RELATED_TO: "The two are related (automatic links are of this type).",
    LinkType.DEPENDS_ON: "The source requires the target.",
}
#: The types a caller links with: SUPERSEDES comes from storing a new version.
LINKABLE_TYPES: Final = tuple(t for t in LINK_TYPES if t != LinkType.SUPERSEDES)

#: The strength of a link made without one.
DEFAULT_STRENGTH: Final = 1.0
#: Importance given to a fact stored without one.
DEFAULT_IMPORTANCE: Final = 0.5
#: How sure memory is of a fact stored without a confidence.
DEFAULT_CONFIDENCE: Final = 1.0


class LinkOrigin(StrEnum):
    """Who made a link: ``Link.origin`` holds one of these (the links table accepts no other)."""

    EXPLICIT = "explicit"
    SUPERSESSION = "supersession"
    AUTO_SIMILARITY = "auto_similarity"
    AUTO_ENTITY = "auto_entity"
    IMPORT = "import"
    EPISODE = "episode"
    REFLECTION = "reflection"
    CLASSIFIER = "classifier"
    CAPTURE = "capture"


#: What each link origin means (Markdown); the GraphQL ``Link.origin`` description and the
#: origins table of docs/graph.md are built from it.
LINK_ORIGINS: Final[Mapping[str, str]] = {
    LinkOrigin.EXPLICIT: "made by a caller (`link` in Python, `linkFacts` in GraphQL, "
    "`memory_link` in MCP, `graphmem link`)",
    LinkOrigin.SUPERSESSION: "the SUPERSEDES link from a new version to the one it replaces, "
    "made with the new version",
    LinkOrigin.AUTO_SIMILARITY: "a RELATED_TO link from a new fact to one of its most similar "
    "live facts, strength the cosine (the `autolink` setting)",
    LinkOrigin.AUTO_ENTITY: "a RELATED_TO link from a new fact to a recent live fact about the "
    "same entity (the `entity_links` setting)",
    LinkOrigin.IMPORT: "given by an import file for a link made elsewhere; graphmem makes none "
    "itself (an export keeps each link's own origin)",
    LinkOrigin.EPISODE: "a RELATED_TO link from a fact of an episode to the fact before it in "
    "that episode (strength 1), made with the fact",
    LinkOrigin.REFLECTION: "a DEPENDS_ON link from a pattern to each fact it was drawn from, and "
    "from a rule to each pattern it was drawn from (`reflect`)",
    LinkOrigin.CLASSIFIER: "a CAUSED_BY, DEPENDS_ON or PART_OF link the LLM classifier drew from "
    "a new fact to a listed fact in its one request (`classifier = llm`), its reason in the "
    "link's metadata",
    LinkOrigin.CAPTURE: "a PART_OF link from a fact `capture` drew from a message to the turn "
    "that keeps the message (strength 1): recall shows one of the two, and a purge of either "
    "takes the other",
}


#: What no text holds: NUL, and the UTF-16 surrogates (one alone, as JSON's "\ud83d" spells it,
#: encodes no character: neither UTF-8, SQLite, PostgreSQL nor a file path can hold it).
_NOT_TEXT: Final = re.compile("[\x00\ud800-\udfff]")


def not_text(value: str) -> str | None:
    """What in ``value`` is not text, as an InvalidInput's message says it after the argument's
    name ("a lone surrogate (\\ud83d), which is not text"); None if it is all text."""
    found = _NOT_TEXT.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "a NUL character (\\u0000), which no text may hold"
    return f"a lone surrogate (\\u{ord(found.group()):04x}), which is not text"


def check_limit(limit: int, name: str = "limit") -> None:
    """InvalidInput unless ``limit`` (the argument ``name``) is an integer from 1 to MAX_LIMIT."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"{name} must be an integer from 1 to {MAX_LIMIT}", field=name)


def check_text(**arguments: object) -> None:
    """InvalidInput naming the first of ``arguments`` (name: value) that is a string holding
    what is not text (``not_text``); other values pass (None, or what later checks refuse)."""
    for name, value in arguments.items():
        problem = not_text(value) if isinstance(value, str) else None
        if problem is not None:
            raise InvalidInput(f"{name} contains {problem}", field=name)


def lifetimes() -> str:
    """The decay classes and their time to live, in words ("durable 90 days, ...")."""
    return ", ".join(f"{rule.name} {ttl_in_words(rule.ttl)}" for rule in DECAY_RULES)


class FactInput(BaseModel):
    """One fact to store, as callers give it; validated before anything is written."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, frozen=True)

    text: str = Field(
        min_length=1,
        max_length=MAX_TEXT_LENGTH,
        description="What the fact says, as one self-contained statement, e.g. 'Alice moved to "
        f"Paris in June 2023' (at most {MAX_TEXT_LENGTH:,} characters).",
    )
    entity: str | None = Field(
        default=None,
        max_length=MAX_FIELD_LENGTH,
        description="Who or what it is about, e.g. 'user', 'alice', 'project-x'.",
    )
    key: str | None = Field(
        default=None,
        max_length=MAX_FIELD_LENGTH,
        description="The attribute it states, e.g. 'city', 'email', 'editor'. With an entity, a "
        "later fact with the same entity and key and another value supersedes this one.",
    )
    value: str | None = Field(
        default=None,
        max_length=MAX_FIELD_LENGTH,
        description="The attribute's value, e.g. 'Paris'.",
    )
    category: str | None = Field(
        default=None,
        max_length=MAX_CATEGORY_LENGTH,
        description=f"The kind of fact: {CATEGORY_LIST}. Default: detected from the text.",
    )
    tags: list[str] | None = Field(
        default=None, description="Tags to find it by. Default: found in the text."
    )
    importance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description=f"How much it matters, 0 to 1. Default {DEFAULT_IMPORTANCE}.",
    )
    confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description=f"How sure memory is of it, 0 to 1. Default {DEFAULT_CONFIDENCE:g}.",
    )
    decay_class: str | None = Field(
        default=None,
        json_schema_extra={"enum": list(DECAY_CLASSES)},
        description=f"How long it stays relevant: {lifetimes()}. Default: detected from the key, "
        "entity and text (docs/concepts.md#decay).",
    )
    source: str | None = Field(
        default=None, max_length=MAX_FIELD_LENGTH, description="Where it came from."
    )
    summary: str | None = Field(
        default=None, max_length=MAX_NOTE_LENGTH, description="A short form of the text."
    )
    why: str | None = Field(
        default=None, max_length=MAX_NOTE_LENGTH, description="Why it is stored."
    )
    context: str | None = Field(
        default=None, max_length=MAX_NOTE_LENGTH, description="Surrounding context."
    )
    valid_from: float | None = Field(
        default=None,
        description=f"When it became true in the world: {ACCEPTED_TIMES}. Default: now.",
    )
    source_date: float | None = Field(
        default=None, description="When it was stated, in the same forms. Default: unknown."
    )
    expires_at: float | None = Field(
        default=None,
        description="When it expires, in the same forms. Default: by its decay class.",
    )
    supersedes: str | None = Field(
        default=None,
        max_length=64,
        description="The id of a live fact this one replaces (it becomes history).",
    )
    classify: bool = Field(
        default=True,
        description="Let the classifier decide: the rules (UPDATE for the same entity and key "
        "with a new value, NOOP for a repeat) or, when the server uses one, an LLM (also "
        "DELETE); false always adds.",
    )
    autolink: bool | None = Field(
        default=None,
        description="Make automatic similarity links for it. Default: the server's setting.",
    )
    entity_links: bool | None = Field(
        default=None,
        description="Link it to recent facts about the same entity. Default: the server's setting.",
    )
    dedup: bool = Field(
        default=True,
        description="false: stored even when a live fact has the same text (a document's chunk "
        "belongs to its file, an item of another entity may say the same).",
    )
    stated_valid_from: bool = Field(
        default=False,
        description="With no valid time given: valid from the start of the time the text states "
        '("in 2019"), if it states one (docs/concepts.md#the-time-the-text-states).',
    )

    @model_validator(mode="before")
    @classmethod
    def _stated_valid_from(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("valid_from") == "stated":
            return {**data, "valid_from": None, "stated_valid_from": True}
        return data

    @field_validator("entity", "key", "value", "source", "summary", "why", "context", "supersedes")
    @classmethod
    def _blank_is_none(cls, v: str | None) -> str | None:
        return v or None

    @field_validator("category")
    @classmethod
    def _known_category(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        return check_category(v)

    @field_validator("decay_class")
    @classmethod
    def _known_decay_class(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        v = v.lower()
        if v not in DECAY_CLASSES:
            raise ValueError(f"unknown decay class {v!r}; use one of {', '.join(DECAY_CLASSES)}")
        return v

    @field_validator("tags", mode="before")
    @classmethod
    def _normalized_tags(cls, v: Any) -> list[str] | None:
        return None if v is None else normalize_tags(v)

    @field_validator("valid_from", "source_date", "expires_at", mode="before")
    @classmethod
    def _epoch(cls, v: TimeInput | None) -> float | None:
        return parse_time(v)

    @field_validator(
        "text",
        "entity",
        "key",
        "value",
        "source",
        "summary",
        "why",
        "context",
        "supersedes",
        "tags",
        mode="before",
    )
    @classmethod
    def _text(cls, v: Any, info: ValidationInfo) -> Any:
        for item in v if isinstance(v, list) else [v]:
            problem = not_text(item) if isinstance(item, str) else None
            if problem is not None:
                raise ValueError(f"{info.field_name} contains {problem}")
        return v

    @classmethod
    def parse(cls, data: Any, index: int | None = None) -> FactInput:
        """Validate ``data`` (a mapping or a FactInput), raising InvalidInput on the first problem."""
        if isinstance(data, FactInput):
            return data
        if not isinstance(data, dict):
            raise InvalidInput(
                f"expected a mapping of fact fields, got {type(data).__name__}", index=index
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or None
            message = str(first["msg"]).removeprefix("Value error, ")
            raise InvalidInput(message, field=loc, index=index) from None
        except InvalidInput as exc:  # raised by parse_time inside a validator
            raise InvalidInput(exc.message, index=index) from None


def field_of(model: type[BaseModel], name: str) -> Any:
    """The field ``name`` of ``model`` (its default, bounds and description), for another model
    that takes the same input under its own annotation: ``text: str = field_of(FactInput,
    "text")``. A copy: the other model may not change the first."""
    return copy.deepcopy(model.model_fields[name])


def link_types_in_words(types: Sequence[str]) -> str:
    """Each type and what it means: "CAUSED_BY: the source was caused by the target; ..."."""
    return "; ".join(
        f"{t}: {LINK_TYPE_MEANINGS[t][0].lower()}{LINK_TYPE_MEANINGS[t][1:-1]}" for t in types
    )


class LinkInput(BaseModel):
    """One link to make, ``source -[type]-> target``, as callers give it: what each field means
    and how it is bounded (``Memory.link`` checks it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source_id: str = Field(min_length=1, description="The id of the fact the link starts from.")
    target_id: str = Field(min_length=1, description="The id of the fact it points to.")
    type: str = Field(
        json_schema_extra={"enum": list(LINKABLE_TYPES)},
        description=f"{link_types_in_words(LINKABLE_TYPES)}. SUPERSEDES comes from storing a new "
        "version.",
    )
    strength: float = Field(
        default=DEFAULT_STRENGTH,
        ge=0.0,
        le=1.0,
        description="How strong the relationship is, 0 to 1; relinking updates it.",
    )
    valid_from: float | None = Field(
        default=None,
        description=f"When the relationship began in the world: {ACCEPTED_TIMES}. Default: when "
        "both facts hold (the later of their valid time).",
    )
    valid_until: float | None = Field(
        default=None,
        description="When it stopped holding, in the same forms. Default: open. Relinking with "
        "another validity replaces the live link.",
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description=f"A JSON object kept with the link (at most {MAX_METADATA_BYTES // 1024} KiB).",
    )


#: How a search finds its candidates (``Memory.search``'s ``mode``).
SearchMode = Literal["hybrid", "fts", "vector"]
SEARCH_MODES: Final[tuple[str, ...]] = get_args(SearchMode)
#: The rerankers a search may name (``Memory.search``'s ``rerank``): the ``reranker`` setting's.
RERANK_CHOICES: Final[tuple[str, ...]] = get_args(Settings.model_fields["reranker"].annotation)


class SearchInput(BaseModel):
    """A search, as callers ask for it: what each argument means, its bounds and its default
    (``Memory.search`` checks them; ``recall`` and the reads in time take the time arguments)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(
        min_length=1,
        max_length=MAX_TEXT_LENGTH,
        description="What to look for, in words: a question or keywords.",
    )
    limit: int = Field(
        default=10, ge=1, le=MAX_LIMIT, description=f"Most facts to return (1 to {MAX_LIMIT:,})."
    )
    tag: str | None = Field(default=None, description="Only facts with this tag.")
    category: str | None = Field(default=None, description="Only facts of this category.")
    entity: str | None = Field(
        default=None, description="Only facts about this entity (case-insensitive)."
    )
    source: str | None = Field(default=None, description="Only facts from this source.")
    as_of: float | None = Field(
        default=None,
        description="Valid time: read memory as the world was at this moment, e.g. to get the "
        f"version of a fact that was true then. {ACCEPTED_TIMES}. Default: now.",
    )
    known_at: float | None = Field(
        default=None,
        description="Transaction time: read memory as it was known at this moment (facts "
        "stored later left out, facts forgotten since still in), in the same forms. Default: now.",
    )
    include_superseded: bool = Field(
        default=False, description="Also return versions that a newer fact has replaced."
    )
    mode: SearchMode = Field(
        default="hybrid",
        description="hybrid: keywords and meaning fused; fts: keywords only; vector: meaning only.",
    )
    graph_depth: int = Field(
        default=0,
        ge=0,
        le=MAX_DEPTH,
        description="Also return facts linked to the hits, up to this many links away, each "
        f"scored below the hit that reached it (0 to {MAX_DEPTH}).",
    )
    time_hints: bool = Field(
        default=True,
        description='Read time words in the text ("last week", "in May 2023", "before 2020"), '
        "relative to the valid time read at or now, as a period: facts dated in it rank higher "
        "(none is dropped). False takes them as plain words.",
    )
    episode_links: bool = Field(
        default=True,
        description="Let facts next to each other in an episode (turns of one conversation, "
        "chunks of one document) lend each other part of their relevance, and windows of up "
        "to four consecutive turns lend theirs to the turns they hold (which may bring in a "
        "turn the search did not find). False: neither plays a part in ranking.",
    )
    rerank: str | None = Field(
        default=None,
        json_schema_extra={"enum": list(RERANK_CHOICES)},
        description="What reorders the best candidates of the fused order: none; features (a "
        "small model over the scores the search has); http (the server's reranker service); "
        "llm (its chat model, one request). Default: the server's reranker setting. A failure "
        "keeps the fused order (docs/search.md#the-rerank-stage).",
    )


#: Message roles capture accepts (others are an error); only ``CAPTURED_ROLES`` are read.
ROLES: Final = ("system", "developer", "user", "assistant", "tool")
#: Roles whose messages capture reads for turns and facts.
CAPTURED_ROLES: Final = ("user", "assistant")
#: What capture keeps: the conversation (its turns, facts drawn on top), or facts only.
Keep = Literal["conversation", "facts"]
KEEPS: Final[tuple[str, ...]] = get_args(Keep)
#: What capture keeps unless told.
DEFAULT_KEEP: Final[Keep] = "conversation"


class MessageInput(BaseModel):
    """A chat message, as agents exchange them (OpenAI format)."""

    # Memory.capture reads these two fields itself (capture.parse_messages), and also takes the
    # role in any case and content as a list of parts.
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str = Field(
        json_schema_extra={"enum": list(ROLES)},
        description=f"Who said it: {', '.join(ROLES[:-1])} or {ROLES[-1]} (only "
        f"{' and '.join(CAPTURED_ROLES)} messages are read).",
    )
    content: str = Field(description="What was said: the message's text.")


class CaptureInput(BaseModel):
    """A capture, as callers ask for it: the messages of a conversation turn, the episode they
    belong to and what to keep (``Memory.capture`` checks them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    messages: list[MessageInput] = Field(
        min_length=1,
        max_length=MAX_CAPTURE_MESSAGES,
        description=f"The turn's messages, in order (at most {MAX_CAPTURE_MESSAGES:,}).",
    )
    episode: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_FIELD_LENGTH,
        description="The episode (conversation session) the messages come from, recorded on "
        "first use: give it, so that its turns are read together (windows of turns).",
    )
    keep: Keep = Field(
        default=DEFAULT_KEEP,
        description="What to keep: the conversation (every message as a turn, a long one in "
        "parts, with its memorable sentences drawn from it as facts, each linked to its turn) "
        "or the facts alone.",
    )


#: Which time of a fact a query's period met (``SearchHit.time_matched``).
TimeKind = Literal["valid", "stated"]

#: A fact's tier: pinned facts lead every recall block, cold ones stay out of it unless asked.
Tier = Literal["pinned", "normal", "cold"]
TIERS: Final[tuple[str, ...]] = get_args(Tier)


#: What a stored fact is: a ``turn`` keeps a message of a conversation as it was said (``capture``
#: keeps one per message part, its source ``turn:<role>``), a ``fact`` is anything else.
FactKind = Literal["fact", "turn"]
#: The source prefix of a turn: ``turn:user``, ``turn:assistant``.
TURN_SOURCE: Final = "turn:"


def is_turn(source: str | None) -> bool:
    """Whether a fact of this source is a turn of a conversation (see ``FactKind``)."""
    return source is not None and source.startswith(TURN_SOURCE)


class Row(Protocol):
    """A row whose columns are read by name: a store's row, or a dict of the same columns."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Fact:
    """A stored fact, as seen at some time scope. Times are timezone-aware UTC datetimes."""

    id: str
    text: str
    category: str
    importance: float
    entity: str | None
    key: str | None
    value: str | None
    source: str | None
    tags: list[str]
    summary: str | None
    why: str | None
    context: str | None
    decay_class: str
    expires_at: datetime | None
    confidence: float
    last_confirmed_at: datetime | None
    access_count: int
    last_accessed_at: datetime | None
    source_date: datetime | None
    valid_from: datetime
    valid_until: datetime | None
    valid_until_recorded_at: datetime | None
    recorded_at: datetime
    retracted_at: datetime | None
    superseded_by: str | None
    supersedes_id: str | None
    episode_id: str | None
    #: When it was pinned (it leads every recall block), or None.
    pinned_at: datetime | None = None
    #: When it was made cold (recall leaves it out unless asked), or None.
    cold_at: datetime | None = None
    #: The period its text states (see ``stated_time``): start, end (excluded), the words.
    stated_start: datetime | None = field(default=None, metadata=NOT_SHOWN)
    stated_end: datetime | None = field(default=None, metadata=NOT_SHOWN)
    stated_text: str | None = field(default=None, metadata=NOT_SHOWN)

    @property
    def kind(self) -> FactKind:
        """``turn`` for a message ``capture`` kept of a conversation, else ``fact``."""
        return "turn" if is_turn(self.source) else "fact"

    @property
    def stated_time(self) -> StatedTime | None:
        """The time its text states ("yesterday", "in 2019", "from 2006 to 2009"), resolved
        against its reference time when it was written; None when it states none. Not valid
        time: it changes no read's visibility, only ranking by a query's time words."""
        if self.stated_start is None or self.stated_end is None:
            return None
        return StatedTime(self.stated_start, self.stated_end, self.stated_text or "")

    @classmethod
    def from_row(cls, row: Row) -> Fact:
        """A Fact from a ``facts`` row (a store's row or a dict with the same columns)."""
        return cls.from_values([row[name] for name in FACT_COLUMNS])

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> Fact:
        """A Fact from the values of FACT_COLUMNS, in order (``SELECT {fact_columns()}``)."""
        fact: Fact = _make_fact(values)
        return fact

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields: times as ISO-8601 UTC text; the stated time as one object
        (``stated_time``: start, end, text; or None)."""
        stated = self.stated_time
        return {**json_fields(self), "stated_time": None if stated is None else stated.to_dict()}


@dataclass(frozen=True, slots=True)
class Link(JSONForm):
    """A typed, directed edge between two facts, bi-temporal like facts."""

    id: str
    source_id: str
    target_id: str
    type: str
    strength: float
    origin: str
    recorded_at: datetime
    valid_from: datetime
    valid_until: datetime | None
    retracted_at: datetime | None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Row) -> Link:
        """A Link from a ``links`` row."""
        return cls.from_values([row[name] for name in LINK_COLUMNS])

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> Link:
        """A Link from the values of LINK_COLUMNS, in order."""
        link: Link = _make_link(values)
        return link


#: The ``facts`` and ``links`` columns that make a Fact and a Link, in field order.
FACT_COLUMNS: Final = tuple(f.name for f in fields(Fact))
LINK_COLUMNS: Final = tuple(f.name for f in fields(Link))


_moments: dict[float, datetime] = {}


def _moment(seconds: float) -> datetime:
    """to_datetime for stored times, remembering recent ones: rows written together share
    their times, and traversals and searches convert thousands of them."""
    moment = _moments.get(seconds)
    if moment is None:
        if len(_moments) >= 4096:
            _moments.clear()
        moment = _moments[seconds] = datetime.fromtimestamp(seconds, UTC)
    return moment


def _metadata(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text and text != "{}" else {}


def _tags(text: str | None) -> list[str]:
    return [t for t in text.split(",") if t] if text else []


def _maker(cls: type, converters: Mapping[str, str]) -> Any:
    """A function building a ``cls`` from its fields' stored values, in field order.

    Rows are read by the thousand (a traversal, a search's candidates), and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``: this sets the slots
    directly instead, with each field's conversion written inline (half the time per object).
    ``converters`` maps a field name to an expression of ``x``, its stored value.
    """
    names = [f.name for f in fields(cls)]
    lines = ["def make(v):", "    o = new(cls)"]
    for i, name in enumerate(names):
        expression = converters.get(name, "x").replace("x", f"v[{i}]")
        lines.append(f"    set_{name}(o, {expression})")
    lines.append("    return o")
    scope: dict[str, Any] = {
        "cls": cls,
        "new": object.__new__,
        "moment": _moment,
        "cached": _moments.get,
        "tags": _tags,
        "metadata": _metadata,
    }
    scope.update({f"set_{name}": getattr(cls, name).__set__ for name in names})
    exec("\n".join(lines), scope)  # the source is built from field names only
    return scope["make"]


def _time_converters(cls: type) -> dict[str, str]:
    return {
        f.name: "(None if x is None else (cached(x) or moment(x)))"
        for f in fields(cls)
        if "datetime" in str(f.type)
    }


_make_fact: Final = _maker(Fact, {**_time_converters(Fact), "tags": "tags(x)"})
_make_link: Final = _maker(Link, {**_time_converters(Link), "metadata": "metadata(x)"})


#: The columns a write changes after the row was recorded, each with the condition (on the row
#: ``{a}``) under which memory knew its value at ``{known_at}`` (the parameter): a read at a
#: past knownAt shows
#: values as known then, so a later end, successor or retraction reads as open / null. A fact's
#: ``supersedes_id`` can be set later too (an earlier version stored afterwards): it is known
#: from when the version it names was recorded.
_KNOWN_FACT: Final = {
    "valid_until": "{a}.valid_until_recorded_at <= {known_at}",
    "valid_until_recorded_at": "{a}.valid_until_recorded_at <= {known_at}",
    "superseded_by": "{a}.valid_until_recorded_at <= {known_at}",
    "retracted_at": "{a}.retracted_at <= {known_at}",
    "pinned_at": "{a}.pinned_at <= {known_at}",
    "cold_at": "{a}.cold_at <= {known_at}",
    "supersedes_id": (
        "(SELECT v.recorded_at FROM facts v WHERE v.id = {a}.supersedes_id) <= {known_at}"
    ),
}
_KNOWN_LINK: Final = {
    "valid_until": "{a}.valid_until_recorded_at <= {known_at}",
    "retracted_at": "{a}.retracted_at <= {known_at}",
}


def fact_columns(
    alias: str = "",
    scope: TimeScope | None = None,
    *,
    param: Callable[[str], str] | None = None,
) -> str:
    """FACT_COLUMNS as a SELECT list, each prefixed by ``alias.`` if given. With a ``scope``
    that is not the present (its ``known_at`` bound by the query, spelled by ``param``: the
    store's dialect's), the fields a later write changed read as memory knew them at known_at
    (the alias and ``param`` are then required)."""
    return _columns(FACT_COLUMNS, alias, _KNOWN_FACT, scope, param)


def link_columns(
    alias: str = "",
    scope: TimeScope | None = None,
    *,
    param: Callable[[str], str] | None = None,
) -> str:
    """LINK_COLUMNS as a SELECT list, like ``fact_columns``."""
    return _columns(LINK_COLUMNS, alias, _KNOWN_LINK, scope, param)


def _columns(
    names: Sequence[str],
    alias: str,
    known: Mapping[str, str],
    scope: TimeScope | None,
    param: Callable[[str], str] | None,
) -> str:
    prefix = f"{alias}." if alias else ""
    if scope is None or scope.current:
        return ", ".join(prefix + name for name in names)
    if not alias or param is None:
        raise ValueError("a scoped column list needs the table's alias and the dialect's param")
    known_at = param("known_at")
    return ", ".join(
        f"CASE WHEN {known[name].format(a=alias, known_at=known_at)} THEN {alias}.{name} END AS"
        f" {name}"
        if name in known
        else prefix + name
        for name in names
    )


@dataclass(frozen=True, slots=True)
class StoreResult(JSONForm):
    """What a write did: ``action`` ADD/UPDATE/DELETE/NOOP, the fact it stored (or matched), why.

    ``target_ids`` are the facts an UPDATE superseded, a DELETE retracted or a NOOP matched.
    """

    action: Action
    fact: Fact | None
    reason: str = ""
    target_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The LLM classifier's decision for one new fact. ``target`` is an existing fact's id (None for
    ADD); ``fallback`` marks an ADD chosen because the classifier could not answer."""

    action: Action
    target: str | None
    reason: str
    fallback: bool = False
    #: Typed links the same answer drew from the new fact to listed facts: (target id, type,
    #: reason), stored with origin ``classifier``.
    links: tuple[tuple[str, str, str], ...] = ()
    #: When the answer says the fact's text places its start (epoch seconds): its valid time
    #: starts then if the write asked for stated valid time (``valid_from="stated"``).
    valid_from: float | None = None


@dataclass(frozen=True, slots=True)
class Reranked(JSONForm):
    """How the rerank stage placed a hit (``SearchHit.reranked``): the reranker ``by`` name,
    the hit's place in the fused order (``fused_rank``, from 1), the reranker's ``score`` for it
    (None: it gave none, and the hit follows the ones it scored in their fused order), and
    ``fallback``, why the fused order stands when the reranker failed (then ``score`` is None)."""

    by: str
    fused_rank: int
    score: float | None = None
    fallback: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit(JSONForm):
    """A search result: the fact and its final score (higher is better), with the leg scores.

    A fact graph expansion added, or scored higher than the search did, has ``depth`` > 0 and
    ``via``, the fact it was reached from. A fact in the period of the query's time words
    (``time_hint``) had its relevance raised; ``time_matched`` says by which of its times.
    A fact whose entity the query names had its relevance raised too (``entity_matched``).
    A reranker may have reordered the best of the fused order (``reranked``).
    """

    fact: Fact
    score: float
    fts_score: float | None = None
    vector_score: float | None = None
    depth: int = 0
    via: str | None = None
    #: The time words of the query and the period they were understood as (None: none found,
    #: or ``time_hints`` off); the same for every hit of one search.
    time_hint: TimeHint | None = None
    #: Which of the fact's times fell in that period: ``valid`` (its source date, else its
    #: valid_from), ``stated`` (only the time its text states), or None (neither).
    time_matched: TimeKind | None = None
    #: The fact's entity, when the query names it (its relevance was raised), else None.
    entity_matched: str | None = None
    #: How the rerank stage placed the hit; None when no reranker ran, or the hit was beyond
    #: the candidates it reads (``rerank_candidates``).
    reranked: Reranked | None = None


ChangeKind = Literal[
    "FACT_STORED", "FACT_SUPERSEDED", "FACT_FORGOTTEN", "FACT_PURGED", "LINK_MADE", "LINK_REMOVED"
]


@dataclass(frozen=True, slots=True)
class Change:
    """One committed change, as announced to ``Memory.subscribe`` listeners.

    ``id`` is the fact's id, or the link's for LINK_MADE / LINK_REMOVED. Automatic links made
    with a stored fact are not announced on their own: its FACT_STORED stands for them.
    """

    kind: ChangeKind
    id: str
    namespace: str
    at: float

    def to_dict(self) -> dict[str, Any]:
        return json_fields(self, at=to_iso(self.at))


@dataclass(frozen=True, slots=True)
class ChangePage:
    """Changes read from a namespace's change log (``Memory.changes_since``).

    ``position``: where to read on from (the last entry read, or the position asked for).
    ``more``: later entries were committed (read on from ``position``). ``missed``: entries
    after the position asked for were dropped from the log before being read (it keeps the
    newest CHANGE_LOG_KEPT); re-read what you need.
    """

    changes: list[Change]
    position: int
    more: bool
    missed: bool


RunStatus = Literal["running", "done", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class MaintenanceRun:
    """One run of a job: when it started and finished, how it ended (``done``, ``failed``;
    ``running`` while it runs; ``skipped``, never recorded, when another process was running
    it), what it changed (counts by kind), how many model requests it made, and why it
    failed."""

    job: str
    started_at: datetime
    finished_at: datetime | None
    status: RunStatus
    changed: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    error: str | None = None
    #: The record's number in its namespace (0: not recorded).
    id: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "started_at": self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
            "status": self.status,
            "changed": self.changed,
            "requests": self.requests,
            "error": self.error,
        }
