"""Hostile and random input to the GraphQL API, in process: valid and invalid documents
generated from the schema (hypothesis-graphql), the same with their arguments sent as hostile
variables (strings that are not text, integers beyond 64 bits, deep JSON), and the known attacks
one by one, on the MCP tools too. Whatever comes in, the answer is never a 500 nor a masked
INTERNAL_ERROR: it is data, or an error with a code that says what was wrong.

FUZZ_EXAMPLES sets the examples of each generated-document test (120; `make soak` runs more)."""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from graphmem.server import create_app, schema_sdl
from graphmem.server.mcp import build_server
from graphql import (
    ArgumentNode,
    DocumentNode,
    GraphQLInputType,
    NameNode,
    OperationDefinitionNode,
    TypeInfo,
    TypeInfoVisitor,
    VariableDefinitionNode,
    VariableNode,
    Visitor,
    parse_type,
    print_ast,
    value_from_ast_untyped,
    visit,
)
from graphql import build_schema as parse_sdl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_graphql import Mode, from_schema, nodes
from mcp import Client

from graphmem import InvalidInput, Memory, Settings

from ..support.graphql_clients import InProcess

SCHEMA = parse_sdl(schema_sdl())
#: Codes an answer to bad input may carry (docs/graphql.md): never INTERNAL_ERROR.
EXPECTED = {
    "INVALID_QUERY",
    "INVALID_INPUT",
    "NOT_FOUND",
    "CONFLICT",
    "PAYLOAD_TOO_LARGE",
    "TOO_COSTLY",
}
#: Examples of each generated-document test: FUZZ_EXAMPLES (`make soak` runs thousands).
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "120"))
#: Strings that are not text: a lone surrogate or NUL, alone or inside text.
NOT_TEXT = st.one_of(
    st.sampled_from(["\ud83d", "\udfff", "\x00", "a\x00b", "half an emoji \ud83d"]),
    st.tuples(
        st.text(max_size=5), st.characters(categories=["Cs"]) | st.just("\x00"), st.text(max_size=5)
    ).map("".join),
)
#: Integers beyond 64 bits, of either sign.
HUGE_INTEGERS = st.integers(2**64, 2**300) | st.integers(-(2**300), -(2**64))
#: How deep JSON nests: past orjson's limit (254), near Python's (about 1,000: the server
#: refuses deeper JSON with a 400) and beyond.
DEPTHS = st.integers(2, 300) | st.sampled_from([254, 256, 500, 900, 990, 1100, 5000])
SCALARS = {
    "DateTime": st.one_of(
        st.sampled_from(
            [
                "2024-05-01",
                "2024-05-01T12:00:00Z",
                "2024",
                "not a date",
                "99999-01-01",
                "1970-01-01T00:00:00+14:00",
                "",
            ]
        ).map(nodes.String),
        st.integers(-(2**31), 2**31 - 1).map(nodes.Int),
        st.floats(allow_nan=False, allow_infinity=False).map(nodes.Float),
    ),
    "JSON": st.one_of(st.text(max_size=20).map(nodes.String), st.integers(-5, 5).map(nodes.Int)),
}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, list[str]]]:
    """One service for the module (hypothesis runs many examples against it), holding a few
    linked facts whose ids the generated documents may use."""
    data = tmp_path_factory.mktemp("hostile") / "data"
    settings_ = Settings(embedder="hash", data_dir=data, graphql_max_depth=10)
    with Memory.open(data, settings=settings_) as mem:
        ids = [
            r.fact.id  # type: ignore[union-attr]
            for r in mem.store_many(
                [{"text": f"Server {n} runs the {w} service"} for n, w in enumerate(["mail", "db"])]
            )
        ]
        mem.link(ids[0], ids[1], "DEPENDS_ON")
    with InProcess(create_app(settings_)) as client:
        yield client, ids


def _assert_handled(status: int, body: Any) -> None:
    assert status in (200, 400, 413), (status, body)
    if isinstance(body, dict):
        for error in body.get("errors") or []:
            assert error.get("extensions", {}).get("code") in EXPECTED, body


def _post(client: InProcess, query: str, variables: Any = None) -> tuple[int, Any]:
    """``client.post``, the body written by json: it escapes a lone surrogate (``\\ud83d``),
    as a JavaScript client sends one; the test client's encoder cannot write it."""
    response = client.request(
        "POST",
        "/graphql",
        content=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"content-type": "application/json"},
    )
    return response.status_code, response.json()


