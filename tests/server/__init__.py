"""The service of ``resolvers/``: GraphQL over HTTP and WebSocket, keys and limits, MCP,
metrics and the explorer."""
