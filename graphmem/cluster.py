"""Throwaway servers on loopback for trying the scale-out mode and for its tests.

``ObjectStore`` starts an S3-compatible server (moto) for the vector indexes.

``Postgres`` starts Debian's PostgreSQL (the ``postgresql`` package) in a temporary directory:
initdb and pg_ctl run as the ``postgres`` user when this process is root (initdb refuses root),
as the current user otherwise; the server listens on 127.0.0.1 only, on a free port, with its
socket inside the directory. It makes a role and a database for graphmem; the role is not a
superuser, so the row-level security of the PostgreSQL store applies to it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import urllib.request
from pathlib import Path
from typing import Any, Final

import psycopg

#: Where Debian installs PostgreSQL's server programs (newest version first).
_PG_ROOT: Final = Path("/usr/lib/postgresql")
#: The role and database made for graphmem.
ROLE: Final = "graphmem"
DATABASE: Final = "graphmem"


class Unavailable(RuntimeError):
    """A component is not installed here (the message says what to install)."""


def postgres_bin() -> Path:
    """The directory of PostgreSQL's server programs. Unavailable if none is installed."""
    versions = sorted(
        (p for p in _PG_ROOT.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    if versions:
        return versions[0]
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise Unavailable("PostgreSQL is not installed (Debian: apt-get install postgresql)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Postgres:
    """A PostgreSQL server in a directory (default: a new temporary one, which the
    ``postgres`` user can reach); ``url`` reaches graphmem's database."""

    def __init__(
        self, directory: Path | None = None, *, port: int | None = None, auth: str = "trust"
    ) -> None:
        self.bin = postgres_bin()
        self.directory = (
            Path(tempfile.mkdtemp(prefix="graphmem-pg-")) if directory is None else directory
        )
        self.port = port or free_port()
        self.data = self.directory / "data"
        self._user = "postgres" if os.geteuid() == 0 else None
        #: How TCP connections authenticate (``trust``, or ``scram-sha-256`` to check
        #: passwords); the superuser always connects through the socket, trusted.
        self.auth = auth
        self.url = f"postgresql://{ROLE}:{ROLE}@127.0.0.1:{self.port}/{DATABASE}"
        self._admin: psycopg.Connection[Any] | None = None

    def start(self) -> Postgres:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        if not (self.data / "PG_VERSION").exists():
            self._run(
                "initdb", "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
                f"--auth-host={self.auth}",
                "--encoding=UTF8", "--locale=C", "--no-sync",
            )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
            " -c max_connections=200 -c shared_buffers=256MB"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.directory / "server.log"),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip
        self.sql(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN"
            f" CREATE ROLE {ROLE} LOGIN PASSWORD '{ROLE}'; END IF; END $$"
        )
        if not self.sql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"):
            self.sql(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
        return self

    def database(self, name: str, *, template: str | None = None) -> str:
        """Make an empty database ``name`` for graphmem (a copy of ``template``, if given);
        its URL."""
        copy = f" TEMPLATE {template}" if template else ""
        self.sql(f"CREATE DATABASE {name} OWNER {ROLE}{copy}")
        return f"postgresql://{ROLE}:{ROLE}@127.0.0.1:{self.port}/{name}"

    def superuser(self, database: str = "postgres") -> psycopg.Connection[Any]:
        """A new superuser connection (autocommit) to ``database``, through the socket."""
        return psycopg.connect(
            f"host={self.directory} port={self.port} user=postgres dbname={database}",
            autocommit=True,
        )

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        """Run one statement as the superuser, in the ``postgres`` database; its rows."""
        if self._admin is None or self._admin.closed:
            self._admin = self.superuser()
        cursor = self._admin.execute(statement)
        return cursor.fetchall() if cursor.description else []

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.directory)


class ObjectStore:
    """An S3-compatible server on loopback for the vector indexes: moto's server mode (a
    development dependency; production uses any S3-compatible store), in this process, with
    one bucket. ``settings`` are what a graphmem process needs to reach it."""

    def __init__(self, bucket: str = "graphmem") -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise Unavailable("moto is not installed (pip install 'moto[server]')") from None
        self.bucket = bucket
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self.endpoint = ""
        self._serving = False

    def start(self) -> ObjectStore:
        """Serve (again, after ``stop``: on the same port, with the same objects)."""
        self._server.start()
        self._serving = True
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        request = urllib.request.Request(f"{self.endpoint}/{self.bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=10):
            pass
        return self

    def settings(self, prefix: str) -> dict[str, str]:
        """The settings that put vector indexes under ``prefix`` in the bucket."""
        return {
            "vectors": f"s3://{self.bucket}/{prefix}",
            "s3_endpoint": self.endpoint,
            "s3_access_key_id": "graphmem",
            "s3_secret_access_key": "graphmem",
        }

    def stop(self) -> None:
        """Stop serving (the objects stay in this process's memory)."""
        if self._serving:
            self._server.stop()
            self._serving = False
