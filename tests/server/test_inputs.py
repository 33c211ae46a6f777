"""Each input is described once, in graphmem's pydantic models: the GraphQL inputs, the MCP tool
schemas, the CLI options and ``Memory``'s keywords name, bound, default and describe its fields
as the model does."""

from __future__ import annotations

from typing import Any

import click
from graphql import GraphQLInputObjectType, Undefined, value_from_ast
from graphql import build_schema as parse_sdl
from pydantic import BaseModel
from strawberry.utils.str_converters import to_camel_case

from graphmem import FactInput
from graphmem.cli import store as store_command
from resolvers import schema_sdl
from resolvers.mcp.tools import TOOLS

#: The JSON schema keys that bound a value.
BOUNDS = ("minLength", "maxLength", "minimum", "maximum", "enum")


def graphql_input(name: str) -> GraphQLInputObjectType:
    found = parse_sdl(schema_sdl()).type_map[name]
    assert isinstance(found, GraphQLInputObjectType)
    return found


def tool_schema(name: str) -> dict[str, Any]:
    [tool] = [t for t in TOOLS if t.name == name]
    schema: dict[str, Any] = tool.spec().input_schema
    return schema


def field_schema(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The JSON schema of one field of ``model``, its optional type as the plain type."""
    node: dict[str, Any] = model.model_json_schema()["properties"][name]
    for option in node.get("anyOf", []):
        if option != {"type": "null"}:
            node = {**option, **node}
    return node


def test_graphql_fact_input_has_every_field_of_the_core_with_its_default_and_description() -> None:
    fields = graphql_input("FactInput").fields
    assert set(fields) == {to_camel_case(name) for name in FactInput.model_fields}
    for name, core in FactInput.model_fields.items():
        given = fields[to_camel_case(name)]
        assert given.description == core.description, name
        written = given.ast_node.default_value if given.ast_node else None
        default = Undefined if written is None else value_from_ast(written, given.type)
        assert default == (Undefined if core.is_required() else core.default), name


def test_the_store_tool_bounds_and_describes_each_fact_field_as_the_core_does() -> None:
    properties = tool_schema("memory_store")["properties"]
    shared = set(properties) - {"episode"}
    assert shared <= set(FactInput.model_fields)
    assert {"text", "entity", "key", "value", "valid_from", "supersedes"} <= shared
    for name in shared:
        core = field_schema(FactInput, name)
        assert properties[name]["description"] == core["description"], name
        for bound in BOUNDS:
            assert properties[name].get(bound) == core.get(bound), (name, bound)


def test_the_store_command_helps_each_fact_option_with_the_field_description() -> None:
    options = {p.name: p for p in store_command.params if isinstance(p, click.Option) and p.name}
    fact_options = set(options) & set(FactInput.model_fields)
    assert {"entity", "key", "value", "category", "valid_from", "supersedes"} <= fact_options
    for name in fact_options:
        description = FactInput.model_fields[name].description
        assert description is not None
        assert (options[name].help or "").endswith(description), name
