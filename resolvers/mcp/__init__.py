"""graphmem's memory as tools for agents, over the Model Context Protocol (the ``mcp`` SDK).

1. :mod:`.tools` — the catalogue (``TOOLS``): each tool a handler named after the
   ``Memory`` verb it calls, with an argument model (pydantic, so the JSON schema and the
   validation cannot disagree) and a description written for a model to read.
2. :mod:`.rendering` — a result's compact text, one line per fact (id, text, category, validity);
   ``structuredContent`` carries the same JSON as the CLI's ``--json``.
3. :mod:`.server` — one server object for both transports: stdio (``graphmem mcp``) and
   streamable HTTP at ``/mcp`` in ``graphmem serve``, admitted per request by the service's gate.

This lives in ``resolvers/`` because the SDK is built on starlette, which ``graphmem/`` never
imports; like the GraphQL layer it only calls graphmem and writes no SQL.
"""

from .server import HttpEndpoint, build_server, call, no_oauth_routes, serve_stdio, tool_cost
from .tools import TOOLS

__all__ = [
    "TOOLS",
    "HttpEndpoint",
    "build_server",
    "call",
    "no_oauth_routes",
    "serve_stdio",
    "tool_cost",
]