def _ids(text: str, ids: list[str]) -> str:
    """The document with some ID strings swapped for real ids, so that reads find something."""
    return text.replace('"0"', json.dumps(ids[0])).replace('"1"', json.dumps(ids[1]))


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@FUZZ
@given(document=from_schema(SCHEMA, custom_scalars=SCALARS, allow_x00=False))
def test_any_valid_document_is_answered_without_a_server_error(
    api: tuple[InProcess, list[str]], document: str
) -> None:
    client, ids = api
    _assert_handled(*client.post(_ids(document, ids)))


@FUZZ
@given(document=from_schema(SCHEMA, custom_scalars=SCALARS, mode=Mode.NEGATIVE))
def test_any_invalid_document_is_refused_with_invalid_query(
    api: tuple[InProcess, list[str]], document: str
) -> None:
    client, _ = api
    status, body = client.post(document)
    _assert_handled(status, body)
    assert status == 400 or body.get("errors"), body


@FUZZ
@given(text=st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=300))
def test_any_search_text_is_safe_for_fts5(api: tuple[InProcess, list[str]], text: str) -> None:
    client, _ = api
    status, body = client.post(
        "query($q: String!) { search(query: $q, mode: FTS) { fact { id } } }", {"q": text}
    )
    _assert_handled(status, body)
    if "\x00" in text:
        assert body["errors"][0]["extensions"] == {"code": "INVALID_INPUT", "field": "query"}
    elif text.strip():
        assert "errors" not in body, body


@pytest.mark.parametrize(
    "query",
    [
        'NEAR(server service, 2) AND "db" OR mail* NOT ^runs',
        'text: "server" + col:service - {mail db}',
        '" unbalanced quote AND (( OR',
        "'; DROP TABLE facts; --",
        "1 OR 1=1; SELECT * FROM facts WHERE '' = '",
        "\x01\x02\x7f service",
        "*",
    ],
)
def test_fts5_syntax_and_sql_in_search_text_are_plain_words(
    api: tuple[InProcess, list[str]], query: str
) -> None:
    client, _ = api
    for mode in ("FTS", "HYBRID"):
        status, body = client.post(
            f"query($q: String!) {{ search(query: $q, mode: {mode}) {{ fact {{ text }} }} }}",
            {"q": query},
        )
        assert status == 200 and "errors" not in body, body
    assert len(client.data("{ facts { edges { cursor } } }")["facts"]["edges"]) >= 2  # intact


def test_sql_looking_text_is_stored_and_found_verbatim(api: tuple[InProcess, list[str]]) -> None:
    client, _ = api
    text = 'Robert\'); DROP TABLE facts;-- said the "admin" \\ OR 1=1'
    stored = client.data(
        "mutation($t: String!) { storeFact(input: {text: $t, entity: $t, "
        "source: $t}) { fact { id text entity } error { message } } }",
        {"t": text},
    )
    assert stored["storeFact"]["fact"] == {
        **stored["storeFact"]["fact"],
        "text": text,
        "entity": text,
    }
    hits = client.data("query($q: String!) { search(query: $q) { fact { text } } }", {"q": text})
    assert hits["search"][0]["fact"]["text"] == text


def _nested(depth: int) -> str:
    return (
        "{ facts { edges { node { "
        + "links { edges { neighbour { " * depth
        + "id"
        + " } } }" * depth
        + " } } } }"
    )


