"""graphmem's version: the package's (pyproject.toml reads it), ``graphmem --version``'s, GraphQL
``version``'s, and the one a client names when it meets a service of another."""

from typing import Final

__version__: Final = "0.3.0"
