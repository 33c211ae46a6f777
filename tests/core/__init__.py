"""The engine through ``Memory`` and its pure modules: writes, search, recall, the graph,
time, capture, decay, settings, the registries and the core's command line."""