@pytest.mark.parametrize(
    ("name", "body", "status", "code", "says"),
    [
        (
            "alias bomb",
            {"query": "{ " + " ".join(f"a{i}: namespace" for i in range(5000)) + " }"},
            200,
            "INVALID_QUERY",
            "tokens",
        ),
        (
            "alias bomb under the token limit",
            {"query": "{ " + " ".join(f"a{i}: stats {{ namespace }}" for i in range(200)) + " }"},
            200,
            "INVALID_QUERY",
            "aliases",
        ),
        ("depth bomb", {"query": _nested(40)}, 200, "INVALID_QUERY", "depth"),
        (
            "fragment cycle",
            {"query": "{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }"},
            200,
            "INVALID_QUERY",
            "Cannot spread fragment",
        ),
        (
            "two operations, no name",
            {"query": "query A { namespace } query B { namespace }"},
            200,
            "INVALID_QUERY",
            "operation",
        ),
        (
            "huge string",
            {
                "query": "mutation($t: String!) { storeFact(input: {text: $t}) { error { code } } }",
                "variables": {"t": "x" * 2_000_000},
            },
            413,
            "PAYLOAD_TOO_LARGE",
            "larger",
        ),
        (
            "text over the limit",
            {
                "query": "mutation($t: String!) { storeFact(input: {text: $t}) { error { code message } } }",
                "variables": {"t": "y" * 10_001},
            },
            200,
            None,
            "10000",
        ),
        (
            "oversized batch",
            {
                "query": "mutation($i: [FactInput!]!) { storeFacts(inputs: $i) { error { code message } } }",
                "variables": {"i": [{"text": "z"}] * 10_001},
            },
            200,
            None,
            "at most 10000",
        ),
        (
            "limit out of range",
            {"query": '{ search(query: "x", limit: 100000) { score } }'},
            200,
            "INVALID_INPUT",
            "limit",
        ),
        (
            "32-bit overflow",
            {"query": "{ facts(first: 99999999999) { edges { cursor } } }"},
            200,
            "INVALID_QUERY",
            "32-bit",
        ),
        (
            "forged cursor",
            {"query": '{ facts(after: "Zm9vOmJhcg==") { edges { cursor } } }'},
            200,
            "INVALID_INPUT",
            "cursor",
        ),
        (
            "variables not an object",
            {"query": "{ namespace }", "variables": [1, 2]},
            400,
            None,
            "object",
        ),
        ("batched request", [{"query": "{ namespace }"}] * 3, 400, None, "Batching"),
    ],
)
def test_known_attacks_are_refused_with_a_clear_error(
    api: tuple[InProcess, list[str]],
    name: str,
    body: Any,
    status: int,
    code: str | None,
    says: str,
) -> None:
    client, _ = api
    response = client.request(
        "POST",
        "/graphql",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == status, (name, response.text[:300])
    text = response.text
    assert says in text, (name, text[:300])
    if code is not None:
        assert response.json()["errors"][0]["extensions"]["code"] == code, name
    if status == 200 and code is None:  # a mutation's typed error, as data
        payload = next(iter(response.json()["data"].values()))
        assert payload["error"]["code"] == "INVALID_INPUT", name


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("invalid UTF-8", b'{"query": "{ namespace }", "variables": {"x": "\xff\xfe"}}'),
        ("binary garbage", bytes(range(256)) * 4),
        (
            "deeply nested variables",
            b'{"query": "{ namespace }", "variables": {"x": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}}",
        ),
        ("not JSON", b"{ namespace }"),
        (
            "NaN",
            b'{"query": "mutation($i: Float) { storeFact(input: {text: \\"n\\", importance: $i}) { error { code } } }", "variables": {"i": NaN}}',
        ),
    ],
)
def test_malformed_bodies_get_a_400_or_an_invalid_query_never_a_500(
    api: tuple[InProcess, list[str]], name: str, content: bytes
) -> None:
    client, _ = api
    response = client.request(
        "POST", "/graphql", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code in (200, 400), (name, response.text[:300])
    if response.status_code == 200:
        assert response.json()["errors"][0]["extensions"]["code"] == "INVALID_QUERY", name


def test_deeply_nested_variables_in_a_get_request_are_refused(
    api: tuple[InProcess, list[str]],
) -> None:
    client, _ = api
    response = client.request(
        "GET", "/graphql", params={"query": "{ namespace }", "variables": "[" * 3000 + "]" * 3000}
    )
    assert response.status_code == 400 and "nests too deep" in response.text


def test_odd_but_valid_text_round_trips(api: tuple[InProcess, list[str]], tmp_path: Path) -> None:
    client, _ = api
    odd = [
        "emoji 🧠 and RTL \u202e text",
        "a\u0301 combining",
        string.punctuation,
        "\ud7ff\ue000 edges of the BMP",
        "tab\tnew\nline",
    ]
    for text in odd:
        status, body = client.post(
            "mutation($t: String!) { storeFact(input: {text: $t, classify: false}) { fact { text } error { code } } }",
            {"t": text},
        )
        _assert_handled(status, body)
        payload = body["data"]["storeFact"]
        assert payload["error"] is None or payload["error"]["code"] == "INVALID_INPUT", payload
        if payload["fact"] is not None:
            assert payload["fact"]["text"] == text.strip()


# ------------------------------------------------------------------------ strings not text

#: Each string argument that answered INTERNAL_ERROR for a lone surrogate (issue 45): the
#: document, with the string as `$s`, and the argument the error names.
NOT_TEXT_ARGUMENTS = {
    "lookup": ("query($s: String!) { lookup(entity: $s) { id } }", "entity"),
    "fact": ("query($s: ID!) { fact(id: $s) { id } }", "id"),
    "history": ("query($s: ID!) { history(id: $s) { id } }", "id"),
    "facts": (
        "query($s: String) { facts(filter: {entity: $s}) { edges { cursor } } }",
        "filter.entity",
    ),
    "search entity": ('query($s: String) { search(query: "x", entity: $s) { score } }', "entity"),
    "search source": ('query($s: String) { search(query: "x", source: $s) { score } }', "source"),
    "episode": ("query($s: String!) { episode(id: $s) { id } }", "id"),
    "episodes": ("query($s: String) { episodes(source: $s) { id } }", "source"),
    "documents": ("query($s: String) { documents(under: $s) { path } }", "under"),
    "forgetFact": ("mutation($s: ID!) { forgetFact(id: $s) { error { code } } }", "id"),
    "purgeFacts": (
        "mutation($s: String) { purgeFacts(filter: {entity: $s}) { error { code } } }",
        "filter.entity",
    ),
    "unlink": ("mutation($s: ID!) { unlink(id: $s) { error { code } } }", "id"),
    "documentLines": ("query($s: String!) { documentLines(path: $s) }", "path"),
}


@pytest.mark.parametrize(
    ("string", "says"),
    [("\ud83d", "a lone surrogate (\\ud83d)"), ("notes/a\x00.md", "a NUL character (\\u0000)")],
    ids=["lone surrogate", "NUL"],
)
@pytest.mark.parametrize("name", NOT_TEXT_ARGUMENTS)
def test_a_string_that_is_not_text_is_invalid_input_naming_its_argument(
    api: tuple[InProcess, list[str]], name: str, string: str, says: str
) -> None:
    client, _ = api
    query, argument = NOT_TEXT_ARGUMENTS[name]
    for _ in range(2):  # the second time, the document is one the server validated before
        status, body = _post(client, query, {"s": string})
        assert status == 200 and "data" not in body, body  # refused before it ran
        [error] = body["errors"]
        assert error["extensions"] == {"code": "INVALID_INPUT", "field": argument}, error
        assert error["message"] == f"argument `{argument}` contains {says}" + (
            ", which is not text" if "surrogate" in says else ", which no text may hold"
        )


@pytest.mark.parametrize(
    ("query", "variables", "field"),
    [
        ('{ lookup(entity: "a\\u0000b") { id } }', None, "entity"),
        ('query($s: String = "\\u0000") { lookup(entity: $s) { id } }', None, "entity"),
        ('{ ...F } fragment F on Query { episodes(source: "\\u0000") { id } }', None, "source"),
        (
            "mutation($i: [FactInput!]!) { storeFacts(inputs: $i) { error { code } } }",
            {"i": [{"text": "fine"}, {"text": "also fine", "tags": ["ok", "\udc00"]}]},
            "inputs[1].tags[1]",
        ),
        (
            'mutation($m: JSON) { storeFacts(inputs: [{text: "x"}], episode: {id: "e", '
            "metadata: $m}) { error { code } } }",
            {"m": {"deep": [{"\ud83d": 1}]}},
            "episode.metadata.deep[0]",
        ),
        (
            "mutation($t: String!) { storeFact(input: {text: $t}) { error { code } } }",
            {"t": "text\x00"},
            "input.text",
        ),
    ],
    ids=["literal", "default", "fragment", "list in a variable", "JSON key", "fact text"],
)
def test_strings_that_are_not_text_are_found_wherever_the_operation_has_them(
    api: tuple[InProcess, list[str]], query: str, variables: dict[str, Any] | None, field: str
) -> None:
    client, _ = api
    status, body = _post(client, query, variables)
    assert status == 200, body
    assert body["errors"][0]["extensions"] == {"code": "INVALID_INPUT", "field": field}, body
    assert f"argument `{field}` contains" in body["errors"][0]["message"]


def test_text_around_surrogate_pairs_and_control_characters_is_accepted(
    api: tuple[InProcess, list[str]],
) -> None:
    client, _ = api
    found = client.data("query($s: String!) { lookup(entity: $s) { id } }", {"s": "🧠\x01\x7f"})
    assert found == {"lookup": []}


@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("memory_read", {"path": "/notes/a\x00.md"}, "path"),
        ("memory_read", {"path": "/notes/\ud83d.md"}, "path"),
        ("memory_lookup", {"entity": "\ud83d"}, "entity"),
        ("memory_history", {"id": "\x00"}, "id"),
        (
            "memory_capture",
            {"messages": [{"role": "user", "content": "hi \udfff"}]},
            "messages[0].content",
        ),
        ("memory_traverse", {"ids": ["\ud83d"]}, "ids[0]"),
    ],
)
def test_a_tool_argument_that_is_not_text_is_invalid_input_naming_it(
    tmp_path: Path, tool: str, arguments: dict[str, Any], argument: str
) -> None:
    with Memory.open(tmp_path / "data", settings=Settings(embedder="hash")) as memory:

        async def run() -> None:
            async with Client(build_server(lambda ctx: (memory, None))) as client:
                result = await client.call_tool(tool, arguments)
                assert result.is_error
                error = result.structured_content["error"]
                assert error["code"] == "INVALID_INPUT", error
                assert error["message"].startswith(f"argument `{argument}` contains a "), error

        anyio.run(run)


