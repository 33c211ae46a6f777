"""mem0's REST API at /mem0 (graphmem.server.http.mem0), in process: each endpoint in the shapes mem0's
client reads, owners kept apart, keys checked as on /graphql, bad input refused with a typed
400. mem0's own client drives it in tests/thirdparty/test_mem0_client.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from graphmem.server import create_app

from graphmem import KeyStore, Settings

from ..support.clock import Clock
from ..support.graphql_clients import InProcess

ADD = "/mem0/v3/memories/add/"
SEARCH = "/mem0/v3/memories/search/"
LIST = "/mem0/v3/memories/"
MEMORIES = "/mem0/v1/memories/"


@pytest.fixture
def settings(data_dir: Path, store_url: str | None, vector_settings: dict[str, str]) -> Settings:
    return Settings(
        embedder="hash", data_dir=data_dir, store=store_url, mem0_api=True, **vector_settings
    )


def add(service: InProcess, text: str, headers: dict[str, str] | None = None, **body: Any) -> Any:
    answer = service.request(
        "POST",
        ADD,
        json={"messages": [{"role": "user", "content": text}], **body},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def listed(service: InProcess, filters: dict[str, Any], **kwargs: Any) -> Any:
    answer = service.request("POST", LIST, json={"filters": filters}, **kwargs)
    assert answer.status_code == 200, answer.text
    return answer.json()


def memories(service: InProcess, filters: dict[str, Any]) -> list[str]:
    return [m["memory"] for m in listed(service, filters)["results"]]


def test_the_mem0_api_is_off_by_default(data_dir: Path, clock: Clock) -> None:
    with InProcess(create_app(Settings(embedder="hash", data_dir=data_dir), clock=clock)) as c:
        answer = c.request("GET", "/mem0/v1/ping/")
    assert answer.status_code == 404
    assert "mem0_api" in answer.json()["detail"]


def test_ping_names_the_namespace_as_org_and_project(service: InProcess) -> None:
    answer = service.request("GET", "/mem0/v1/ping/")
    assert answer.json() == {
        "status": "ok",
        "org_id": "default",
        "project_id": "default",
        "user_email": None,
    }


def test_an_add_draws_facts_and_lists_them_with_their_metadata(service: InProcess) -> None:
    added = add(
        service,
        "I moved to Austin last month. I love hiking on weekends.",
        user_id="alice",
        metadata={"topic": "life"},
    )
    assert added["status"] == "SUCCEEDED"
    assert [(r["event"], r["memory"]) for r in added["results"]] == [
        ("ADD", "I moved to Austin last month."),
        ("ADD", "I love hiking on weekends."),
    ]
    page = listed(service, {"user_id": "alice"})
    assert page["count"] == 2 and page["next"] is None and page["previous"] is None
    first = page["results"][0]
    assert first["id"] == added["results"][0]["id"]
    assert first["user_id"] == "alice" and first["metadata"] == {"topic": "life"}
    assert first["created_at"] and first["updated_at"] and first["hash"]


def test_an_add_that_supersedes_a_memory_is_an_update_of_the_same_id(service: InProcess) -> None:
    [vim] = add(service, "My favourite editor is vim.", user_id="alice")["results"]
    [emacs] = add(service, "My favourite editor is emacs.", user_id="alice")["results"]
    assert emacs["event"] == "UPDATE" and emacs["id"] == vim["id"]
    assert emacs["previous_memory"] == "My favourite editor is vim."
    assert memories(service, {"user_id": "alice"}) == ["My favourite editor is emacs."]


def test_infer_false_stores_each_user_and_assistant_message_whole(service: InProcess) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello, how can I help?"},
    ]
    answer = service.request(
        "POST", ADD, json={"messages": messages, "user_id": "alice", "infer": False}
    )
    assert [r["memory"] for r in answer.json()["results"]] == ["hi", "hello, how can I help?"]
    assert memories(service, {"user_id": "alice"}) == ["hi", "hello, how can I help?"]
    assert listed(service, {"user_id": "alice"})["results"][0]["expiration_date"] is None


def test_search_answers_the_owners_best_matches_with_scores(service: InProcess) -> None:
    add(service, "Alice prefers green tea in the morning.", user_id="alice", infer=False)
    add(service, "Alice drives a red bicycle to work.", user_id="alice", infer=False)
    answer = service.request(
        "POST", SEARCH, json={"query": "green tea", "filters": {"user_id": "alice"}, "top_k": 1}
    )
    [hit] = answer.json()["results"]
    assert hit["memory"] == "Alice prefers green tea in the morning."
    assert isinstance(hit["score"], float)


def test_an_update_keeps_the_memorys_id_and_history_tells_each_version(
    service: InProcess,
) -> None:
    [added] = add(service, "Alice lives in Austin.", user_id="alice", infer=False)["results"]
    path = f"{MEMORIES}{added['id']}/"
    updated = service.request("PUT", path, json={"text": "Alice lives in Dallas."}).json()
    assert updated["id"] == added["id"] and updated["memory"] == "Alice lives in Dallas."
    assert service.request("GET", path).json()["memory"] == "Alice lives in Dallas."
    assert memories(service, {"user_id": "alice"}) == ["Alice lives in Dallas."]
    assert service.request("DELETE", path).json() == {"message": "Memory deleted successfully!"}
    assert service.request("GET", path).status_code == 404
    events = service.request("GET", f"{path}history/").json()
    assert [(e["event"], e["old_memory"], e["new_memory"]) for e in events] == [
        ("ADD", None, "Alice lives in Austin."),
        ("UPDATE", "Alice lives in Austin.", "Alice lives in Dallas."),
        ("DELETE", "Alice lives in Dallas.", None),
    ]
    assert {e["memory_id"] for e in events} == {added["id"]}


def test_an_update_of_metadata_alone_keeps_the_text(service: InProcess) -> None:
    [added] = add(service, "Alice plays chess.", user_id="alice", infer=False)["results"]
    path = f"{MEMORIES}{added['id']}/"
    updated = service.request("PUT", path, json={"metadata": {"level": "club"}}).json()
    assert updated["memory"] == "Alice plays chess." and updated["metadata"] == {"level": "club"}


def test_each_user_has_memories_of_their_own(service: InProcess) -> None:
    alice = add(service, "I love hiking on weekends.", user_id="alice")["results"]
    bob = add(service, "I love hiking on weekends.", user_id="bob")["results"]
    assert [r["event"] for r in alice] == [r["event"] for r in bob] == ["ADD"]  # no repeat
    assert alice[0]["id"] != bob[0]["id"]
    assert service.request("DELETE", MEMORIES, params={"user_id": "alice"}).status_code == 200
    assert memories(service, {"user_id": "alice"}) == []
    assert memories(service, {"user_id": "bob"}) == ["I love hiking on weekends."]
    found = service.request(
        "POST", SEARCH, json={"query": "hiking", "filters": {"user_id": "alice"}}
    ).json()
    assert found == {"results": []}


def test_deleting_a_user_erases_their_memories_and_history(service: InProcess) -> None:
    [added] = add(service, "Alice lives in Austin.", user_id="alice", infer=False)["results"]
    add(service, "Bob lives in Boston.", user_id="bob", infer=False)
    erased = service.request("DELETE", "/mem0/v2/entities/user/alice/")
    assert erased.status_code == 200 and erased.json()["deleted"] == 1
    assert service.request("GET", f"{MEMORIES}{added['id']}/history/").status_code == 404
    assert memories(service, {"user_id": "alice"}) == []
    assert memories(service, {"user_id": "bob"}) == ["Bob lives in Boston."]
    assert service.request("DELETE", "/mem0/v2/entities/user/alice/").status_code == 404


def test_agent_and_run_ids_narrow_a_users_memories(service: InProcess) -> None:
    add(service, "Alice likes jazz.", user_id="alice", agent_id="dj", run_id="r1", infer=False)
    add(service, "Alice likes tennis.", user_id="alice", agent_id="coach", infer=False)
    assert memories(service, {"AND": [{"user_id": "alice"}, {"agent_id": "dj"}]}) == [
        "Alice likes jazz."
    ]
    assert memories(service, {"user_id": "alice", "run_id": "*"}) == ["Alice likes jazz."]
    assert len(memories(service, {"user_id": "alice"})) == 2
    assert memories(service, {"user_id": "alice", "created_at": {"gte": "2999-01-01"}}) == []
    assert len(memories(service, {"user_id": "alice", "created_at": {"lte": "2999-01-01"}})) == 2
    service.request("DELETE", MEMORIES, params={"user_id": "alice", "agent_id": "coach"})
    assert memories(service, {"user_id": "alice"}) == ["Alice likes jazz."]


def test_get_all_pages_by_page_and_page_size(service: InProcess) -> None:
    for n in range(3):
        add(service, f"Alice note number {n}.", user_id="alice", infer=False)
    page = listed(service, {"user_id": "alice"}, params={"page": 2, "page_size": 2})
    assert page["count"] == 3 and [m["memory"] for m in page["results"]] == ["Alice note number 2."]
    assert page["next"] is None and page["previous"] == "?page=1&page_size=2"


def test_keys_are_checked_on_every_request_in_mem0s_token_form(
    service: InProcess, keys: KeyStore
) -> None:
    token, _ = keys.create(["default"])
    reader, _ = keys.create(["default"], read_only=True)
    assert service.request("GET", "/mem0/v1/ping/").status_code == 401
    wrong = service.request("GET", "/mem0/v1/ping/", headers={"Authorization": "Token gm_x"})
    assert wrong.status_code == 401 and wrong.json()["code"] == "UNAUTHENTICATED"
    for scheme in ("Token", "Bearer"):
        headers = {"Authorization": f"{scheme} {token}"}
        assert service.request("GET", "/mem0/v1/ping/", headers=headers).status_code == 200
    add(
        service,
        "Alice likes tea.",
        {"Authorization": f"Token {token}"},
        user_id="alice",
        infer=False,
    )
    read_only = {"Authorization": f"Token {reader}"}
    refused = service.request(
        "POST",
        ADD,
        json={"messages": [{"role": "user", "content": "x"}], "user_id": "alice"},
        headers=read_only,
    )
    assert refused.status_code == 403 and refused.json()["code"] == "FORBIDDEN"
    assert memories_with(service, read_only, "alice") == ["Alice likes tea."]


def memories_with(service: InProcess, headers: dict[str, str], user: str) -> list[str]:
    return [m["memory"] for m in listed(service, {"user_id": user}, headers=headers)["results"]]


def test_a_key_of_another_namespace_never_sees_its_users_memories(
    service: InProcess, keys: KeyStore
) -> None:
    acme, _ = keys.create(["acme"])
    globex, _ = keys.create(["globex"])
    as_acme = {"Authorization": f"Token {acme}"}
    as_globex = {"Authorization": f"Token {globex}"}
    [added] = add(service, "Alice likes tea.", as_acme, user_id="alice", infer=False)["results"]
    assert memories_with(service, as_globex, "alice") == []
    path = f"{MEMORIES}{added['id']}/"
    assert service.request("GET", path, headers=as_globex).status_code == 404
    assert service.request("DELETE", path, headers=as_globex).status_code == 404
    other = {**as_globex, "X-Graphmem-Namespace": "acme"}
    assert service.request("GET", path, headers=other).status_code == 403
    assert service.request("GET", path, headers=as_acme).json()["memory"] == "Alice likes tea."


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        (ADD, {"messages": [{"role": "user", "content": "hi"}]}, "user_id"),
        (ADD, {"messages": "hi", "user_id": "alice"}, "messages"),
        (ADD, {"messages": [{"role": "robot", "content": "hi"}], "user_id": "a"}, "role"),
        (ADD, {"messages": [{"role": "user", "content": "hi"}], "user_id": "a", "x": 1}, "x"),
        (SEARCH, {"query": "", "filters": {"user_id": "alice"}}, "query"),
        (SEARCH, {"query": "tea", "filters": {"user_id": "alice"}, "top_k": 0}, "top_k"),
        (SEARCH, {"query": "tea", "filters": {"OR": [{"user_id": "a"}]}}, "OR"),
        (LIST, {"filters": {"user_id": "alice", "colour": "red"}}, "colour"),
        (LIST, {"filters": {"agent_id": {"in": ["a", "b"]}}}, "user_id"),
    ],
)
def test_bad_input_is_refused_with_a_typed_400(
    service: InProcess, path: str, body: dict[str, Any], says: str
) -> None:
    answer = service.request("POST", path, json=body)
    assert answer.status_code == 400
    assert answer.json()["code"] == "INVALID_INPUT" and says in answer.json()["detail"]


def test_a_body_that_is_not_a_json_object_is_refused(service: InProcess) -> None:
    for content in (b"{not json", b"[1, 2]", b"[" * 5000):
        answer = service.request("POST", ADD, content=content)
        assert answer.status_code == 400 and answer.json()["code"] == "INVALID_INPUT"


def test_a_memory_id_not_of_this_api_is_refused(service: InProcess) -> None:
    assert service.request("GET", f"{MEMORIES}not-an-id/").status_code == 400
    assert service.request("GET", f"{MEMORIES}user.nobody.0000/").status_code == 404


def test_a_body_over_max_body_bytes_gets_413(data_dir: Path, clock: Clock) -> None:
    settings = Settings(embedder="hash", data_dir=data_dir, mem0_api=True, max_body_bytes=2048)
    with InProcess(create_app(settings, clock=clock)) as service:
        body = {"messages": [{"role": "user", "content": "x" * 4000}], "user_id": "alice"}
        answer = service.request("POST", ADD, json=body)
    assert answer.status_code == 413 and answer.json()["code"] == "PAYLOAD_TOO_LARGE"


def test_owners_beyond_mem0_max_owners_are_refused_and_the_others_still_served(
    data_dir: Path, clock: Clock
) -> None:
    # Each owner's namespace stays open (a Memory, its threads and files): a client naming
    # ever new user ids must not exhaust the server.
    settings = Settings(embedder="hash", data_dir=data_dir, mem0_api=True, mem0_max_owners=2)
    with InProcess(create_app(settings, clock=clock)) as service:
        add(service, "I love hiking.", user_id="alice")
        add(service, "I love sailing.", user_id="bob")
        body = {"messages": [{"role": "user", "content": "I love chess."}], "user_id": "carol"}
        answer = service.request("POST", ADD, json=body)
        assert answer.status_code == 503 and answer.json()["code"] == "UNAVAILABLE"
        assert "mem0_max_owners" in answer.json()["detail"]
        assert memories(service, {"user_id": "carol"}) == []  # nothing written, nothing opened
        add(service, "I love climbing.", user_id="alice")
        assert sorted(memories(service, {"user_id": "alice"})) == [
            "I love climbing.",
            "I love hiking.",
        ]


def test_requests_spend_their_keys_points(data_dir: Path, clock: Clock, keys: KeyStore) -> None:
    settings = Settings(
        embedder="hash",
        data_dir=data_dir,
        mem0_api=True,
        graphql_max_cost=100,
        rate_limit_per_minute=5_000,
    )
    token, _ = keys.create(["default"])
    with InProcess(create_app(settings, clock=clock)) as service:
        answer = service.request(
            "POST",
            LIST,
            json={"filters": {"user_id": "a"}},
            headers={"Authorization": f"Token {token}"},
        )
    assert answer.status_code == 429 and answer.json()["code"] == "RATE_LIMITED"
    assert answer.headers["Retry-After"]


def test_what_graphmem_does_not_offer_is_refused_with_501(service: InProcess) -> None:
    answer = service.request("GET", "/mem0/v1/entities/")
    assert answer.status_code == 501 and "docs/clients.md#mem0" in answer.json()["detail"]
