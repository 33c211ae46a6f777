"""Names vulture takes for dead code that are used, by a framework or a protocol rather than by
a call in this repository (`make lint` runs vulture with this file; settings in pyproject.toml).

Functions registered by a decorator (click commands, strawberry resolvers, pydantic validators)
are left out by `ignore_decorators` there, not listed here. Vulture matches names, not places:
an entry covers every definition of that name, so keep each one specific.
"""

# ruff: noqa: B018, F821  (a list of bare names, parsed by vulture and never run)

# Parameters the context-manager protocol names (__exit__), used or not.
exc_type
tb

# Attributes the owning library reads: sqlite3 cursors and connections, onnxruntime's session
# options, selenium's Chrome options, uvicorn's server (set to stop it).
_.row_factory
_.intra_op_num_threads
_.inter_op_num_threads
_.log_severity_level
_.binary_location
_.should_exit
# faiss's index and clustering parameters (bench/ann.py).
_.nprobe
_.niter

# pydantic reads each model's configuration from this class attribute.
model_config

# inspect.signature reads a function's signature from this attribute (graphql/arguments.py).
_.__signature__

# pytest reads a module's marks from `pytestmark`, and runs autouse fixtures unasked.
pytestmark
_isolated_settings

# Enum members reached by iteration, by value or through the GraphQL schema, not by name.
SUPERSEDES
RELATED_TO
DEPENDS_ON
OUT
IN
HYBRID
NONE
HTTP
LLM
FTS
VECTOR
ADD
UPDATE
DELETE
NOOP
SKIP
SHORT
MINIMAL
KEYWORD
VECTOR
GRAPH
INVALID_INPUT
NOT_FOUND
CONFLICT
FORBIDDEN
FACT_STORED
FACT_SUPERSEDED
FACT_FORGOTTEN
PRUNE
CLASSIFY
VALID
STATED

# LangGraph's BaseStore calls its subclasses' async batch (graphmem.integrations.langgraph).
_.abatch

# Settings read by name: each maintenance job's period is the setting `<job>_interval`
# (graphmem.maintenance.interval).
_.prune_interval
_.classify_interval
_.reflect_interval
_.consolidate_interval

# strawberry type fields: the schema resolves them, GraphQL clients read them.
_.outgoing
_.has_next_page
_.end_cursor
_.page_info
_.purged_id

# Hooks strawberry calls on the classes that override them: the ASGI app's per-request context,
# its JSON encoding and decoding and its execution of one HTTP request, its page for a browser
# (GraphiQL), the error-masking extension's error pass, a schema extension's validation and
# execution steps.
_.get_context
_.render_graphql_ide
_.encode_json
_.decode_json
_.execute_single
_._process_errors
_.on_validate
_.on_execute

# Methods graphql-core's visitor calls by the kind of node they name (tests/system/test_reliability_hostile.py, and
# the depth and alias rules of resolvers/graphql/schema.py).
_.enter_argument
_.enter_document
_.leave_operation_definition

# Named by import string: uvicorn calls it in each worker of `graphmem serve --workers N`.
app_from_environment

# strawberry reads the fields of a test's types by name, and executes with the class set on the
# schema (tests/server/test_completion.py).
_.leaves
_.execution_context_class

# pytest hooks and fixtures named by pytest (tests/conftest.py: the --store option).
pytest_addoption
pytest_collection_modifyitems
postgres_url
_emptied

# LangGraph's own store tests call these, from their source distributions, and the plugin's
# autouse fixture (tests/thirdparty/langgraph_store_plugin.py) closes the stores they open.
_.from_conn_string
_graphmem_stores

# strawberry calls these by name: the view's WebSocket handler class, an extension's results
# for the answer's `extensions`, the schema's error logging, and the handler's operation runner.
_.graphql_transport_ws_handler_class
_.get_results
_.process_errors
_.run_operation

# Read by the websockets library and uvicorn's protocol (resolvers/http/sockets.py): the message
# size a connection takes, and that its close frame is on its way.
_.max_message_size
_.close_sent

# http.server calls a handler's methods by name (tests/server/test_tracing.py's OTLP collector).
_.do_POST
_.log_message
