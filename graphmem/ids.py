"""Identifiers: of facts and links, UUIDs that begin with the time they were made; of texts
in the embedding cache, their SHA-256; of namespaces, names that can name a directory.

Version 7 of RFC 9562: 48 bits of Unix time in milliseconds, then 74 random bits. Ids made one
after another sort together, so an index on them grows at its end; a random UUID (version 4)
sent each insert to a page of its own once the index outgrew a batch, so a batch of 1,000 facts
dirtied up to 1,000 of its pages. The id says when its fact or link was made, which
``recorded_at`` says anyway.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from typing import Final

from .errors import InvalidInput

_RAND_A: int = (1 << 12) - 1
_RAND_B: int = (1 << 62) - 1
_NAMESPACE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def new_id() -> str:
    """A new time-ordered UUID (version 7), as text."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")  # 80 bits, of which 74 are used
    value = (
        (ms & ((1 << 48) - 1)) << 80
        | 0x7 << 76
        | (rand >> 68 & _RAND_A) << 64
        | 0b10 << 62
        | rand & _RAND_B
    )
    h = f"{value:032x}"  # uuid.UUID(int=value) would say the same, three times slower
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def text_hash(text: str) -> str:
    """The key of ``text``'s vectors in the embedding cache."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_namespace(name: str) -> str:
    """``name`` if it can name a namespace (its directory), else InvalidInput."""
    if not isinstance(name, str) or not _NAMESPACE.match(name):
        raise InvalidInput(
            f"invalid namespace {name!r}: 1-64 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit",
            field="namespace",
        )
    return name
