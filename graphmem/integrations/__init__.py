"""Adapters to the frameworks agents are built with, each an extra of its own
(``pip install 'graphmem[langgraph]'``): :mod:`.langgraph`."""
