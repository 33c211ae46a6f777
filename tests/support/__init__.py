"""Helpers the tests share: GraphQL and MCP clients, the OpenAI-compatible stub, a settable
clock and a look beneath the SQLite store."""
