"""graphmem's GraphQL service: the strawberry schema and the starlette app that serves it.

This package calls ``graphmem`` and never writes SQL; ``graphmem`` never imports it.
"""

from .graphql.schema import build_schema, schema_sdl
from .http.app import create_app

__all__ = ["build_schema", "create_app", "schema_sdl"]
