"""The GraphQL schema: schema.graphql is the code's, every type, field, argument and enum value is
described, and `graphmem export-schema` prints it; introspection is held to the depth limit."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from graphql import GraphQLArgument, GraphQLEnumType, GraphQLInputObjectType, GraphQLObjectType

from graphmem import Settings
from resolvers import build_schema, create_app, schema_sdl
from resolvers.commands import cli

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
