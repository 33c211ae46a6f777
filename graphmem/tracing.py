"""OpenTelemetry spans of graphmem's work: GraphQL operations, MCP tool calls, search legs, write
batches, traversals and model calls (docs/operations.md, "Tracing").

1. Off by default, and then nothing but a null context manager: ``span`` returns the same
   one every time, so a hook costs a function call and its attributes' dict (well under a
   microsecond). graphmem works without ``opentelemetry-api`` installed (the ``otel`` extra).
2. ``enable(provider)`` sends spans to a TracerProvider (an application's own, or the process's
   global one); ``configure(settings)``, which ``graphmem serve`` and ``graphmem mcp`` call,
   makes one that exports by OTLP over HTTP when an endpoint is configured.
3. Spans carry names, counts, codes and the namespace: never a fact's text, a query or a prompt
   (an error's message may quote input, so only its code and exception type are recorded).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .errors import Code, GraphmemError, InvalidInput
from .usage import reported_tokens
from .version import __version__

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.trace import Link, Tracer, TracerProvider

    from .settings import Settings

try:
    from opentelemetry import propagate
    from opentelemetry import trace as _trace

    #: Whether OpenTelemetry's API is installed (the otel extra): without it tracing stays off,
    #: and neither ``_trace`` nor ``propagate`` is bound.
    OPENTELEMETRY = True
except ImportError:
    OPENTELEMETRY = False

T = TypeVar("T")
#: What a span's attributes may hold (OpenTelemetry's primitive values).
Attributes = Mapping[str, str | bool | int | float]

#: The instrumentation scope graphmem's spans are made under.
TRACER_NAME: Final = "graphmem"
#: The ``service.name`` of the spans ``configure`` exports, unless ``otel_service_name`` or
#: ``OTEL_SERVICE_NAME`` names another.
DEFAULT_SERVICE_NAME: Final = "graphmem"
#: The path of the traces signal under an OTLP/HTTP endpoint (OpenTelemetry's).
TRACES_PATH: Final = "/v1/traces"

#: Attributes of graphmem's spans (docs/operations.md lists every span and its attributes).
NAMESPACE: Final = "graphmem.namespace"
COST: Final = "graphmem.cost"
ERROR_CODE: Final = "graphmem.error_code"
ERROR_TYPE: Final = "error.type"


class NullSpan:
    """What ``span`` yields while tracing is off: takes attributes and drops them."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Attributes) -> None:
        pass


#: What ``span`` returns while tracing is off (one context manager for every span).
OFF: Final = contextlib.nullcontext(NullSpan())
_tracer: Tracer | None = None


def enabled() -> bool:
    """Whether spans are being made."""
    return _tracer is not None


def enable(provider: TracerProvider | None = None) -> None:
    """Make spans from now on with ``provider`` (None: the process's global TracerProvider, so
    an application that configured OpenTelemetry gets graphmem's spans in its own traces).
    InvalidInput without ``opentelemetry-api``."""
    global _tracer
    if not OPENTELEMETRY:
        raise InvalidInput(
            "tracing needs OpenTelemetry: pip install 'graphmem[otel]'", field="otel_endpoint"
        )
    source = provider if provider is not None else _trace.get_tracer_provider()
    _tracer = source.get_tracer(TRACER_NAME, __version__)


def disable() -> None:
    """Make no more spans (those begun end as usual)."""
    global _tracer
    _tracer = None


def span(
    name: str,
    attributes: Attributes | None = None,
    *,
    links: Sequence[Link] = (),
    carrier: Mapping[str, str] | None = None,
) -> AbstractContextManager[Any]:
    """A span named ``name`` around the block, yielded (a ``NullSpan`` while tracing is off):
    the current span's child, or outside any span the child of the one a ``traceparent`` in
    ``carrier`` (a request's headers) names. An exception leaving the block sets the span's
    status to error with its type and, for a graphmem error, its code: never its message."""
    tracer = _tracer
    if tracer is None:
        return OFF
    return _recording(tracer, name, attributes, links, carrier)


