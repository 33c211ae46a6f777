"""Caller text is read in time linear in its length: the parsers that run on every write, capture
and search (secrets, categories, capture's patterns, time words) on the adversarial shapes that
once cost their length squared (a 20 KB capture took 81 s; a 10 KB query 3.8 s). Each input here
is 40,000 characters: linear code reads it in well under a second, quadratic code in minutes."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from graphmem import capture, sensitive, tagging, timehints

N = 40_000
#: Far above what linear code takes on a slow machine, far below what quadratic code takes.
BOUND_S = 5.0


@pytest.mark.parametrize(
    ("read", "text"),
    [
        (sensitive.findings, "pw " * (N // 3)),  # a credential word, again and again
        (sensitive.findings, "a-" * (N // 2)),  # a URL scheme that never ends
        (tagging.detect_category, "_" * N + "@a"),  # an e-mail address that never starts
        (lambda text: capture.plan([capture.Message("user", text)], max_chars=N + 1), "_" * N),
        (lambda text: capture.extract(text, "user"), "A-" * (N // 2)),  # a name that never ends
        (lambda text: capture.extract(text, "user"), "My colour is" + " now" * (N // 4) + "x"),
        (lambda text: timehints.understand(text, 1.7e9), "May 2020 " * (N // 9)),
        (lambda text: timehints.understand(text, 1.7e9), "1 " * (N // 2) + "last"),
    ],
    ids=[
        "credential-words",
        "url-scheme",
        "email",
        "capture",
        "name",
        "fillers",
        "dates",
        "numbers",
    ],
)
def test_a_long_adversarial_text_is_read_in_linear_time(
    read: Callable[[str], object], text: str
) -> None:
    started = time.perf_counter()
    read(text)
    assert time.perf_counter() - started < BOUND_S
