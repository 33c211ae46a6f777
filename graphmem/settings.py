"""Settings: defaults, then a TOML config file, then ``GRAPHMEM_*`` environment variables.

The config file is ``$GRAPHMEM_CONFIG`` if set, else ``graphmem.toml`` in the current directory
when it exists. Each field below is documented once, here: its description (Markdown) is what
the settings table of docs/configuration.md says about it.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .decay import DecayClass
from .errors import InvalidInput


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


ENV_PREFIX = "GRAPHMEM_"
DEFAULT_CONFIG_FILE = "graphmem.toml"

EmbedderName = Literal["local", "openai", "hash"]
#: The embedding providers a setting or option may name.
EMBEDDERS: Final[tuple[str, ...]] = get_args(EmbedderName)


class Settings(BaseModel):
    """Every tunable of a graphmem process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Field(Path("data"), description="Directory holding one folder per namespace.")
    namespace: str = Field("default", description="Namespace used when none is named.")
    store: str | None = Field(
        None,
        description="Where facts, links, the keyword index and the outbox live: none, SQLite "
        "files under `data_dir` (one per namespace); `postgresql://user:password@host:port/db`, "
        "a PostgreSQL database every replica shares (docs/scale-out.md).",
    )
    vectors: str | None = Field(
        None,
        description="Where the vector indexes live: none, `vectors` in each namespace's folder "
        "under `data_dir`; `s3://bucket/prefix`, one LanceDB table per namespace under "
        "`prefix/<namespace>` in any S3-compatible object store (docs/scale-out.md).",
    )
    s3_endpoint: str | None = Field(
        None,
        description="Endpoint of the S3-compatible store (`vectors` on `s3://`), e.g. "
        "`http://127.0.0.1:9000`; none: AWS's.",
    )
    s3_region: str | None = Field(None, description="Region of the bucket; none: `us-east-1`.")
    s3_access_key_id: str | None = Field(
        None, description="Access key of the object store; none: the AWS environment's."
    )
    s3_secret_access_key: str | None = Field(
        None, description="Secret key of the object store; none: the AWS environment's."
    )
    s3_timeout: float = Field(
        5.0,
        gt=0,
        le=300,
        description="Seconds one request to the object store (`vectors` on `s3://`) may take, "
        "and the longest a search or a write waits for the vector index there: past it a "
        "search answers from the keyword leg and the writes still waiting in the outbox, a "
        "write is acknowledged with its vectors in the outbox, and both say so in `degraded` "
        "(docs/scale-out.md). Opening a namespace, `stats` and `check` wait as long for the "
        "index's first answer.",
    )
    embedder: EmbedderName = Field(
        "local",
        description="Embedding provider: `local` (MiniLM ONNX, offline), `openai` (any "
        "OpenAI-compatible endpoint) or `hash` (tests only).",
    )
    embed_base_url: str | None = Field(
        None,
        description="Base URL of the OpenAI-compatible embeddings API (embedder `openai`), e.g. "
        "`http://127.0.0.1:11434/v1` for Ollama; none: api.openai.com.",
    )
    embed_api_key: str | None = Field(
        None, description="API key for the embeddings endpoint; none: `OPENAI_API_KEY`."
    )
    embed_model: str = Field(
        "text-embedding-3-small", description="Embedding model at the endpoint."
    )
    embed_dimensions: int | None = Field(
        None,
        ge=1,
        le=8192,
        description="Requested vector size (sent as `dimensions`); none: one probe request "
        "learns the model's size. Every answer is checked against it.",
    )
    embed_encoding: Literal["float", "base64"] = Field(
        "float",
        description="How embeddings are asked to travel: `float` (JSON numbers, every server) or "
        "`base64` (little-endian float32, about a third of the bytes). Answers in either form "
        "are accepted whatever was asked.",
    )
    embed_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds one embedding request (a batch) may take in all: connecting, "
        "waiting, reading the answer, its retries and their waits; past it the request fails "
        "with `EMBEDDER_ERROR`, whatever pace the endpoint answers at.",
    )
    embed_max_retries: int = Field(
        4,
        ge=0,
        le=10,
        description="Retries with exponential backoff (0.5 s doubling, at most 8 s, or the "
        "server's `retry-after`) on 429, 5xx and timeouts.",
    )
    embed_batch_size: int = Field(
        64, ge=1, le=2048, description="Texts per embedding call (local and openai)."
    )
    hash_dimensions: int = Field(
        256, ge=8, le=4096, description="Vector size of the hash embedder."
    )
    fuzzy_dedup: bool = Field(
        True,
        description="A write whose normalised text (trimmed, spaces collapsed, case-folded) "
        "matches a live fact is a NOOP. Exact duplicates are always NOOPs.",
    )
    vector_dedup_threshold: float = Field(
        0.95,
        ge=0,
        le=1.0001,
        description="Cosine at or above which a new fact shares its near-duplicate's vector "
        "instead of storing its own (the fact itself is still stored). Above 1 disables.",
    )
    autolink: bool = Field(
        True,
        description="Link each new fact RELATED_TO its most similar live facts (origin "
        "`auto_similarity`, strength = cosine). A write can override it (`autolink=`). See "
        "[graph.md](graph.md#automatic-links).",
    )
    autolink_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Cosine at or above which a similarity link is made; none: the value "
        "calibrated for the embedder ([graph.md](graph.md#automatic-links)).",
    )
    autolink_max: int = Field(5, ge=0, le=50, description="Most similarity links per new fact.")
    entity_links: bool = Field(
        False,
        description="Link each new fact RELATED_TO the most recent live facts naming the same "
        "entity (origin `auto_entity`, strength 0.5).",
    )
    entity_links_max: int = Field(
        5,
        ge=0,
        le=50,
        description="Most same-entity links per new fact; it also bounds how many newer facts "
        "link to one fact, so a popular entity makes no hub.",
    )
    classifier: Literal["rules", "llm", "off"] = Field(
        "rules",
        description="Classify-before-write: `rules` (offline: same entity and key with a new "
        "value → UPDATE; same value → NOOP), `llm` (a chat model decides ADD, UPDATE, DELETE or "
        "NOOP against the most similar live facts, one request per batch; see "
        "[agents.md](agents.md#classify-before-write-with-an-llm)) or `off` (always ADD).",
    )
    llm_base_url: str | None = Field(
        None,
        description="Base URL of the OpenAI-compatible chat API the `llm` classifier uses "
        '(OpenAI, Ollama, vLLM, llama.cpp…); none: api.openai.com. With `classifier = "llm"`, '
        "this or an API key must be set.",
    )
    llm_api_key: str | None = Field(
        None, description="API key for the chat endpoint; none: `OPENAI_API_KEY`."
    )
    llm_model: str = Field(
        "gpt-4o-mini",
        description="Chat model that classifies writes (a small, cheap one is enough).",
    )
    llm_timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds one chat request may take in all: connecting, waiting, reading "
        "the answer, its retries and their waits; past it the request fails (`LLM_ERROR`: "
        "classification adds the facts, other jobs store nothing), whatever pace the endpoint "
        "answers at.",
    )
    llm_max_retries: int = Field(
        4,
        ge=0,
        le=10,
        description="Retries with exponential backoff on 429, 5xx and timeouts; after them the "
        "batch's facts are added (ADD) with the reason in the result.",
    )
    llm_batch_size: int = Field(
        50,
        ge=1,
        le=500,
        description="Most new facts one classification request carries (a larger "
        "`store_many` takes one request per this many facts that have similar facts), and most "
        "messages a capture's one request carries (a larger capture's trigger facts are "
        "classified as a `store_many`'s are).",
    )
    multi_valued_keys: tuple[str, ...] = Field(
        (
            "child",
            "children",
            "kid",
            "kids",
            "skill",
            "skills",
            "hobby",
            "hobbies",
            "pet",
            "pets",
            "friend",
            "friends",
            "language_spoken",
            "languages",
            "tag",
            "interest",
            "interests",
            "sibling",
            "siblings",
        ),
        description="Keys that hold several values at once: a new value is added, never an update.",
    )
    fts_weight: float = Field(
        0.6,
        ge=0,
        le=1,
        description="Keyword share of the hybrid fusion; the vector leg gets the rest. See "
        "[search.md](search.md).",
    )
    fusion_candidates: int = Field(
        200, ge=10, le=5000, description="Candidates each leg contributes before fusion."
    )
    reranker: Literal["none", "features", "http", "llm"] = Field(
        "none",
        description="What reorders the best `rerank_candidates` of the fused order: `none`; "
        "`features` (a small model over the scores search already has, shipped with graphmem); "
        "`http` (a reranker served at `rerank_url`); `llm` (the `llm_*` chat model, one request "
        "a search). A failure keeps the fused order ([search.md](search.md#the-rerank-stage)).",
    )
    rerank_candidates: int = Field(
        50,
        ge=2,
        le=200,
        description="Candidates of the fused order the reranker reads (the rest follow them).",
    )
    rerank_url: str | None = Field(
        None,
        description="Endpoint of the `http` reranker, e.g. `http://127.0.0.1:8080/rerank` "
        "(Hugging Face TEI) or `https://api.jina.ai/v1/rerank`.",
    )
    rerank_api: Literal["cohere", "tei"] = Field(
        "cohere",
        description="The shape `rerank_url` speaks: `cohere` (`{model, query, documents, top_n}` "
        "→ `{results: [{index, relevance_score}]}`: Cohere, Jina, vLLM, Infinity) or `tei` "
        "(`{query, texts}` → `[{index, score}]`: Hugging Face Text Embeddings Inference).",
    )
    rerank_model: str | None = Field(
        None, description="Model the `http` reranker names (`cohere` shape); none: not sent."
    )
    rerank_api_key: str | None = Field(
        None, description="Bearer key of the `http` reranker; none: no key sent."
    )
    rerank_timeout: float = Field(
        5.0,
        gt=0,
        le=300,
        description="Seconds a rerank (`http` or `llm`) may take in all, retries included; past "
        "it the search answers in the fused order.",
    )
    rerank_max_retries: int = Field(
        1,
        ge=0,
        le=10,
        description="Retries of a rerank request on 429, 5xx and timeouts, within "
        "`rerank_timeout`.",
    )
    graph_in_memory: bool = Field(
        True,
        description="Traversals and paths walk an in-memory copy of the graph's structure, "
        "loaded on first use (about 100 MB per 100,000 facts and 500,000 links); `false` walks "
        "in SQL, using no memory for it (docs/graph.md#traversal).",
    )
    read_threads: int = Field(
        0,
        ge=0,
        le=256,
        description="Reads one API key (or the keyless callers) runs at once in `graphmem "
        "serve`'s worker threads; the process runs twice that in all, serving keys in turn, so "
        "another key always finds threads free (docs/security.md#fair-shares). 0: one per CPU "
        "core. More threads do not make Python faster, and a write's group commit shares the "
        "interpreter with every one of them: under mixed load, fewer let writes through "
        "(docs/operations.md).",
    )
    switch_interval_ms: float = Field(
        0.5,
        gt=0,
        le=100,
        description="How long one thread of `graphmem serve` may hold Python's interpreter "
        "before another may take it (`sys.setswitchinterval`; Python's default is 5 ms). The "
        "writer's many short SQLite calls each give it up, so under read load a write waits "
        "that long per call: shorter lets writes through (docs/operations.md).",
    )
    track_access: bool = Field(
        True,
        description="Current-time searches and lookups count accesses and restart the TTL of "
        "refreshable facts.",
    )
    access_write_interval: float = Field(
        1.0,
        ge=0,
        le=3600,
        description="Seconds after writing counted accesses during which new ones wait in "
        "memory; they go out with the next write, the first search after the interval, or at "
        "close. `0` writes each search's accesses at once (each such write costs the next "
        "search its page cache).",
    )
    cold_after_days: float = Field(
        0.0,
        ge=0,
        description="Days after which a fact no read has returned and nothing has confirmed "
        "(its last access or confirmation) is cold: recall leaves it out unless asked, search "
        "still finds it; pinned facts never are. `0`: only facts made cold explicitly.",
    )
    recall_profile: bool = Field(
        False,
        description="`recall` leads the block with the profile of each entity the prompt names "
        "(at most two; its current values by key, in a quarter of the budget at most; "
        "[concepts.md](concepts.md#profiles)); a call's `profile` argument overrides it.",
    )
    recall_tokenizer: Path | None = Field(
        None,
        description="A `tokenizer.json` (Hugging Face tokenizers format, e.g. your chat "
        "model's) that counts the tokens of `recall`'s budget exactly; none: about 4 "
        "characters a token.",
    )
    sql_time_limit: float = Field(
        10.0,
        ge=0,
        le=3600,
        description="Seconds one request's reads may spend in SQLite (a GraphQL request's "
        "fields all together, or one MCP tool call); past it the statement is interrupted and "
        "the request fails with `TIMEOUT` (a `QueryTimeout` in Python, through "
        "`Memory.time_limit()`). `0` disables. Writes are not interrupted: a batch is bounded "
        "by its size.",
    )
    store_secrets: Literal["allow", "refuse", "redact"] = Field(
        "allow",
        description="What a direct write (`store`, `store_many`, GraphQL, MCP, CLI, import "
        "aside) does with a fact whose text, value, summary, why or context holds a secret "
        "(a password, key, token, card number…; [agents.md](agents.md#secrets)): `allow` stores "
        "it as given, `refuse` refuses the write (`INVALID_INPUT`, nothing stored), `redact` "
        "stores it with each secret replaced by `[secret]`. `capture` always skips a message "
        "holding one.",
    )
    capture_max_chars: int = Field(
        5000,
        ge=10,
        le=10_000,
        description="Longest message `capture` draws facts from, in characters; a longer one "
        "is still kept as turns (cut into parts), no fact is drawn from it.",
    )
    turn_decay_class: DecayClass = Field(
        "turn",
        description="Decay class of the turns `capture` keeps of a conversation (any class of "
        "[concepts.md](concepts.md#decay)): the default, `turn`, keeps a turn 180 days "
        "from when it was stored, each recall that shows it starting the 180 days again.",
    )

    host: str = Field(
        "127.0.0.1",
        description="Address `graphmem serve` binds to. Any other than loopback is refused "
        "until an API key exists (`graphmem create-key`).",
    )
    port: int = Field(8420, ge=1, le=65535, description="Port `graphmem serve` listens on.")
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        le=10_485_760,
        description="Largest request body, in bytes; larger ones get 413 before they are parsed.",
    )
    graphql_max_depth: int = Field(
        12,
        ge=2,
        le=50,
        description="Deepest selection nesting of a GraphQL document, introspection's included "
        "(its `ofType` chains count no depth).",
    )
    graphql_max_tokens: int = Field(
        5000, ge=100, le=100_000, description="Most tokens in a GraphQL document."
    )
    graphql_max_aliases: int = Field(
        30, ge=1, le=1000, description="Most field aliases in a GraphQL document."
    )
    graphql_max_cost: int = Field(
        500_000,
        ge=100,
        le=10_000_000,
        description="Highest worst-case cost of a GraphQL document: the most list items its "
        "answer may hold, each list's page size times the items above it (GitHub's node "
        "limit; docs/security.md). A costlier document is refused with `TOO_COSTLY` before it "
        "runs.",
    )
    graphql_max_response_bytes: int = Field(
        33_554_432,
        ge=65_536,
        le=1_073_741_824,
        description="Largest GraphQL answer, in bytes of JSON; a larger one is replaced by a "
        "`TOO_COSTLY` error.",
    )
    rate_limit_per_minute: int = Field(
        5_000_000,
        ge=0,
        description="Cost points each API key may spend per minute (a bucket refilled "
        "continuously; a GraphQL document spends its cost, an MCP tool call its points: a capture one per "
        "1,600 characters begun of each message, other tools their result count); "
        "past it requests get HTTP 429 with `Retry-After`. `0`: no limit. Counted per server "
        "process.",
    )
    server_seconds_per_minute: float = Field(
        120.0,
        ge=0,
        description="Seconds of the server's threads each API key may use per minute, whatever "
        "its requests cost by estimate: each call's time is charged when it ends (refilled "
        "continuously); past it requests get HTTP 429 with `Retry-After`, over GraphQL and "
        "MCP alike. `0`: no limit. Counted per server process.",
    )
    request_timeout: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Seconds one GraphQL query or mutation, or one MCP tool call, may take in "
        "all, waiting included; past it the caller is answered `TIMEOUT` (work already "
        "running in a thread finishes there, holding its key's share, stopped by "
        "`sql_time_limit` and `llm_timeout`).",
    )
    subscription_events_per_second: float = Field(
        200.0,
        ge=0,
        description="Subscription events delivered per second to each API key, all its "
        "subscriptions together; events beyond wait their turn, and a subscription that falls "
        "`SUBSCRIBER_BACKLOG` behind is ended. `0`: no limit.",
    )
    cors_origins: tuple[str, ...] = Field(
        (),
        description="Origins allowed to call the API from a browser page, e.g. "
        "`https://ui.example.com`; none: CORS off.",
    )
    mem0_api: bool = Field(
        False,
        description="Serve mem0's REST API at `/mem0` (a mem0 `MemoryClient`'s host is "
        "`http://<host>:<port>/mem0`), behind the same API keys as `/graphql`: "
        "[clients.md](clients.md#mem0). Off: `/mem0` answers 404.",
    )
    mem0_max_owners: int = Field(
        256,
        ge=1,
        le=100_000,
        description="Most mem0 owners (user, agent, app or run ids) whose namespaces one process "
        "keeps open: each is a namespace of its own, open until the server stops (about 2.5 MB, "
        "a thread and 9 file descriptors each). A request for another owner is refused "
        "`UNAVAILABLE` (503); raise it with the memory and file descriptors to match.",
    )
    read_stated_time: bool = Field(
        True,
        description='Read the dates and periods a fact\'s text states ("yesterday", "in 2019") '
        "at write time, as its stated time: ranked by a query's time words like valid time, "
        "never changing what a read sees.",
    )
    stated_valid_from: bool = Field(
        False,
        description="A write that gives no `valid_from` starts its valid time at the start of "
        'the time its text states (per write: `valid_from="stated"`).',
    )
    prune_interval: float = Field(
        3600.0,
        ge=0,
        description="Seconds between the scheduled prunes of each namespace (the maintenance job "
        "`prune`, run by `graphmem serve` and `graphmem maintain`); `0`: never scheduled.",
    )
    classify_interval: float = Field(
        86_400.0,
        ge=0,
        description="Seconds between the scheduled auto-classifications of each namespace (the "
        "maintenance job `classify`: facts of category `other` relabelled by the chat model, "
        "categories discovered; with `classifier = llm`, else it changes nothing); `0`: never "
        "scheduled.",
    )
    reflect_interval: float = Field(
        0.0,
        ge=0,
        description="Seconds between the scheduled reflections of each namespace (the maintenance "
        "job `reflect`, one chat request each, e.g. `86400`); `0`: never scheduled.",
    )
    reflect_window_days: float = Field(
        14.0,
        gt=0,
        le=3650,
        description="Days of facts a reflection reads (those recorded since).",
    )
    consolidate_interval: float = Field(
        0.0,
        ge=0,
        description="Seconds between the scheduled consolidations of each namespace (the "
        "maintenance job `consolidate`, e.g. `86400`); `0`: never scheduled.",
    )
    consolidate_similarity: float = Field(
        0.92,
        ge=0.5,
        le=1.0,
        description="Cosine similarity at which two live facts count as near-duplicates for "
        "consolidation.",
    )
    otel_endpoint: str | None = Field(
        None,
        description="Base URL of an OTLP/HTTP collector, e.g. `http://127.0.0.1:4318`: "
        "`graphmem serve` and `graphmem mcp` export their spans to it, at `/v1/traces` (needs "
        "the `otel` extra; docs/operations.md, Tracing); none: "
        "`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`, else no tracing.",
    )
    otel_service_name: str | None = Field(
        None,
        description="The `service.name` of the exported spans; none: `OTEL_SERVICE_NAME`, else "
        "`graphmem`.",
    )

    @model_validator(mode="after")
    def _rate_covers_a_document(self) -> Settings:
        # A document costing more than a key's minute of points could never run.
        if 0 < self.rate_limit_per_minute < self.graphql_max_cost:
            raise ValueError(
                f"rate_limit_per_minute ({self.rate_limit_per_minute:,}) must be 0 or at least "
                f"graphql_max_cost ({self.graphql_max_cost:,})"
            )
        return self

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Defaults, then the config file, then the environment, then explicit overrides."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        path = config_file or (
            Path(env[f"{ENV_PREFIX}CONFIG"])
            if f"{ENV_PREFIX}CONFIG" in env
            else Path(DEFAULT_CONFIG_FILE)
        )
        if path.is_file():
            try:
                values.update(tomllib.loads(path.read_text(encoding="utf-8")))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise InvalidInput(f"cannot read config file {path}: {exc}") from None
        elif config_file is not None:
            raise InvalidInput(f"config file {path} does not exist")
        for name, info in cls.model_fields.items():
            raw = env.get(ENV_PREFIX + name.upper())
            if raw is None:
                continue
            if info.annotation == tuple[str, ...]:
                values[name] = tuple(part.strip() for part in raw.split(",") if part.strip())
            else:
                values[name] = raw
        for name in ("embed_api_key", "llm_api_key"):
            if values.get(name) is None and "OPENAI_API_KEY" in env:
                values[name] = env["OPENAI_API_KEY"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidInput(f"setting {where}: {first['msg']}") from None
