"""The cheaper completion of plain objects (resolvers/graphql/fastpaths.py) answers exactly what graphql-core's
own completion answers: the same data in the same order, and the same errors at the same paths
when a value does not fit its type."""

from __future__ import annotations

import asyncio
import json
from enum import Enum
from typing import Any

import pytest
import strawberry
from graphmem.server.context import Context
from graphmem.server.events import Broadcaster
from graphmem.server.graphql.fastpaths import LeanExecutor
from graphmem.server.graphql.schema import build_schema
from graphql import GraphQLError
from graphql.execution import Executor
from starlette.requests import Request
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types import ExecutionResult

from graphmem import Link, Memory
from graphmem.temporal import parse_time


class Counted(LeanExecutor):
    """Counts the fields graphql-core executes one by one."""

    fields = 0

    def execute_field(self, *args: Any, **kwargs: Any) -> Any:
        Counted.fields += 1
        return super().execute_field(*args, **kwargs)


class CountedPlain(StrawberryGraphQLCoreExecutionContext):
    fields = 0

    def execute_field(self, *args: Any, **kwargs: Any) -> Any:
        CountedPlain.fields += 1
        return super().execute_field(*args, **kwargs)


@strawberry.enum
class Colour(Enum):
    RED = "red"
    BLUE = "blue"


@strawberry.type
class Leaf:
    name: str
    colour: Colour
    tags: list[str]
    note: str | None


@strawberry.type
class Tree:
    label: str
    leaves: list[Leaf]
    best: Leaf | None

    @strawberry.field
    def shout(self) -> str:
        return self.label.upper()


def leaf(name: Any, colour: Any = Colour.RED, tags: Any = ("a", "b")) -> Leaf:
    # A number where a list belongs is one of the irregular cases.
    listed: Any = tags if isinstance(tags, int) else list(tags)
    return Leaf(name=name, colour=colour, tags=listed, note=None)


TREES: dict[str, list[Tree]] = {
    "regular": [
        Tree(label=f"oak {n}", leaves=[leaf("x"), leaf("y", Colour.BLUE)], best=leaf("x"))
        for n in range(20)
    ]
    + [Tree(label="elm", leaves=[], best=None)],
    # A null where the schema promises a value, in a list item and in a nullable object.
    "null name": [Tree(label="ash", leaves=[leaf("x"), leaf(None)], best=leaf(None))],
    # A null item in a list of non-null items.
    "null leaf": [Tree(label="box", leaves=[leaf("x"), leaf("y"), None], best=None)],  # type: ignore[list-item]
    # A value its enum cannot represent, and a list that is not a list.
    "bad enum": [Tree(label="fir", leaves=[leaf("x", colour="green")], best=None)],
    "not a list": [Tree(label="yew", leaves=[leaf("x", tags=5)], best=None)],
}


@strawberry.type
class Query:
    @strawberry.field
    def trees(self, case: str) -> list[Tree]:
        return TREES[case]


QUERY = """
query($case: String!, $withNote: Boolean!) {
  trees(case: $case) {
    __typename label
    leaves { name colour tags ... on Leaf { alias: name note @include(if: $withNote) } }
    best { ...Named }
  }
}
fragment Named on Leaf { name colour }
"""


def run(executor: type[Executor], case: str, query: str = QUERY) -> ExecutionResult:
    schema = strawberry.Schema(query=Query, execution_context_class=executor)
    return schema.execute_sync(query, variable_values={"case": case, "withNote": True})


def errors(result: ExecutionResult) -> list[tuple[str, Any]]:
    return sorted((e.message, e.path) for e in result.errors or [])


@pytest.mark.parametrize("case", sorted(TREES))
def test_the_lean_answer_is_graphql_cores_answer(case: str) -> None:
    CountedPlain.fields = Counted.fields = 0
    plain = run(CountedPlain, case)
    lean = run(Counted, case)
    assert lean.data == plain.data
    assert list(lean.data or {}) == list(plain.data or {})
    assert errors(lean) == errors(plain)
    if case == "regular":
        assert plain.errors is None
        # Only the first tree (and the first of each kind of leaf in it) went through
        # graphql-core field by field; the 20 others were completed by the plan.
        assert CountedPlain.fields > 300
        assert Counted.fields < 20
    else:
        assert plain.errors, "the irregular value was reported"
        assert all(isinstance(e, GraphQLError) and e.path for e in plain.errors or [])


def test_a_field_with_a_resolver_is_left_to_graphql_core() -> None:
    query = '{ trees(case: "regular") { shout leaves { name } } }'
    CountedPlain.fields = Counted.fields = 0
    plain = run(CountedPlain, "regular", query)
    lean = run(Counted, "regular", query)
    assert lean.data == plain.data
    assert plain.data is not None
    assert plain.data["trees"][0] == {"shout": "OAK 0", "leaves": [{"name": "x"}, {"name": "y"}]}
    # The root, each tree's two fields, and each leaf's name; the lean executor completes each
    # list of leaves by a plan.
    assert CountedPlain.fields == 1 + 21 * 2 + 20 * 2
    assert Counted.fields == 1 + 21 * 2


