"""Throwaway servers on loopback for trying the scale-out mode and for its tests.

``Cluster`` starts the whole topology of docs/scale-out.md: PostgreSQL, an S3-compatible server,
``graphmem serve`` replicas (``Replica``) and haproxy in front of them (``Router``). ``python -m
devtools.cluster up`` (from the repository's root) runs one in the foreground until it is told
to stop (``make cluster`` starts it in the background, ``make cluster-stop`` stops exactly what
it started). It is a development tool: the installed package does not hold it.

``ObjectStore`` starts an S3-compatible server (moto) for the vector indexes.

``Postgres`` starts Debian's PostgreSQL (the ``postgresql`` package) in a temporary directory:
initdb and pg_ctl run as the ``postgres`` user when this process is root (initdb refuses root),
as the current user otherwise; the server listens on 127.0.0.1 only, on a free port, with its
socket inside the directory. It makes a role and a database for graphmem; the role is not a
superuser, so the row-level security of the PostgreSQL store applies to it. A ``Postgres`` made
with ``standby_of`` another is a streaming standby of it (a base backup by ``pg_basebackup -R``
through a replication slot), which ``promote`` makes the primary; ``Cluster(standby=True)`` gives
the replicas a multi-host URL that finds whichever of the two accepts writes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
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
        self,
        directory: Path | None = None,
        *,
        port: int | None = None,
        auth: str = "trust",
        standby_of: Postgres | None = None,
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
        #: The server this one streams from until it is promoted (None: a primary).
        self.standby_of = standby_of
        self._admin: psycopg.Connection[Any] | None = None

    @property
    def slot(self) -> str:
        """The replication slot this standby streams through, on its primary: the primary
        keeps the WAL the standby has not received yet, however long it lags."""
        return f"standby_{self.port}"

    def start(self) -> Postgres:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        if self.standby_of is not None and not (self.data / "PG_VERSION").exists():
            primary = self.standby_of
            # -R writes standby.signal and primary_conninfo (the primary's socket, as the
            # superuser, trusted); -C -S make the slot the standby streams through; a fast
            # checkpoint, or the backup waits for a spread one (minutes on a busy primary).
            self._run(
                "pg_basebackup", "-D", str(self.data), "-h", str(primary.directory),
                "-p", str(primary.port), "-U", "postgres", "-R", "-X", "stream",
                "-C", "-S", self.slot, "--checkpoint=fast", "--no-sync",
            )  # fmt: skip
        elif not (self.data / "PG_VERSION").exists():
            self._run(
                "initdb", "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
                f"--auth-host={self.auth}",
                "--encoding=UTF8", "--locale=C", "--no-sync",
            )  # fmt: skip
        # Every server can be a primary with standbys (wal_level replica, WAL senders) and a
        # standby that answers reads (hot_standby): a promoted standby takes one in turn.
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
            " -c max_connections=200 -c shared_buffers=256MB"
            " -c wal_level=replica -c max_wal_senders=10 -c max_replication_slots=10"
            " -c hot_standby=on"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.directory / "server.log"),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip
        if self.standby_of is not None:
            self._wait(self.streaming, "stream from its primary")
            return self
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

    def streaming(self) -> bool:
        """Whether this standby receives its primary's WAL now."""
        return bool(self.sql("SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming'"))

    def synchronous(self, on: bool = True) -> None:
        """Acknowledge a commit only once a standby has flushed it (``synchronous_standby_names``
        = '*', with ``synchronous_commit`` = on), or (``on=False``) as soon as this server has:
        the standby then lags by up to the WAL not yet sent."""
        names = "'*'" if on else "''"
        self.sql(f"ALTER SYSTEM SET synchronous_standby_names = {names}")
        self.sql("ALTER SYSTEM SET synchronous_commit = on")
        self.sql("SELECT pg_reload_conf()")

    def promote(self, timeout: float = 60) -> float:
        """Make this standby the primary (``pg_ctl promote``); returns once it accepts writes,
        with the seconds that took."""
        began = time.monotonic()
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", str(int(timeout)), "promote")
        self._wait(lambda: not self.sql("SELECT pg_is_in_recovery()")[0][0], "accept writes")
        self.standby_of = None
        return time.monotonic() - began

    def kill(self) -> None:
        """SIGKILL to the postmaster and its processes, as a machine that is lost: no
        checkpoint, no goodbye to the clients or the standby."""
        if self._admin is not None:
            with contextlib.suppress(psycopg.Error):
                self._admin.close()
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        for child in [pid, *_children(pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(psycopg.Error):
                self._admin.close()
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):  # killed: none to stop
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.directory)

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready():
                    return
            except psycopg.Error:
                if self._admin is not None:  # reconnect at the next try
                    self._admin.close()
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL on port {self.port} did not {what} in {timeout} s")
            time.sleep(0.05)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(stat.read_text().rpartition(")")[2].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


class ObjectStore:
    """An S3-compatible server on loopback for the vector indexes: moto's server mode (a
    development dependency; production uses any S3-compatible store) with one bucket, in this
    process (restartable with its objects kept: the outage tests) or, ``separate``, in a process
    of its own (the live topology: it does not share this process's interpreter lock with the
    clients). ``settings`` are what a graphmem process needs to reach it."""

    def __init__(self, bucket: str = "graphmem", *, separate: bool = False) -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise Unavailable("moto is not installed (pip install 'moto[server]')") from None
        self.bucket = bucket
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = (
            None
            if separate
            else ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        )
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
        self._process: subprocess.Popen[bytes] | None = None
        self._directory = Path(tempfile.mkdtemp(prefix="graphmem-s3-")) if separate else None
        self._serving = False

    @property
    def log(self) -> Path | None:
        """The separate server's log: one line per request it answered."""
        return None if self._directory is None else self._directory / "s3.log"

    def start(self) -> ObjectStore:
        """Serve (again, after ``stop``: on the same port; in this process, with the same
        objects)."""
        if self._server is not None:
            self._server.start()
        else:
            assert self.log is not None
            with self.log.open("ab") as sink:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        self._serving = True
        deadline = time.monotonic() + 30
        while True:
            try:
                self._create(self.bucket)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.1)

    def new_bucket(self) -> str:
        """A new, empty bucket's name. moto lists a bucket by going through every object in
        it, so tests sharing one bucket for a session would see each listing (LanceDB lists a
        table's versions at every write) slow down as the session goes on."""
        name = f"b{uuid.uuid4().hex}"
        self._create(name)
        return name

    def _create(self, bucket: str) -> None:
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def settings(
        self, prefix: str, *, endpoint: str | None = None, bucket: str | None = None
    ) -> dict[str, str]:
        """The settings that put vector indexes under ``prefix`` in ``bucket`` (by default the
        server's first), reached at ``endpoint`` if given (a devtools.faults.FaultProxy in
        front of it)."""
        return {
            "vectors": f"s3://{bucket or self.bucket}/{prefix}",
            "s3_endpoint": endpoint or self.endpoint,
            "s3_access_key_id": "graphmem",
            "s3_secret_access_key": "graphmem",
        }

    def stop(self) -> None:
        """Stop serving (in this process the objects stay in memory; a separate server's are
        gone)."""
        if not self._serving:
            return
        self._serving = False
        if self._server is not None:
            self._server.stop()
        elif self._process is not None:
            _terminate(self._process)
            if self._directory is not None:
                shutil.rmtree(self._directory, ignore_errors=True)