@pytest.mark.parametrize("string", ["\ud83d", "a\x00b"], ids=["lone surrogate", "NUL"])
def test_memory_refuses_a_string_that_is_not_text_naming_the_argument(
    tmp_path: Path, string: str
) -> None:
    calls: list[tuple[str, Any]] = [
        ("fact_id", lambda m: m.get(string)),
        ("fact_id", lambda m: m.history(string)),
        ("fact_id", lambda m: m.forget(string)),
        ("link_id", lambda m: m.unlink(string)),
        ("episode_id", lambda m: m.episode(string)),
        ("source", lambda m: m.episodes(source=string)),
        ("entity", lambda m: m.facts(entity=string)),
        ("entity", lambda m: m.lookup(string)),
        ("key", lambda m: m.lookup("alice", key=string)),
        ("query", lambda m: m.search(string)),
        ("source", lambda m: m.search("x", source=string)),
        ("prompt", lambda m: m.recall(string)),
        ("entity", lambda m: m.purge(entity=string, dry_run=True)),
        ("target_id", lambda m: m.link(m.fact_ids()[0], string, "RELATED_TO")),
        ("item 0: entity", lambda m: m.store("Alice lives in Paris", entity=string)),
    ]
    with Memory.open(tmp_path / "data", settings=Settings(embedder="hash")) as memory:
        memory.store("Alice lives in Paris", entity="alice")
        for argument, call in calls:
            with pytest.raises(InvalidInput) as refused:
                call(memory)
            assert refused.value.message.startswith(f"{argument}: "), refused.value.message
            assert "lone surrogate" in refused.value.message or "NUL" in refused.value.message


