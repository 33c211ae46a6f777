"""The GraphQL face: the schema (its roots, types and extensions) and the fast paths around
strawberry (``fastpaths``), the one module that reaches into strawberry's private API."""
