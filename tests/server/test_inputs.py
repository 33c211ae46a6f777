"""Each input is described once, in graphmem's pydantic models: the GraphQL inputs, the MCP tool
schemas, the CLI options and ``Memory``'s keywords name, bound, default and describe its fields
as the model does."""

from __future__ import annotations

import inspect
from enum import Enum
from typing import Any

import click
import pytest
from graphmem.server import schema_sdl
from graphmem.server.graphql.types import CaptureKeep, SearchMode
from graphmem.server.mcp.tools import TOOLS
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    Undefined,
    value_from_ast,
)
from graphql import build_schema as parse_sdl
from pydantic import BaseModel
from strawberry.utils.str_converters import to_camel_case

from graphmem import Client, FactInput, LinkInput, Memory, SearchInput
from graphmem.cli import capture as capture_command
from graphmem.cli import link as link_command
from graphmem.cli import lookup as lookup_command
from graphmem.cli import recall as recall_command
from graphmem.cli import search as search_command
from graphmem.cli import store as store_command
from graphmem.cli import traverse as traverse_command
from graphmem.graph import TraverseInput
from graphmem.models import (
    LINK_TYPE_MEANINGS,
    LINK_TYPES,
    LINKABLE_TYPES,
    CaptureInput,
    MessageInput,
)

#: The JSON schema keys that bound a value.
#: The enum of each argument whose values are not its names.
ENUMS: dict[str, type[Enum]] = {"mode": SearchMode, "keep": CaptureKeep}
BOUNDS = ("minLength", "maxLength", "minimum", "maximum", "enum", "minItems", "maxItems")


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


@pytest.mark.parametrize(
    ("name", "model"),
    [("FactInput", FactInput), ("LinkInput", LinkInput), ("MessageInput", MessageInput)],
)
def test_a_graphql_input_has_every_field_of_the_core_with_its_default_and_description(
    name: str, model: type[BaseModel]
) -> None:
    fields = graphql_input(name).fields
    assert set(fields) == {to_camel_case(field) for field in model.model_fields}
    for field, core in model.model_fields.items():
        given = fields[to_camel_case(field)]
        assert given.description == core.description, field
        written = given.ast_node.default_value if given.ast_node else None
        default = Undefined if written is None else value_from_ast(written, given.type)
        assert default == (Undefined if core.is_required() else core.default), field


@pytest.mark.parametrize(
    ("tool", "model", "own", "named"),
    [
        ("memory_store", FactInput, {"episode"}, {"text", "entity", "valid_from"}),
        ("memory_link", LinkInput, set(), {"source_id", "type", "strength", "valid_from"}),
        ("memory_recall", SearchInput, set(), {"query", "limit", "as_of", "time_hints", "rerank"}),
        ("memory_traverse", TraverseInput, set(), {"ids", "depth", "types", "max_nodes"}),
        ("memory_capture", CaptureInput, set(), {"messages", "episode", "keep"}),
    ],
)
def test_a_tool_bounds_and_describes_each_field_as_the_core_does(
    tool: str, model: type[BaseModel], own: set[str], named: set[str]
) -> None:
    properties = tool_schema(tool)["properties"]
    shared = set(properties) - own
    assert named <= shared <= set(model.model_fields)
    for name in shared:
        core = field_schema(model, name)
        assert properties[name]["description"] == core["description"], name
        assert properties[name].get("default") == core.get("default"), name
        for bound in BOUNDS:
            assert properties[name].get(bound) == core.get(bound), (name, bound)


