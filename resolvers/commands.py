"""The CLI commands that need the service layer (``serve``, ``mcp`` and ``export-schema``) and
the whole ``graphmem`` command line, the core's commands and these. The console script enters
here, so ``graphmem`` (the core) never imports the service."""

from __future__ import annotations

import logging
import os
import sys
from contextlib import closing
from pathlib import Path
from typing import Final

import click

from graphmem import tracing
from graphmem.cli import command_group, run
from graphmem.errors import InvalidInput
from graphmem.memory import Memory
from graphmem.settings import Settings
from graphmem.storage import open_keys

#: The WebSocket protocol uvicorn serves sockets with: websockets-sansio, bounded for clients
#: that do not read (``sockets.WebSocketProtocol``), named from this package.
WEBSOCKETS: Final = f"{__package__}.http.sockets:WebSocketProtocol"


@click.command()
@click.option("--host", help="Address to bind [default: 127.0.0.1, or GRAPHMEM_HOST].")
@click.option("--port", type=int, help="Port [default: 8420, or GRAPHMEM_PORT].")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of namespaces (same as the global --data-dir).",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes sharing the port (and the namespaces: see docs/operations.md).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    /,
    host: str | None,
    port: int | None,
    data_dir: Path | None,
    log_level: str,
    workers: int,
) -> None:
    """Serve the GraphQL API (/graphql), MCP tools (/mcp), the explorer (/explore), /healthz
    and /metrics.

    A browser at /graphql gets GraphiQL. Without API keys (see create-key) it only binds to a
    loopback address.
    """
    import uvicorn

    from graphmem.settings import is_loopback

    from .http.app import SETTINGS_ENV, create_app, tune_process

    given = {"host": host, "port": port, "data_dir": data_dir}
    settings: Settings = ctx.obj.model_copy(
        update={k: v for k, v in given.items() if v is not None}
    )
    with closing(open_keys(settings)) as keys:
        # Asked whatever the host: with a PostgreSQL store this reaches the database, so a bad
        # URL or password is refused here, with its code, before the server starts.
        active = keys.any_active()
    if not active and not is_loopback(settings.host):
        raise InvalidInput(
            f"refusing to serve on {settings.host} without API keys: create one with "
            "`graphmem create-key --namespace NAME`, or bind to 127.0.0.1",
            field="host",
        )
    base = f"http://{settings.host}:{settings.port}"
    click.echo(
        f"graphmem: {base}/graphql, MCP {base}/mcp, explorer {base}/explore "
        f"(data in {Path(settings.data_dir).resolve()})",
        err=True,
    )
    if workers == 1:
        tune_process(settings)
        uvicorn.run(
            create_app(settings, own_process=True),
            host=settings.host,
            port=settings.port,
            log_level=log_level,
            ws=WEBSOCKETS,
            ws_max_size=settings.max_body_bytes,
        )
        return
    os.environ[SETTINGS_ENV] = settings.model_dump_json()  # for the workers' create_app
    uvicorn.run(
        f"{__package__}.http.app:app_from_environment",
        factory=True,
        workers=workers,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        ws=WEBSOCKETS,
        ws_max_size=settings.max_body_bytes,
    )


@click.command("mcp")
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@click.pass_context
def mcp_stdio(ctx: click.Context, /, log_level: str) -> None:
    """Serve memory as MCP tools on stdin/stdout, for desktop and command-line agents.

    An MCP client starts this command and speaks the Model Context Protocol with it; logs go to
    stderr. It uses the namespace of the global options (--data-dir, --namespace, --embedder).
    `graphmem serve` offers the same tools over HTTP at /mcp. See docs/mcp.md.
    """
    from .mcp import serve_stdio

    logging.basicConfig(
        stream=sys.stderr,
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    tracing.configure(ctx.obj)
    with Memory.open(settings=ctx.obj) as memory:
        serve_stdio(memory)


@click.command("export-schema")
@click.argument("path", type=click.Path(dir_okay=False, allow_dash=True), default="-")
def export_schema(path: str) -> None:
    """Print the GraphQL schema (SDL), or write it to PATH (the repo keeps schema.graphql)."""
    from .graphql.schema import schema_sdl

    with click.open_file(path, "w", encoding="utf-8") as out:
        out.write(schema_sdl())


#: The ``graphmem`` command line: the core's commands and the service's.
cli: Final = command_group(serve, mcp_stdio, export_schema)


def main() -> None:
    """Console entry point of ``graphmem``."""
    run(cli)
