"""A client for OpenAI-compatible chat endpoints (OpenAI, Ollama, vLLM, llama.cpp…), asking for
JSON answers.

The openai package sends the request; ``OpenAIEndpoint`` (the embedder's too) retries 429, 5xx
and timeouts with exponential backoff (honouring ``retry-after``), all within ``timeout`` seconds
for the whole request, reads at most MAX_CHAT_ANSWER_BYTES of JSON nested at most
MAX_ANSWER_NESTING deep, and counts the call in the meter; this module checks the answer.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from . import tracing
from .bounded_http import BadAnswer, parse_json
from .errors import InvalidInput, LLMError
from .limits import MAX_CHAT_ANSWER_BYTES
from .settings import Settings
from .vectors.embedders import OpenAIEndpoint


class ChatClient:
    """One chat model at one endpoint."""

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout: float = 60.0,
        max_retries: int = 4,
    ) -> None:
        self._endpoint = OpenAIEndpoint(
            "llm", model, base_url, api_key, timeout=timeout, max_retries=max_retries
        )
        self.model = model
        self.meter = self._endpoint.meter

    @classmethod
    def from_settings(cls, settings: Settings, *, user: str = "classifier = llm") -> ChatClient:
        """The chat model of ``llm_*`` settings; InvalidInput, naming the ``user`` that needs
        it, if neither a key nor a base URL says where to send requests."""
        if settings.llm_base_url is None and settings.llm_api_key is None:
            raise InvalidInput(
                f"{user} needs llm_base_url (any OpenAI-compatible server) or "
                "llm_api_key / OPENAI_API_KEY (api.openai.com)",
                field="llm_base_url",
            )
        return cls(
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key,
            model=settings.llm_model,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )

    @property
    def endpoint(self) -> str:
        return self._endpoint.url

    def complete_json(self, system: str, user: str) -> str:
        """The model's answer to ``system`` + ``user``, asked for as a JSON object at
        temperature 0; LLMError if the endpoint fails, does not answer in time, or answers
        something unusable (too large, too deep, not JSON, no text)."""
        with tracing.model_span("chat", self.provider, self.model, inputs=1) as span:
            body = self._endpoint.answer(
                lambda: self._endpoint.client.chat.completions.with_raw_response.create(
                    model=self.model,
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ],
                    response_format={"type": "json_object"},
                    temperature=0,
                ),
                inputs=1,
                max_bytes=MAX_CHAT_ANSWER_BYTES,
            )
            tracing.model_usage(span, body)
        content = _content(body)
        if content is None:
            raise LLMError("chat endpoint answered without a message")
        return content


def _content(body: Any) -> str | None:
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else None


def answer_object(answer: str) -> dict[str, Any]:
    """A model's JSON answer as an object (a fenced block accepted); LLMError if it is not
    one."""
    text = answer.strip()
    if text.startswith("```") and text.endswith("```"):  # a fenced block despite JSON mode
        text = text.removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        parsed = parse_json(text)
    except BadAnswer as exc:
        raise LLMError(f"the answer is {exc}") from None
    if not isinstance(parsed, dict):
        raise LLMError("the answer is not a JSON object")
    return parsed


class Asking(Protocol):
    """A report of a run that asks the chat model: the requests made, and why an answer was not
    used."""

    requests: int
    error: str | None


def ask_list(
    chat: ChatClient,
    prompt: str,
    question: Any,
    key: str,
    report: Asking,
    *,
    named: bool = False,
) -> list[Any]:
    """The ``key`` list of the model's answer to ``question`` (sent as JSON) under ``prompt``,
    the request counted in ``report``. A failed or unusable answer gives none and says why in
    ``report.error`` (``named``: after the list's name, for a run that asks for several)."""
    report.requests += 1
    try:
        return answer_list(
            chat.complete_json(prompt, json.dumps(question, ensure_ascii=False)), key
        )
    except LLMError as exc:
        report.error = f"{key}: {exc.message}" if named else exc.message
        return []


def answer_list(answer: str | dict[str, Any], key: str) -> list[Any]:
    """The ``key`` list of a model's JSON answer (see ``answer_object``); LLMError if it has
    none."""
    found = (answer if isinstance(answer, dict) else answer_object(answer)).get(key)
    if not isinstance(found, list):
        raise LLMError(f'the answer has no "{key}" list')
    return found