def carried(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn``, run in a copy of the calling thread's context wherever it is called (a pool
    thread), so that its spans are children of the caller's; ``fn`` itself while tracing is
    off."""
    if _tracer is None:
        return fn
    return functools.partial(contextvars.copy_context().run, fn)


def annotate(attributes: Attributes) -> None:
    """Set ``attributes`` on the current span (one the caller opened with ``span``)."""
    if _tracer is not None:  # a tracer is made only with OpenTelemetry's API
        _trace.get_current_span().set_attributes(attributes)


def link() -> Link | None:
    """A link to the current span (for work done on behalf of several callers, such as a
    group commit); None while tracing is off or outside any span."""
    if _tracer is None:
        return None
    context = _trace.get_current_span().get_span_context()
    return _trace.Link(context) if context.is_valid else None


def failed(current: Any, code: str) -> None:
    """Mark ``current`` (a span from ``span``) as failed with graphmem error ``code``."""
    if not OPENTELEMETRY or isinstance(current, NullSpan):
        return
    current.set_attribute(ERROR_CODE, code)
    current.set_status(_trace.Status(_trace.StatusCode.ERROR, code))


def model_span(
    operation: str, provider: str, model: str, *, inputs: int
) -> AbstractContextManager[Any]:
    """The span of one call of a model (``operation``: ``chat`` or ``embeddings``), named and
    described as OpenTelemetry's GenAI conventions say; ``inputs``: the texts sent."""
    if _tracer is None:
        return OFF
    attributes: Attributes = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "graphmem.model.inputs": inputs,
    }
    return span(f"{operation} {model}", attributes)


def model_usage(current: Any, answer: Any) -> None:
    """Set on ``current`` (a ``model_span``) the tokens an OpenAI-compatible ``answer``
    reports using."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    for reported, attribute in (
        ("prompt_tokens", "gen_ai.usage.input_tokens"),
        ("completion_tokens", "gen_ai.usage.output_tokens"),
    ):
        tokens = reported_tokens(usage, reported)
        if tokens:
            current.set_attribute(attribute, tokens)


def configure(settings: Settings, environ: Mapping[str, str] | None = None) -> bool:
    """For a server process: the ``exporting`` provider of ``settings`` made the process's
    global TracerProvider, and enabled. Whether tracing is on."""
    provider = exporting(settings, os.environ if environ is None else environ)
    if provider is None:
        return False
    assert OPENTELEMETRY  # the SDK depends on the API
    _trace.set_tracer_provider(provider)
    enable(provider)
    return True


def exporting(settings: Settings, environ: Mapping[str, str]) -> SdkTracerProvider | None:
    """A TracerProvider exporting by OTLP over HTTP, its spans batched, when an endpoint is
    configured (``otel_endpoint``, else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_ENDPOINT``) and ``OTEL_SDK_DISABLED`` is not true; None otherwise. The
    other ``OTEL_*`` variables (headers, timeout, sampler, resource attributes) apply as
    OpenTelemetry documents them. InvalidInput without the ``otel`` extra."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    endpoint = traces_endpoint(settings.otel_endpoint, environ)
    if endpoint is None:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise InvalidInput(
            f"tracing to {endpoint} needs the OpenTelemetry SDK and OTLP exporter: "
            "pip install 'graphmem[otel]'",
            field="otel_endpoint",
        ) from None
    name = settings.otel_service_name or environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    resource = Resource.create({SERVICE_NAME: name, SERVICE_VERSION: __version__})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def traces_endpoint(setting: str | None, environ: Mapping[str, str]) -> str | None:
    """The URL spans are posted to: ``setting`` (a base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT``
    is) with TRACES_PATH appended, else the environment's; None when none is set."""
    if setting:
        return setting.rstrip("/") + TRACES_PATH
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return base.rstrip("/") + TRACES_PATH if base else None


@contextlib.contextmanager
def _recording(
    tracer: Tracer,
    name: str,
    attributes: Attributes | None,
    links: Sequence[Link],
    carrier: Mapping[str, str] | None,
) -> Iterator[Any]:
    with tracer.start_as_current_span(
        name,
        context=None if carrier is None else _remote_parent(carrier),
        attributes=attributes,
        links=links,
        record_exception=False,  # its message may quote the input
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except Exception as exc:
            current.set_attribute(ERROR_TYPE, type(exc).__qualname__)
            failed(current, _code_of(exc))
            raise


def _remote_parent(carrier: Mapping[str, str]) -> Context | None:
    """The context of the span ``carrier``'s ``traceparent`` names (W3C Trace Context, or the
    process's propagators), when there is no current span (which would have read it already,
    as an instrumented ASGI server's does) and it names one; None: the current context."""
    assert OPENTELEMETRY
    if _trace.get_current_span().get_span_context().is_valid:
        return None
    found = propagate.extract(carrier)
    return found if _trace.get_current_span(found).get_span_context().is_valid else None


def _code_of(exc: Exception) -> str:
    """The code ``exc`` is answered with: a graphmem error's, a GraphQL refusal's
    (``extensions.code``), else INTERNAL_ERROR."""
    if isinstance(exc, GraphmemError):
        return exc.code
    extensions = getattr(exc, "extensions", None)
    code = extensions.get("code") if isinstance(extensions, dict) else None
    return code if isinstance(code, str) else Code.INTERNAL_ERROR
