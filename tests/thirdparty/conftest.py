"""The suites of clients and conformance tools none of us wrote (docs/compatibility.md), each
installed from its registry into a temporary folder by ``tests/support/thirdparty.py``. They
are marked ``thirdparty``: ``make test`` leaves them out (installs take minutes), ``make
test-engines`` and so CI run them, and each skips, saying why, where its tool or registry is
missing."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/thirdparty/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.thirdparty)
