"""The GraphQL schema: schema.graphql is the code's, every type, field, argument and enum value is
described, and `graphmem export-schema` prints it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from graphql import GraphQLArgument, GraphQLEnumType, GraphQLInputObjectType, GraphQLObjectType

from resolvers import build_schema, schema_sdl
from resolvers.commands import cli

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