def test_a_traversal_answers_the_same_through_the_service_schema(mem: Memory) -> None:
    a, b, c = (mem.store(f"fact {n} about the lean path", autolink=False).fact for n in "abc")
    assert a is not None and b is not None and c is not None
    mem.link(a.id, b.id, "DEPENDS_ON")
    mem.link(b.id, c.id, "PART_OF", strength=0.5)
    query = """query($id: ID!) { traverse(from: [$id], depth: 2) {
      nodes { depth parentIds fact { id text category importance validFrom validUntil tags } }
      edges { id type strength sourceId targetId recordedAt metadata } truncated truncatedBy
    } }"""
    answers = []
    for executor in (StrawberryGraphQLCoreExecutionContext, LeanExecutor):
        schema = build_schema()
        schema.execution_context_class = executor

        async def execute(schema: strawberry.Schema = schema) -> ExecutionResult:
            request = Request({"type": "http", "method": "POST", "path": "/", "headers": []})
            context = Context(mem, None, request, Broadcaster(asyncio.get_running_loop()))
            return await schema.execute(query, {"id": a.id}, context_value=context)

        result = asyncio.run(execute())
        assert result.errors is None
        answers.append(result.data)
    assert answers[0] == answers[1]
    assert answers[1] is not None
    assert [n["fact"]["id"] for n in answers[1]["traverse"]["nodes"]] == [a.id, b.id, c.id]


def test_every_field_of_a_traversed_fact_and_link_is_the_engines(mem: Memory) -> None:
    # The GraphQL objects read each field from the engine's object when asked (resolvers/graphql/types.py
    # _View): every field, renamed or converted or not, must say what the engine says.
    old = mem.store("Ana lives in Lisbon", entity="Ana", key="city", value="Lisbon").fact
    assert old is not None
    new = mem.store(
        "Ana works in Porto since 2019",
        entity="Ana",
        key="office",
        value="Porto",
        tags=["home"],
        source="chat",
        source_date="2024-05-01",
        summary="moved",
        why="she said so",
        context="turn 3",
    ).fact
    assert new is not None
    link = mem.link(old.id, new.id, "CAUSED_BY", strength=0.25, metadata={"by": "test"})
    fact_fields = [
        _camel(name) + (" { start end text }" if name == "stated_time" else "")
        for name in new.to_dict()
        if name != "superseded_by"
    ]
    link_fields = [_camel(name) for name in Link.__dataclass_fields__]
    query = (
        "query($id: ID!) { traverse(from: [$id], depth: 1) { nodes { fact { supersededById "
        + " ".join(fact_fields)
        + " } } edges { "
        + " ".join(link_fields)
        + " } } }"
    )

    async def execute() -> ExecutionResult:
        request = Request({"type": "http", "method": "POST", "path": "/", "headers": []})
        context = Context(mem, None, request, Broadcaster(asyncio.get_running_loop()))
        return await build_schema().execute(query, {"id": old.id}, context_value=context)

    result = asyncio.run(execute())
    assert result.errors is None and result.data is not None
    engine = {f.id: f.to_dict() for f in mem.get_many([old.id, new.id]).values()}
    assert len(result.data["traverse"]["nodes"]) == 2
    for node in result.data["traverse"]["nodes"]:
        shown = node["fact"]
        want = engine[shown["id"]]
        assert shown["supersededById"] == want["superseded_by"]
        assert {k: _plain(v) for k, v in shown.items() if k != "supersededById"} == {
            _camel(k): _plain(v) for k, v in want.items() if k != "superseded_by"
        }
    (edge,) = [e for e in result.data["traverse"]["edges"] if e["id"] == link.id]
    assert {k: _plain(v) for k, v in edge.items()} == {
        _camel(k): _plain(v) for k, v in link.to_dict().items()
    }


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _plain(value: Any) -> Any:
    """Times as the engine's to_dict and GraphQL both write them can differ only in form."""
    if isinstance(value, str) and value.endswith(("Z", "+00:00")) and "T" in value:
        return parse_time(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class Limited:
    """A context saying how many bytes the answer may come to."""

    def __init__(self, answer_limit: int | None) -> None:
        self.answer_limit = answer_limit


#: The items whose ``shout`` was resolved.
SHOUTED: list[int] = []


@strawberry.type
class Big:
    text: str

    @strawberry.field
    def shout(self) -> str:
        SHOUTED.append(1)
        return self.text.upper()


@strawberry.type
class BigQuery:
    @strawberry.field
    def bigs(self) -> list[Big]:
        return [Big(text=f"{n} " + "x" * 1_000) for n in range(1_000)]


def test_completion_stops_once_the_answer_passes_its_limit() -> None:
    shouted = SHOUTED
    shouted.clear()
    schema = strawberry.Schema(query=BigQuery, execution_context_class=LeanExecutor)
    query = "{ bigs { text shout } }"  # about 2 MB
    whole = schema.execute_sync(query, context_value=Limited(None))
    assert whole.errors is None and len(shouted) == 1_000
    assert len(json.dumps(whole.data)) > 2_000_000
    shouted.clear()
    stopped = schema.execute_sync(query, context_value=Limited(65_536))
    assert stopped.data is None
    [error] = stopped.errors or []
    assert error.extensions == {"code": "TOO_COSTLY"} and "65,536" in error.message
    assert 20 < len(shouted) < 40  # 2 KB an item: stopped at the 32nd


def test_an_answer_is_refused_for_its_size_only_near_what_it_encodes_to() -> None:
    schema = strawberry.Schema(query=Query, execution_context_class=LeanExecutor)

    def answer(limit: int | None) -> ExecutionResult:
        variables = {"case": "regular", "withNote": True}
        return schema.execute_sync(QUERY, variables, context_value=Limited(limit))

    encoded = len(json.dumps(answer(None).data, separators=(",", ":")))
    assert answer(encoded).errors is None
    [error] = answer(int(0.8 * encoded)).errors or []
    assert error.extensions == {"code": "TOO_COSTLY"}
