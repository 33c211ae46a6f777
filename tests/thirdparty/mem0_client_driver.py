"""Drives mem0's own ``MemoryClient`` against a graphmem service's mem0 API, in the virtualenv
``tests/thirdparty/test_mem0_client.py`` makes: ``python mem0_client_driver.py HOST KEY
READ_ONLY_KEY`` prints, as JSON, what each call answered (or which of mem0's exceptions it
raised)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from mem0 import MemoryClient


def raised(call: Callable[[], Any]) -> str | None:
    """The name of the exception ``call`` raised (None: it raised none)."""
    try:
        call()
    except Exception as exc:
        return type(exc).__name__
    return None


def main(host: str, key: str, read_only_key: str) -> dict[str, Any]:
    client = MemoryClient(api_key=key, host=host)
    out: dict[str, Any] = {"org_id": client.org_id, "project_id": client.project_id}
    out["add"] = client.add(
        [{"role": "user", "content": "I moved to Austin last month. I love hiking on weekends."}],
        user_id="alice",
        metadata={"topic": "life"},
    )
    out["add_whole"] = client.add("Bob prefers green tea.", user_id="bob", infer=False)
    out["search"] = client.search("where did she move?", filters={"user_id": "alice"}, top_k=1)
    out["get_all"] = client.get_all(filters={"user_id": "alice"})
    out["page"] = client.get_all(filters={"user_id": "alice"}, page=2, page_size=1)
    memory_id = out["add"]["results"][0]["id"]
    out["get"] = client.get(memory_id)
    out["update"] = client.update(memory_id, text="I moved to Dallas last month.")
    out["after_update"] = client.get(memory_id)
    out["delete"] = client.delete(memory_id)
    out["get_deleted"] = raised(lambda: client.get(memory_id))
    out["history"] = client.history(memory_id)
    out["delete_all"] = client.delete_all(user_id="alice")
    out["alice_after"] = client.get_all(filters={"user_id": "alice"})
    out["bob_after"] = client.get_all(filters={"user_id": "bob"})
    out["or_filter"] = raised(lambda: client.search("tea", filters={"OR": [{"user_id": "bob"}]}))
    out["unsupported"] = raised(client.users)
    out["wrong_key"] = raised(lambda: MemoryClient(api_key="gm_wrong", host=host))
    reader = MemoryClient(api_key=read_only_key, host=host)
    out["read_only_add"] = raised(lambda: reader.add("I like jazz.", user_id="bob"))
    out["read_only_get_all"] = reader.get_all(filters={"user_id": "bob"})
    out["delete_users"] = client.delete_users(user_id="bob")
    out["bob_erased"] = client.get_all(filters={"user_id": "bob"})
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
