"""Waiting for a ``graphmem serve`` process the test started itself."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_until_serving(
    url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0
) -> None:
    """Return once ``url``'s ``/healthz`` answers 200; AssertionError showing the server's log
    when it exits first, or when ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert process.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, (
            f"{url} did not start:\n{log.read_text(errors='replace')}"
        )
        time.sleep(0.2)
