"""graphmem's GraphQL service: the strawberry schema and the starlette app that serves it.

This package calls ``graphmem`` and never writes SQL; ``graphmem`` never imports it.
"""

from .app import create_app
from .schema import build_schema, schema_sdl

__all__ = ["build_schema", "create_app", "schema_sdl"]
