"""Settings: defaults, then a TOML file, then GRAPHMEM_* variables, then explicit values."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from graphmem import InvalidInput, Memory, Settings


def test_defaults_are_the_local_embedder_and_the_default_namespace() -> None:
    s = Settings.load(environ={})
    assert (s.embedder, s.namespace, s.data_dir) == ("local", "default", Path("data"))


def test_the_environment_overrides_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "graphmem.toml"
    config.write_text('embedder = "hash"\nnamespace = "from-file"\nfts_weight = 0.5\n')
    s = Settings.load(
        environ={
            "GRAPHMEM_CONFIG": str(config),
            "GRAPHMEM_NAMESPACE": "from-env",
            "GRAPHMEM_MULTI_VALUED_KEYS": "kids, pets",
        }
    )
    assert (s.embedder, s.namespace, s.fts_weight) == ("hash", "from-env", 0.5)
    assert s.multi_valued_keys == ("kids", "pets")
    assert Settings.load(environ={"GRAPHMEM_CONFIG": str(config)}, namespace="x").namespace == "x"


def test_the_provider_settings_come_from_their_documented_variables() -> None:
    s = Settings.load(
        environ={
            "GRAPHMEM_CLASSIFIER": "llm",
            "GRAPHMEM_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
            "GRAPHMEM_LLM_MODEL": "qwen2.5:3b",
            "GRAPHMEM_EMBEDDER": "openai",
            "GRAPHMEM_EMBED_BASE_URL": "http://127.0.0.1:8000/v1",
            "GRAPHMEM_EMBED_MODEL": "bge-small",
            "GRAPHMEM_EMBED_DIMENSIONS": "384",
            "GRAPHMEM_EMBED_API_KEY": "embed-key",
            "OPENAI_API_KEY": "shared-key",
        }
    )
    assert (s.classifier, s.llm_base_url, s.llm_model) == (
        "llm",
        "http://127.0.0.1:11434/v1",
        "qwen2.5:3b",
    )
    assert (s.embedder, s.embed_base_url, s.embed_model, s.embed_dimensions) == (
        "openai",
        "http://127.0.0.1:8000/v1",
        "bge-small",
        384,
    )
    assert (s.embed_api_key, s.llm_api_key) == ("embed-key", "shared-key")
    with pytest.raises(InvalidInput, match="classifier"):
        Settings.load(environ={"GRAPHMEM_CLASSIFIER": "oracle"})


def test_graphmem_embedder_selects_the_embedder_for_memory_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHMEM_EMBEDDER", "hash")
    with Memory.open(tmp_path) as mem:
        assert mem.embedder.provider == "hash"


@pytest.mark.parametrize(
    "environ",
    [
        {"GRAPHMEM_EMBEDDER": "magic"},
        {"GRAPHMEM_FTS_WEIGHT": "heavy"},
        {"GRAPHMEM_FTS_WEIGHT": "2"},
        {"GRAPHMEM_CONFIG": "/nonexistent/graphmem.toml"},
    ],
)
def test_bad_settings_are_rejected_with_a_clear_error(environ: dict[str, str]) -> None:
    if "GRAPHMEM_CONFIG" in environ:
        with pytest.raises(InvalidInput):
            Settings.load(config_file=Path(environ["GRAPHMEM_CONFIG"]), environ={})
        return
    with pytest.raises(InvalidInput, match="setting"):
        Settings.load(environ=environ)


def test_a_malformed_config_file_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("embedder = \n")
    with pytest.raises(InvalidInput, match="config file"):
        Settings.load(config_file=bad, environ={})


def test_a_server_process_takes_the_switch_interval_setting() -> None:
    from graphmem.server.http.app import tune_process

    before = sys.getswitchinterval()
    try:
        tune_process(Settings(switch_interval_ms=0.5))
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    finally:
        sys.setswitchinterval(before)
    with pytest.raises(ValidationError):
        Settings(switch_interval_ms=0)