@pytest.mark.parametrize(
    ("command", "model", "named"),
    [
        (store_command, FactInput, {"entity", "key", "value", "category", "valid_from"}),
        (link_command, LinkInput, {"strength", "valid_from", "valid_until"}),
        (search_command, SearchInput, {"limit", "tag", "mode", "include_superseded", "rerank"}),
        (traverse_command, TraverseInput, {"depth", "types", "direction", "max_nodes"}),
        (capture_command, CaptureInput, {"episode", "keep"}),
        (lookup_command, SearchInput, {"tag", "include_superseded", "as_of", "known_at"}),
        (recall_command, SearchInput, {"graph_depth", "as_of", "known_at"}),
    ],
)
def test_a_command_helps_each_option_with_the_field_description(
    command: click.Command, model: type[BaseModel], named: set[str]
) -> None:
    options = {
        p.name: p
        for p in command.params
        # a --no-... flag turns the field off, and says so in its own words
        if isinstance(p, click.Option) and p.name and p.opts == [f"--{p.name.replace('_', '-')}"]
    }
    shared = set(options) & set(model.model_fields)
    assert named <= shared
    for name in shared:
        description = model.model_fields[name].description
        assert description is not None
        assert (options[name].help or "").endswith(description), name
        default = model.model_fields[name].default
        if default is not None:  # the option defaults as the field does
            assert options[name].default == default, name


def test_the_graphql_link_types_are_the_cores_each_described_by_its_meaning() -> None:
    enum = parse_sdl(schema_sdl()).type_map["LinkType"]
    assert isinstance(enum, GraphQLEnumType)
    assert list(enum.values) == list(LINK_TYPES)
    assert {t: v.description for t, v in enum.values.items()} == dict(LINK_TYPE_MEANINGS)
    assert tool_schema("memory_link")["properties"]["type"]["enum"] == list(LINKABLE_TYPES)


def test_memory_link_defaults_the_strength_as_the_link_input_does() -> None:
    assert inspect.signature(Memory.link).parameters["strength"].default == (
        LinkInput.model_fields["strength"].default
    )


@pytest.mark.parametrize(
    ("field", "model", "renamed"),
    [
        ("search", SearchInput, {}),
        ("traverse", TraverseInput, {"ids": "from"}),
        ("captureMessages", CaptureInput, {}),
    ],
)
def test_a_graphql_field_takes_each_argument_of_the_core_with_its_default_and_description(
    field: str, model: type[BaseModel], renamed: dict[str, str]
) -> None:
    schema = parse_sdl(schema_sdl())
    root = schema.mutation_type if field == "captureMessages" else schema.query_type
    assert root is not None
    arguments = root.fields[field].args
    names = {name: renamed.get(name, to_camel_case(name)) for name in model.model_fields}
    assert set(arguments) == set(names.values())
    for name, core in model.model_fields.items():
        given = arguments[names[name]]
        assert given.description == core.description, name
        written = given.ast_node.default_value if given.ast_node else None
        default = Undefined if written is None else value_from_ast(written, given.type)
        if name in ENUMS:  # the enum's value, not its name
            default = ENUMS[name][str(default)].value
        assert default == (Undefined if core.is_required() else core.default), name


@pytest.mark.parametrize("api", [Memory, Client])
@pytest.mark.parametrize(
    ("verb", "model"),
    [("search", SearchInput), ("traverse", TraverseInput), ("capture", CaptureInput)],
)
def test_memory_defaults_each_argument_as_the_input_does(
    api: type, verb: str, model: type[BaseModel]
) -> None:
    parameters = list(inspect.signature(getattr(api, verb)).parameters.values())[1:]
    assert {p.name for p in parameters} == set(model.model_fields)
    for parameter in parameters:
        core = model.model_fields[parameter.name]
        expected = inspect.Parameter.empty if core.is_required() else core.default
        assert parameter.default == expected, parameter.name


def test_the_capture_tool_describes_each_message_field_as_the_core_does() -> None:
    items = tool_schema("memory_capture")["properties"]["messages"]["items"]
    assert items["required"] == ["role", "content"]
    for name in MessageInput.model_fields:
        core = field_schema(MessageInput, name)
        given = items["properties"][name]
        assert given["description"] == core["description"], name
        assert given.get("enum") == core.get("enum"), name