#: How long a replica or the router may take to answer /healthz after it starts.
STARTUP_S: Final = 120.0


def _terminate(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if ``process`` has not ended within ``timeout`` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def skewed(seconds: float) -> dict[str, str]:
    """The environment that moves a process's wall clock by ``seconds``: libfaketime (Debian's
    ``faketime`` package) preloaded into the process itself (the ``faketime`` wrapper would run
    it as a child, which a signal to the wrapper does not reach); its monotonic clock is left
    alone.

    ``FAKETIME_FORCE_MONOTONIC_FIX=0``: with the fix that libfaketime 0.9.10 applies by default
    to condition variables on the monotonic clock, every timed wait of CPython's interpreter lock
    went through it and two busy threads ran 15 times slower (a replica under load answered in
    seconds); the monotonic clock is not faked here, so the fix has nothing to do."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))
    found += sorted(Path("/usr/lib/faketime").glob("libfaketime.so.1"))
    if not found:
        raise Unavailable("libfaketime is not installed (Debian: apt-get install faketime)")
    return {
        "LD_PRELOAD": str(found[0]),
        "FAKETIME": f"{seconds:+g}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
    }


def _graphmem_command() -> list[str]:
    """How to run the ``graphmem`` command with this interpreter."""
    script = Path(sys.executable).with_name("graphmem")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from graphmem.server.commands import main; main()"]


class Replica:
    """One ``graphmem serve`` process on a loopback port with the cluster's settings (``env``),
    its log and data directory (which holds no state of record) in ``directory``; ``skew``
    seconds are added to its clock with libfaketime (Debian's ``faketime`` package)."""

    def __init__(
        self, name: str, env: Mapping[str, str], directory: Path, *, skew: float = 0.0
    ) -> None:
        self.name = name
        self.port = free_port()
        self.env = dict(env)
        self.directory = directory
        self.skew = skew
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    def start(self) -> Replica:
        """Start the process (again, after ``kill`` or ``stop``: on the same port)."""
        command = [
            *_graphmem_command(), "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--log-level", "warning",
        ]  # fmt: skip
        env = {**os.environ, **self.env, "GRAPHMEM_DATA_DIR": str(self.directory / self.name)}
        if self.skew:
            env.update(skewed(self.skew))
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        return self

    def wait_ready(self, timeout: float = STARTUP_S) -> None:
        """Wait until the replica answers /healthz; RuntimeError (with its log) if it exits or
        does not answer in time."""
        deadline = time.monotonic() + timeout
        while not _healthy(self.url):
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited:\n{self.log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica {self.name} not ready in {timeout:.0f} s")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL to the replica and every process it started: no cleanup of any kind."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        """A graceful stop (SIGTERM: in-flight requests finish, stores close)."""
        try:
            self._signal(signal.SIGTERM, timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def _signal(self, signum: int, timeout: float | None = None) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):  # its session: it and its children
            os.killpg(self.process.pid, signum)
        self.process.wait(timeout=timeout)


def haproxy_binary() -> str:
    """haproxy's program. Unavailable if it is not installed."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        raise Unavailable("haproxy is not installed (Debian: apt-get install haproxy)")
    return binary


class Router:
    """haproxy (Debian's package) on a loopback port in front of the replicas: a request goes
    to the replica that a consistent hash of its namespace picks (the ``X-Graphmem-Namespace``
    header, else the API key, so one key's requests keep one replica), health checks every
    0.5 s take a dead replica out after two failures, and a request that cannot reach its
    replica is sent to another."""

    def __init__(self, directory: Path, replicas: Sequence[Replica], port: int | None = None):
        self.binary = haproxy_binary()
        self.directory = directory
        self.replicas = list(replicas)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> str:
        servers = "".join(f"    server {r.name} 127.0.0.1:{r.port} check\n" for r in self.replicas)
        return f"""global
    maxconn 4096
defaults
    mode http
    option http-server-close
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    timeout http-request 30s
frontend graphmem
    bind 127.0.0.1:{self.port}
    default_backend replicas
backend replicas
    http-request set-var(txn.route) req.hdr(x-graphmem-namespace)
    http-request set-var(txn.route) req.hdr(authorization) if !{{ var(txn.route) -m found }}
    balance hash var(txn.route)
    hash-type consistent
    option httpchk GET /healthz
    option redispatch
    retries 3
    default-server inter 500ms fall 2 rise 1
{servers}"""

    def start(self) -> Router:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / "haproxy.cfg"
        path.write_text(self.config())
        checked = subprocess.run(
            [self.binary, "-c", "-q", "-f", str(path)], capture_output=True, text=True
        )
        if checked.returncode != 0:
            raise RuntimeError(f"haproxy refused {path}: {checked.stderr or checked.stdout}")
        with (self.directory / "haproxy.log").open("ab") as sink:
            self.process = subprocess.Popen(
                [self.binary, "-db", "-f", str(path)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while not _healthy(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.directory / "haproxy.log").read_text()
                raise RuntimeError(f"haproxy did not start:\n{log[-4000:]}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None:
            _terminate(self.process)


class Cluster:
    """The scale-out topology on loopback: PostgreSQL, an S3-compatible server, ``replicas``
    ``graphmem serve`` processes (``skews``: seconds added to each one's clock) and haproxy,
    everything in one temporary directory (PostgreSQL in one of its own, which the
    ``postgres`` user can reach). ``url`` is haproxy's. With ``standby``, a streaming standby
    of PostgreSQL as well (``synchronous``: a commit is acknowledged once the standby has it),
    and the replicas reach whichever of the two accepts writes (``store_url``)."""

    def __init__(
        self,
        *,
        replicas: int = 3,
        embedder: str = "hash",
        skews: Sequence[float] = (),
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        standby: bool = False,
        synchronous: bool = False,
    ) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="graphmem-cluster-"))
        self._with_standby = standby
        self._synchronous = synchronous
        self.embedder = embedder
        self._count = replicas
        self._skews = list(skews) + [0.0] * (replicas - len(skews))
        self._port = port
        self._env = dict(env or {})
        self.postgres: Postgres | None = None
        self.standby: Postgres | None = None
        self.objects: ObjectStore | None = None
        self.replicas: list[Replica] = []
        self.router: Router | None = None

    @property
    def url(self) -> str:
        assert self.router is not None, "the cluster is not started"
        return self.router.url

    @property
    def store_url(self) -> str:
        """The replicas' store: the PostgreSQL server's URL, or with a standby both servers'
        in one (libpq's multi-host URL), ``target_session_attrs=read-write`` picking the one
        that accepts writes, so the replicas find a promoted standby by themselves."""
        assert self.postgres is not None
        if self.standby is None:
            return self.postgres.url
        hosts = f"127.0.0.1:{self.postgres.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://{ROLE}:{ROLE}@{hosts}/{DATABASE}?target_session_attrs=read-write"

    def settings(self) -> dict[str, str]:
        """The settings every replica runs with (``Settings(**cluster.settings())``)."""
        assert self.postgres is not None and self.objects is not None
        return {
            "store": self.store_url,
            "embedder": self.embedder,
            **self.objects.settings("vectors"),
        }

    def start(self) -> Cluster:
        haproxy_binary()  # before starting anything: a missing package is said at once
        try:
            self.postgres = Postgres().start()
            if self._with_standby:
                self.standby = Postgres(standby_of=self.postgres).start()
                self.postgres.synchronous(self._synchronous)
            self.objects = ObjectStore(separate=True).start()
            env = {
                **{f"GRAPHMEM_{k.upper()}": v for k, v in self.settings().items()},
                **self._env,
            }
            self.replicas = [
                Replica(f"replica{n + 1}", env, self.directory, skew=self._skews[n])
                for n in range(self._count)
            ]
            # The first replica migrates the database; the others start once it has.
            self.replicas[0].start().wait_ready()
            for replica in self.replicas[1:]:
                replica.start()
            for replica in self.replicas[1:]:
                replica.wait_ready()
            self.router = Router(self.directory, self.replicas, self._port).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process the cluster started and remove its directories."""
        if self.router is not None:
            self.router.stop()
        for replica in self.replicas:
            replica.stop()
        if self.objects is not None:
            self.objects.stop()
        for server in (self.postgres, self.standby):
            if server is not None:
                server.remove()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ------------------------------------------------------------------------------ make cluster


def _up(args: argparse.Namespace) -> int:
    """Start a cluster, write its state file, serve until SIGTERM or SIGINT, stop it."""
    state = Path(args.state)
    if state.exists():
        known = json.loads(state.read_text())
        if _alive(known.get("pid")):
            print(f"a cluster is already running: {known['url']}", file=sys.stderr)
            return 1
        state.unlink()  # left by a cluster that did not stop cleanly
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    with Cluster(
        replicas=args.replicas,
        embedder=args.embedder,
        port=args.port,
        standby=args.standby != "none",
        synchronous=args.standby == "sync",
    ) as cluster:
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "url": cluster.url,
                    "replicas": [r.url for r in cluster.replicas],
                    "store": cluster.settings()["store"],
                    "vectors": cluster.settings()["vectors"],
                    "s3_endpoint": cluster.settings()["s3_endpoint"],
                    "directory": str(cluster.directory),
                },
                indent=2,
            )
        )
        print(f"graphmem cluster: {cluster.url}/graphql", flush=True)
        done.wait()
    state.unlink(missing_ok=True)
    return 0


def _alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"devtools.cluster" in cmdline


def _running(state: Path) -> dict[str, Any] | None:
    """The state file's cluster if its process is alive (not one left by a cluster that did
    not stop cleanly, which the next ``up`` removes)."""
    try:
        known: dict[str, Any] = json.loads(state.read_text())
    except (OSError, ValueError):  # absent, or being written
        return None
    return known if _alive(known.get("pid")) else None


def _wait(args: argparse.Namespace) -> int:
    """Wait for the cluster started in the background to be ready; print how to reach it."""
    state, log = Path(args.state), Path(args.log)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        known = _running(state)
        if known is not None:
            print(f"graphmem cluster: {known['url']}/graphql (haproxy)")
            for n, url in enumerate(known["replicas"], 1):
                print(f"  replica{n}: {url}")
            print(f"  PostgreSQL: {known['store']}")
            print(f"  vectors: {known['vectors']} at {known['s3_endpoint']}")
            print(f"  logs: {known['directory']}; stop with: make cluster-stop")
            return 0
        if log.exists() and "Traceback" in log.read_text():
            print(log.read_text(), file=sys.stderr)
            return 1
        time.sleep(0.2)
    print(f"the cluster did not start in {args.timeout:.0f} s; see {log}", file=sys.stderr)
    return 1


def _down(args: argparse.Namespace) -> int:
    """Stop the cluster of the state file: exactly the processes it started."""
    state = Path(args.state)
    if not state.exists():
        print("no cluster is running", file=sys.stderr)
        return 0
    pid = json.loads(state.read_text()).get("pid")
    if not _alive(pid):
        state.unlink(missing_ok=True)
        print("the cluster had already stopped", file=sys.stderr)
        return 0
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        print(f"the cluster (pid {pid}) did not stop in 120 s", file=sys.stderr)
        return 1
    print("graphmem cluster stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.cluster", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a cluster and serve until stopped")
    up.add_argument("--replicas", type=int, default=3)
    up.add_argument("--embedder", default="local", help="the replicas' embedder")
    up.add_argument("--port", type=int, default=8430, help="haproxy's port")
    up.add_argument(
        "--standby",
        choices=("none", "sync", "async"),
        default="none",
        help="a streaming standby of PostgreSQL, with synchronous or asynchronous replication",
    )
    wait = commands.add_parser("wait", help="wait for a cluster started in the background")
    wait.add_argument("--log", default=".cluster/cluster.log")
    wait.add_argument("--timeout", type=float, default=300.0)
    down = commands.add_parser("down", help="stop the cluster of the state file")
    for command in (up, wait, down):
        command.add_argument("--state", default=".cluster/state.json")
    args = parser.parse_args(argv)
    return {"up": _up, "wait": _wait, "down": _down}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
