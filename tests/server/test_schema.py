"""The GraphQL schema: schema.graphql is the code's, every type, field, argument and enum value is
described, and `graphmem export-schema` prints it; introspection answers as the spec says and is
held to the depth limit; unexpected errors are masked, each kind's traceback logged once."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphmem.server import build_schema, create_app, schema_sdl
from graphmem.server.commands import cli
from graphql import GraphQLArgument, GraphQLEnumType, GraphQLInputObjectType, GraphQLObjectType

from graphmem import Fact, Memory, Settings

from ..support.graphql_clients import InProcess

ROOT = Path(__file__).resolve().parents[2]


def test_schema_graphql_matches_the_code() -> None:
    assert (ROOT / "schema.graphql").read_text(encoding="utf-8") == schema_sdl(), (
        "schema.graphql is stale: run `graphmem export-schema schema.graphql`"
    )


def test_every_type_field_and_argument_has_a_description() -> None:
    schema = build_schema()._schema
    missing = []
    for name, kind in schema.type_map.items():
        if name.startswith("__") or name in ("String", "Int", "Float", "Boolean", "ID"):
            continue
        if not kind.description:
            missing.append(name)
        if isinstance(kind, GraphQLObjectType | GraphQLInputObjectType):
            for field_name, field in kind.fields.items():
                if not field.description:
                    missing.append(f"{name}.{field_name}")
                args: dict[str, GraphQLArgument] = getattr(field, "args", {})
                missing += [
                    f"{name}.{field_name}({a})" for a, arg in args.items() if not arg.description
                ]
        if isinstance(kind, GraphQLEnumType):
            missing += [f"{name}.{v}" for v, value in kind.values.items() if not value.description]
    assert missing == []


def test_export_schema_prints_the_sdl() -> None:
    result = CliRunner().invoke(cli, ["export-schema"])
    assert result.exit_code == 0 and result.output == schema_sdl()


#: isOneOf asked of every field's type and argument's type, wrapped or not, 30 times (issue 58,
#: row 6): strawberry's own answer failed on every non-null and list wrapper.
IS_ONE_OF = (
    "{ "
    + " ".join(
        f'a{n}: __type(name: "Query") {{ fields {{ type {{ isOneOf ofType {{ isOneOf ofType {{ '
        "isOneOf } } } args { type { kind isOneOf ofType { isOneOf } } } } }"
        for n in range(30)
    )
    + " }"
)


def test_is_one_of_answers_null_for_every_type_but_an_input_object(service: InProcess) -> None:
    body = service.post(IS_ONE_OF)[1]
    assert not body.get("errors"), str(body.get("errors"))[:300]
    answers = {
        (arg["type"]["kind"], arg["type"]["isOneOf"])
        for field in body["data"]["a0"]["fields"]
        for arg in field["args"]
    }
    assert ("INPUT_OBJECT", False) in answers and ("NON_NULL", None) in answers
    assert all(is_one_of is None for kind, is_one_of in answers if kind != "INPUT_OBJECT")
    fact_input = service.data('{ __type(name: "FactInput") { isOneOf } }')
    assert fact_input == {"__type": {"isOneOf": False}}


def test_many_unexpected_errors_of_one_kind_log_one_traceback(
    service: InProcess,
    mem: Memory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mem.store_many([{"text": f"Fact {n} for the log"} for n in range(20)])

    def failing(*_: object, **__: object) -> dict[str, Fact]:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(Memory, "known_now", failing)
    query = (
        "{ "
        + " ".join(
            f"a{n}: facts(first: 20) {{ edges {{ node {{ knownNow {{ id }} }} }} }}"
            for n in range(30)
        )
        + " }"
    )
    caplog.set_level(logging.INFO)
    for _ in range(2):  # through strawberry's pipeline, then as a prepared document
        status, body = service.post(query)
        assert status == 200
        # 600 failures: the answer carries the first 100, and one error counting the others.
        *errors, rest = body["errors"]
        assert len(errors) == 100
        assert {e["extensions"]["code"] for e in errors} == {"INTERNAL_ERROR"}
        assert rest["extensions"]["code"] == "INTERNAL_ERROR" and "500 more" in rest["message"]
        assert "disk" not in json.dumps(body)
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1, len(tracebacks)
    assert "the disk is on fire" in caplog.text
    counted = [r.getMessage() for r in caplog.records if "not logged" in r.getMessage()]
    assert counted == [
        "599 more unexpected errors in this answer not logged (a traceback is logged for the "
        "first of each kind in 60 s)",
        "600 more unexpected errors in this answer not logged (a traceback is logged for the "
        "first of each kind in 60 s)",
    ]
    assert len(caplog.text) < 20_000


def test_introspection_nested_past_the_depth_limit_is_refused(settings: Settings) -> None:
    shallow = settings.model_copy(update={"graphql_max_depth": 4})
    deep = "__schema { types { fields { args { type { name } } } } }"  # 5 fields deep
    chain = "name"
    for _ in range(9):  # as clients nest it: ofType only unwraps what the schema wraps
        chain = f"kind ofType {{ {chain} }}"
    with InProcess(create_app(shallow)) as service:
        for query in ("{ " + deep + " }", "{ ...D } fragment D on Query { " + deep + " }"):
            [error] = service.post(query)[1]["errors"]
            assert error["extensions"]["code"] == "INVALID_QUERY"
            assert "exceeds maximum operation depth of 4" in error["message"]
        answer = service.data("{ __schema { types { fields { type { " + chain + " } } } } }")
        assert answer["__schema"]["types"]
    # The rule counts none for ofType as introspection's unwrapping: the schema has none of
    # its own.
    assert not [
        name
        for name, kind in build_schema()._schema.type_map.items()
        if not name.startswith("__") and "ofType" in getattr(kind, "fields", {})
    ]
