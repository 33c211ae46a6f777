"""Settings: defaults, then a TOML config file, then ``GRAPHMEM_*`` environment variables.

The config file is ``$GRAPHMEM_CONFIG`` if set, else ``graphmem.toml`` in the current directory
when it exists. Each field below is documented once, here; docs/configuration.md lists them.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidInput

ENV_PREFIX = "GRAPHMEM_"
DEFAULT_CONFIG_FILE = "graphmem.toml"


class Settings(BaseModel):
    """Every tunable of a graphmem process."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dir: Path = Field(Path("data"), description="Directory holding one folder per namespace.")
    namespace: str = Field("default", description="Namespace used when none is named.")
    embedder: Literal["local", "openai", "hash"] = Field(
        "local",
        description="Embedding provider: local MiniLM ONNX, an OpenAI-compatible "
        "endpoint, or the hash embedder (tests only).",
    )
    embed_base_url: str | None = Field(
        None,
        description="Base URL of the OpenAI-compatible embeddings API (None: api.openai.com).",
    )
    embed_api_key: str | None = Field(
        None, description="API key for the embeddings endpoint; falls back to OPENAI_API_KEY."
    )
    embed_model: str = Field(
        "text-embedding-3-small", description="Embedding model name at the endpoint."
    )
    embed_dimensions: int | None = Field(
        None,
        ge=1,
        le=8192,
        description="Requested embedding size (None: the model's own, learnt from the first call).",
    )
    embed_encoding: Literal["float", "base64"] = Field(
        "float",
        description="How embeddings are asked to travel: JSON floats, or base64 float32 (smaller); "
        "either answer is accepted.",
    )
    embed_timeout: float = Field(30.0, gt=0, description="Seconds per embedding request.")
    embed_max_retries: int = Field(
        4, ge=0, le=10, description="Retries, with exponential backoff, on 429, 5xx and timeouts."
    )
    embed_batch_size: int = Field(64, ge=1, le=2048, description="Texts per embedding call.")
    hash_dimensions: int = Field(256, ge=8, le=4096, description="Size of hash-embedder vectors.")
    fuzzy_dedup: bool = Field(
        True, description="Skip a write whose normalised text matches a live fact."
    )
    vector_dedup_threshold: float = Field(
        0.95,
        ge=0,
        le=1.0001,
        description="Cosine at or above which a new fact shares its near-duplicate's vector "
        "instead of writing its own (above 1 disables).",
    )
    autolink: bool = Field(
        True,
        description="Link each new fact RELATED_TO its most similar live facts (cosine at or "
        "above autolink_threshold).",
    )
    autolink_threshold: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Cosine for a similarity link; unset = the value calibrated for the "
        "embedder (docs/graph.md).",
    )
    autolink_max: int = Field(5, ge=0, le=50, description="Most similarity links per new fact.")
    entity_links: bool = Field(
        False,
        description="Link each new fact RELATED_TO the most recent live facts naming the same "
        "entity.",
    )
    entity_links_max: int = Field(
        5, ge=0, le=50, description="Most same-entity links per new fact (bounds hubs)."
    )
    classifier: Literal["rules", "llm", "off"] = Field(
        "rules",
        description="Classify-before-write: offline entity/key rules, an LLM over an "
        "OpenAI-compatible chat endpoint, or off (always ADD).",
    )
    llm_base_url: str | None = Field(
        None, description="Base URL of the OpenAI-compatible chat API (None: api.openai.com)."
    )
    llm_api_key: str | None = Field(
        None, description="API key for the chat endpoint; falls back to OPENAI_API_KEY."
    )
    llm_model: str = Field("gpt-4o-mini", description="Chat model that classifies writes.")
    llm_timeout: float = Field(60.0, gt=0, description="Seconds per chat request.")
    llm_max_retries: int = Field(
        4, ge=0, le=10, description="Retries, with exponential backoff, on 429, 5xx and timeouts."
    )
    llm_batch_size: int = Field(
        50, ge=1, le=500, description="Most new facts one classification request carries."
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
        description="Keys that hold several values at once: a new value is added, not an update.",
    )
    fts_weight: float = Field(
        0.6,
        ge=0,
        le=1,
        description="Weight of the keyword leg in hybrid fusion (the vector leg gets the rest).",
    )
    fusion_candidates: int = Field(
        200, ge=10, le=5000, description="Candidates taken from each leg before fusion."
    )
    track_access: bool = Field(
        True, description="Current-time search and lookup count accesses and refresh TTLs."
    )
    access_write_interval: float = Field(
        1.0,
        ge=0,
        le=3600,
        description="Seconds after writing counted accesses during which new ones wait in "
        "memory (they go out with the next write, the first search after the interval, or at "
        "close); 0 writes every search's accesses at once.",
    )
    recall_tokenizer: Path | None = Field(
        None,
        description="A tokenizer.json (Hugging Face tokenizers format) that counts the tokens of "
        "the recall budget; None: about 4 characters per token.",
    )
    sql_time_limit: float = Field(
        10.0,
        ge=0,
        le=3600,
        description="Seconds a request's reads may spend in SQLite before they are stopped "
        "with a TIMEOUT error (0: no limit).",
    )
    capture_max_chars: int = Field(
        5000,
        ge=10,
        le=10_000,
        description="Longest message capture considers, in characters (longer ones are skipped).",
    )

    host: str = Field(
        "127.0.0.1",
        description="Address `graphmem serve` binds to; other than loopback only once API keys "
        "exist.",
    )
    port: int = Field(8420, ge=1, le=65535, description="Port `graphmem serve` listens on.")
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        le=10_485_760,
        description="Largest HTTP request body accepted, in bytes (413 above it; at most 10 MiB).",
    )
    graphql_max_depth: int = Field(
        12, ge=2, le=50, description="Deepest selection nesting a GraphQL document may use."
    )
    graphql_max_tokens: int = Field(
        5000, ge=100, le=100_000, description="Most tokens a GraphQL document may have."
    )
    graphql_max_aliases: int = Field(
        30, ge=1, le=1000, description="Most field aliases a GraphQL document may use."
    )
    cors_origins: tuple[str, ...] = Field(
        (), description="Origins allowed to call the API from a browser (none: CORS off)."
    )
    prune_interval: float = Field(
        3600.0,
        ge=0,
        description="Seconds between the server's background prunes of each open namespace "
        "(0: only at start-up).",
    )

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
