"""Shared fixtures: a Memory, or the GraphQL service, on a temporary data directory with the hash
embedder and a controllable clock; and the OpenAI-compatible stub. A test file that needs other
settings overrides ``settings``, and ``mem``, ``app`` and ``service`` follow. The helpers behind
them (the clock, the clients, the stub) are in ``support/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from graphmem.server import create_app
from starlette.applications import Starlette

from devtools.cluster import ObjectStore, Postgres, Unavailable
from graphmem import KeyStore, Memory, Settings
from graphmem.client import Client
from graphmem.storage import open_keys
from graphmem.storage.postgres import schema as pgschema

from .support.clock import Clock
from .support.graphql_clients import InProcess, LiveServer
from .support.openai_stub import OpenAIStub


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's GRAPHMEM_* environment and ./graphmem.toml out of the tests."""
    import os

    for name in list(os.environ):
        if name.startswith("GRAPHMEM_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The test's data directory: one folder per namespace, and the API keys."""
    return tmp_path / "data"


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStore]:
    """An S3-compatible server for the session (moto, on loopback); skipped, saying why,
    without moto."""
    try:
        server = ObjectStore().start()
    except Unavailable as exc:
        pytest.skip(f"vectors on S3 need an S3-compatible server: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def vector_settings(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """With ``--vectors s3``, the settings that put the test's vector indexes in a new bucket
    of the session's S3-compatible server (also in GRAPHMEM_* variables, for the commands a
    test runs); else none."""
    if request.config.getoption("--vectors") != "s3":
        return {}
    server: ObjectStore = request.getfixturevalue("object_store")
    values = server.settings("v", bucket=server.new_bucket())
    for name, value in values.items():
        monkeypatch.setenv(f"GRAPHMEM_{name.upper()}", value)
    return values


@pytest.fixture
def settings(data_dir: Path, store_url: str | None, vector_settings: dict[str, str]) -> Settings:
    return Settings(embedder="hash", data_dir=data_dir, store=store_url, **vector_settings)


@pytest.fixture
def keys(settings: Settings) -> Iterator[KeyStore]:
    """The API keys of the test's service (the key file, or the PostgreSQL store's table)."""
    store = open_keys(settings)
    yield store
    store.close()


@pytest.fixture
def mem(
    request: pytest.FixtureRequest, data_dir: Path, clock: Clock, settings: Settings
) -> Iterator[Memory]:
    """Memory in process; with ``--api client``, a ``graphmem.Client`` of a live service on the
    same settings and clock instead, so that a suite run both ways shows the Client keeps
    Memory's contract. The service runs no maintenance of its own there: its records would
    move transaction time past what the test's clock says."""
    if request.config.getoption("--api") == "memory":
        with Memory.open(data_dir, settings=settings, clock=clock) as memory:
            yield memory
        return
    marker = request.node.get_closest_marker("in_process")
    if marker is not None:
        pytest.skip(f"in process only: {marker.args[0]}")
    quiet = settings.model_copy(update={"prune_interval": 0, "classify_interval": 0})
    with (
        LiveServer(create_app(quiet, clock=clock)) as server,
        Client(server.base_url) as client,
    ):
        yield cast(Memory, client)


@pytest.fixture
def app(settings: Settings, clock: Clock) -> Starlette:
    """The service on ``settings``: keyless (loopback) until the test creates a key."""
    return create_app(settings, clock=clock)


@pytest.fixture
def service(app: Starlette) -> Iterator[InProcess]:
    """A client of ``app`` in this process."""
    with InProcess(app) as client:
        yield client


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--api",
        choices=("memory", "client"),
        default="memory",
        help="what the mem fixture gives: Memory in process, or a Client of a live service "
        "(tests marked in_process are skipped)",
    )
    parser.addoption(
        "--store",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the store the Memory and service fixtures open (postgresql: a database of the "
        "session's PostgreSQL server, new for each test)",
    )
    parser.addoption(
        "--vectors",
        choices=("local", "s3"),
        default="local",
        help="where the Memory and service fixtures keep vector indexes (s3: a prefix of "
        "the session's S3-compatible server, new for each test)",
    )


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A PostgreSQL server for the session (Debian's postgresql package, in a temporary
    directory on loopback); the tests that need it skip, saying why, when it is not installed."""
    try:
        server = Postgres()
    except Unavailable as exc:
        pytest.skip(f"PostgreSQL store tests need PostgreSQL: {exc}")
    server.start()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture(scope="session")
def postgres_url(postgres: Postgres) -> str:
    """The session's PostgreSQL database (tests sharing it use namespaces of their own)."""
    return postgres.url


@pytest.fixture(scope="session")
def _emptied(postgres: Postgres) -> Iterator[tuple[str, psycopg.Connection[Any]]]:
    """A database for the tests run with ``--store postgresql``, migrated, with a superuser
    connection that empties it before each test (a copy per test costs 0.2 s more)."""
    url = postgres.database("graphmem_tests")
    with psycopg.connect(url, autocommit=True) as conn:
        pgschema.apply(conn)
    with postgres.superuser("graphmem_tests") as conn:
        yield url, conn


@pytest.fixture
def store_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The store of the test's Memory and service: None (SQLite files under the data
    directory), or with ``--store postgresql`` the session's test database, emptied (its URL
    also in GRAPHMEM_STORE, for the commands a test runs)."""
    if request.config.getoption("--store") != "postgresql":
        return None
    url, admin = request.getfixturevalue("_emptied")
    tables = admin.execute(
        "SELECT tablename FROM pg_tables WHERE tablename LIKE 'gm\\_%' AND tablename <> 'gm_schema'"
    ).fetchall()
    with admin.transaction():  # DELETE: a TRUNCATE of every table takes 0.1 s
        admin.execute("SET LOCAL session_replication_role = replica")  # no triggers
        for (table,) in tables:
            admin.execute(f"DELETE FROM {table}")
        for (sequence,) in admin.execute("SELECT sequencename FROM pg_sequences").fetchall():
            admin.execute(f"ALTER SEQUENCE {sequence} RESTART")
    monkeypatch.setenv("GRAPHMEM_STORE", url)
    return url


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    """The OpenAI-compatible stub (embeddings and chat) serving on a loopback port."""
    server = OpenAIStub()
    with server:
        yield server