@pytest.mark.parametrize("method", ["POST", "GET"])
def test_a_subscription_over_http_is_refused_saying_where_subscriptions_are_served(
    api: tuple[InProcess, list[str]], method: str
) -> None:
    client, _ = api
    query = "subscription { memoryChanged { kind } }"
    if method == "POST":
        status, body = client.post(query)
    else:
        response = client.request("GET", "/graphql", params={"query": query})
        status, body = response.status_code, response.json()
    assert status == 200, body
    [error] = body["errors"]
    assert error["extensions"]["code"] == "INVALID_QUERY", error
    assert "WebSocket" in error["message"] and "graphql-transport-ws" in error["message"]


def test_an_integer_of_thousands_of_digits_is_malformed_json_not_a_server_error(
    api: tuple[InProcess, list[str]],
) -> None:
    client, _ = api
    body = '{"query": "query($n: Int) { facts(first: $n) { edges { cursor } } }", "variables": '
    response = client.request(
        "POST",
        "/graphql",
        content=(body + '{"n": ' + "9" * 5000 + "}}").encode(),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400 and "JSON" in response.text, response.text[:300]


# ------------------------------------------------------------------------ hostile variables


@dataclass(frozen=True)
class Deep:
    """A value nested ``depth`` levels in lists and objects, encoded without recursion (the
    server refuses JSON nested beyond what its parser can read: 400)."""

    depth: int
    leaf: Any


def _encode(value: Any) -> str:
    if isinstance(value, Deep):
        return '[{"k": ' * (value.depth // 2) + _encode(value.leaf) + "}]" * (value.depth // 2)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_encode(v) for v in value) + "]"
    return json.dumps(value)


@st.composite
def _spoiled(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with some of its strings made not text, its integers huge, or nested deep."""
    if draw(st.integers(0, 9)) == 0:
        return Deep(draw(DEPTHS), draw(st.one_of(NOT_TEXT, HUGE_INTEGERS, st.just("leaf"))))
    if isinstance(value, str):
        return draw(st.one_of(st.just(value), NOT_TEXT))
    if isinstance(value, int) and not isinstance(value, bool):
        return draw(st.one_of(st.just(value), HUGE_INTEGERS))
    if isinstance(value, list):
        return [draw(_spoiled(v)) for v in value]
    if isinstance(value, dict):
        return {k: draw(_spoiled(v)) for k, v in value.items()}
    return value


class _ToVariables(Visitor):
    """Turns argument literals into variables of the argument's type, whose values are drawn
    spoiled; the operation gets their definitions."""

    def __init__(self, type_info: TypeInfo, draw: st.DrawFn) -> None:
        super().__init__()
        self.type_info = type_info
        self.draw = draw
        self.variables: dict[str, Any] = {}
        self.definitions: list[VariableDefinitionNode] = []

    def enter_argument(self, node: ArgumentNode, *_: Any) -> ArgumentNode | None:
        input_type: GraphQLInputType | None = self.type_info.get_input_type()
        if input_type is None or not self.draw(st.booleans()):
            return None
        name = f"v{len(self.definitions)}"
        self.variables[name] = self.draw(_spoiled(value_from_ast_untyped(node.value)))
        variable = VariableNode(name=NameNode(value=name))
        self.definitions.append(
            VariableDefinitionNode(variable=variable, type=parse_type(str(input_type)))
        )
        return ArgumentNode(name=node.name, value=variable)

    def leave_operation_definition(
        self, node: OperationDefinitionNode, *_: Any
    ) -> OperationDefinitionNode:
        return OperationDefinitionNode(
            operation=node.operation,
            name=node.name,
            directives=node.directives,
            selection_set=node.selection_set,
            variable_definitions=(*(node.variable_definitions or ()), *self.definitions),
        )


HOSTILE_SCALARS = {
    "DateTime": st.one_of(SCALARS["DateTime"], HUGE_INTEGERS.map(nodes.Int)),
    "JSON": st.one_of(
        SCALARS["JSON"],
        NOT_TEXT.map(nodes.String),
        HUGE_INTEGERS.map(nodes.Int),
        st.integers(2, 400).map(lambda depth: _deep_literal(depth)),
    ),
}


def _deep_literal(depth: int) -> Any:
    value: Any = nodes.Int(1)
    for _ in range(depth):
        value = nodes.List([value])
    return value


@st.composite
def _hostile_requests(draw: st.DrawFn) -> tuple[str, str]:
    """A generated document (queries and mutations) with some of its arguments sent as
    spoiled variables: the query text and the JSON of the variables."""
    document: DocumentNode = draw(
        from_schema(SCHEMA, custom_scalars=HOSTILE_SCALARS, print_ast=lambda d: d, codec=None)
    )
    type_info = TypeInfo(SCHEMA)
    to_variables = _ToVariables(type_info, draw)
    edited = visit(document, TypeInfoVisitor(type_info, to_variables))
    return print_ast(edited), _encode(to_variables.variables)


@FUZZ
@given(request=_hostile_requests())
def test_hostile_variables_are_answered_without_a_server_error(
    api: tuple[InProcess, list[str]], request: tuple[str, str]
) -> None:
    client, ids = api
    query, variables = request
    response = client.request(
        "POST",
        "/graphql",
        content=f'{{"query": {json.dumps(_ids(query, ids))}, "variables": {variables}}}'.encode(),
        headers={"content-type": "application/json"},
    )
    _assert_handled(response.status_code, response.json() if response.status_code != 400 else None)
