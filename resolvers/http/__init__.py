"""The HTTP face: the starlette app and its routes (``/graphql`` over HTTP and WebSocket,
``/mcp``, ``/mem0``, ``/explore/``, ``/metrics``, ``/healthz``) and who may reach them."""
