"""Benchmark harnesses: retrieval quality on public datasets and speed at scale (see REPORT.md).

Run from the repository root: ``python -m bench.locomo``, ``python -m bench.situatedqa``,
``python -m bench.speed``. Raw JSON results go to ``bench/out/`` (not committed).
"""
