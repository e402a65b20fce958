"""Hosted and served models over HTTP through the official SDKs: OpenAI, Anthropic, OpenAI-compatible.

Specs:
- ``openai/<model>`` (key ``OPENAI_API_KEY``; ``OPENAI_BASE_URL`` or ``openai/<model>@<url>`` to redirect)
- ``anthropic/<model>`` (key ``ANTHROPIC_API_KEY``; ``ANTHROPIC_BASE_URL`` or ``anthropic/<model>@<url>``, given
  as ``https://host`` or ``https://host/v1``: the SDK appends ``/v1/messages`` itself, so a trailing ``/v1`` is dropped)
- ``openai-compatible/<model>@http://host:port/v1`` (vLLM, llama.cpp, ...; key
  ``OPENAI_COMPATIBLE_API_KEY`` if the server wants one)

API keys are read from the environment at call time, sent only in request headers and scrubbed
from every error message; they never enter cache keys, results or logs. The SDKs' own retries are
off: the client does retries (with back-off, Retry-After and failure accounting) for all backends.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import weakref
from email.utils import parsedate_to_datetime
from typing import Any

from ..errors import UserError
from .base import Backend, BackendError, ChatRequest, ChatResponse, Usage
from .spec import parse_spec

NO_RETRY = {400, 401, 403, 404, 422}
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|sk-ant-[A-Za-z0-9_\-]{6,})")


def redact(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header: a number or an HTTP date."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def status_error(status: int | None, message: str, headers: Any = None) -> BackendError:
    retryable = status is None or status == 408 or status == 409 or status == 429 or status >= 500
    if status in NO_RETRY:
        retryable = False
    return BackendError(message, retryable=retryable, status=status, retry_after=retry_after_seconds(headers))


class _SDKBackend(Backend):
    """Shared plumbing: one SDK client per event loop, key from the environment, error mapping."""

    key_env: str = ""
    key_required: bool = True
    sdk_module: str = ""

    def __init__(self, spec: str) -> None:
        p = parse_spec(spec, allow_endpoint=True)
        if not p.model:
            raise UserError(f"model spec '{spec}': no model name after '{p.backend}/'")
        super().__init__(spec, model=p.model, endpoint=p.endpoint or self.default_endpoint())
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def default_endpoint(self) -> str | None:
        return None

    def api_key(self) -> str | None:
        key = os.environ.get(self.key_env) if self.key_env else None
        if not key and self.key_required:
            raise UserError(f"{self.key_env} is not set: export {self.key_env}=... to use model '{self.spec}'")
        return key

    def available(self) -> tuple[bool, str]:
        import importlib.util

        if importlib.util.find_spec(self.sdk_module) is None:
            return False, f"package '{self.sdk_module}' not installed"
        if self.key_required and not os.environ.get(self.key_env):
            return False, f"{self.key_env} not set"
        return True, "ok"

    def _client(self) -> Any:
        loop = asyncio.get_running_loop()
        c = self._clients.get(loop)
        if c is None:
            c = self._clients[loop] = self._make_client()
        return c

    def _make_client(self) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        c = self._clients.pop(loop, None)
        if c is not None:
            await c.close()

    def _map_error(self, exc: Exception, sdk: Any, key: str | None) -> BackendError:
        if isinstance(exc, sdk.APITimeoutError):
            return BackendError("request timed out", retryable=True)
        if isinstance(exc, sdk.APIConnectionError):
            return BackendError(f"connection failed: {redact(str(exc), key)}", retryable=True)
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            msg = redact(_error_message(exc), key)
            if status in (401, 403):
                msg += f" (check {self.key_env or 'the server key'})"
            elif status == 404:
                msg += f" (check the model name '{self.model}' and the endpoint)"
            return status_error(status, msg, getattr(exc.response, "headers", None))
        raise exc


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", None) or exc)


class OpenAIBackend(_SDKBackend):
    kind = "openai"
    supports_json_schema = True  # response_format json_schema
    key_env = "OPENAI_API_KEY"
    sdk_module = "openai"

    def default_endpoint(self) -> str | None:
        return os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"

    def _make_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(api_key=self.api_key() or "EMPTY", base_url=self.endpoint, max_retries=0, timeout=None)

    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        p = request.params
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "max_tokens": p.max_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
        }
        if p.seed is not None:
            kw["seed"] = p.seed
        if p.stop:
            kw["stop"] = list(p.stop)
        if p.logprobs or p.top_logprobs:
            kw["logprobs"] = True
            if p.top_logprobs:
                kw["top_logprobs"] = p.top_logprobs
        if p.json_schema is not None and self.kind == "openai":
            kw["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": p.json_schema, "strict": False},
            }
        return kw

    async def generate(self, request: ChatRequest) -> ChatResponse:
        key = self.api_key()  # a missing key fails before the SDK is even imported
        import openai

        t0 = time.perf_counter()
        try:
            # The SDK's documented raw route (client.post) instead of chat.completions.create: same
            # HTTP client, auth and error classes, without the per-call TypedDict transform and
            # pydantic model construction, which cost more CPU than the request itself at high
            # concurrency. The JSON answer is read directly.
            r = await self._client().post("/chat/completions", body=self._payload(request), cast_to=object)
        except openai.OpenAIError as exc:
            raise self._map_error(exc, openai, key) from None
        return parse_chat_completion(r, self.spec, time.perf_counter() - t0)


def parse_chat_completion(r: Any, spec: str, latency_s: float) -> ChatResponse:
    """A Chat Completions JSON body -> ChatResponse (text, finish reason, usage, top log-probabilities)."""
    choices = r.get("choices") if isinstance(r, dict) else None
    if not choices:
        raise BackendError(f"response has no choices: {str(r)[:200]}", retryable=True)
    choice = choices[0] or {}
    message = choice.get("message") or {}
    top = None
    content_lp = (choice.get("logprobs") or {}).get("content")
    if content_lp:
        top = [[(t["token"], float(t["logprob"])) for t in (pos.get("top_logprobs") or [])] for pos in content_lp]
    u = r.get("usage") or {}
    return ChatResponse(
        text=message.get("content") or "",
        finish_reason=choice.get("finish_reason") or "stop",
        usage=Usage(prompt_tokens=int(u.get("prompt_tokens") or 0), completion_tokens=int(u.get("completion_tokens") or 0)),
        latency_s=latency_s,
        model=spec,
        top_logprobs=top,
    )


class OpenAICompatibleBackend(OpenAIBackend):
    kind = "openai-compatible"
    supports_json_schema = False  # servers differ; json_schema is not sent
    key_env = "OPENAI_COMPATIBLE_API_KEY"
    key_required = False

    def __init__(self, spec: str) -> None:
        super().__init__(spec)
        if not parse_spec(spec, allow_endpoint=True).endpoint:
            raise UserError(
                f"model spec '{spec}': an OpenAI-compatible server needs its URL: openai-compatible/<model>@http://host:port/v1"
            )

    def default_endpoint(self) -> str | None:
        return None


ANSWER_TOOL = "answer"


def anthropic_base_url(url: str) -> str:
    """The server root the Anthropic SDK wants: it posts to ``<base>/v1/messages``, so a base URL given
    with its API version (``https://host/v1``, as OpenAI-style URLs are written) loses the ``/v1``."""
    root = url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else url


class AnthropicBackend(_SDKBackend):
    kind = "anthropic"
    supports_json_schema = True  # tool mode
    key_env = "ANTHROPIC_API_KEY"
    sdk_module = "anthropic"

    def __init__(self, spec: str) -> None:
        super().__init__(spec)
        if self.endpoint:
            self.endpoint = anthropic_base_url(self.endpoint)

    def default_endpoint(self) -> str | None:
        return os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"

    def _make_client(self) -> Any:
        import anthropic

        key = self.api_key()
        # The SDK sends the key as "Authorization: Bearer"; Anthropic's API and compatible servers
        # (llm-katan, proxies) document "x-api-key", so send it there as well. Same key, same variable.
        return anthropic.AsyncAnthropic(
            api_key=key, base_url=self.endpoint, max_retries=0, timeout=None, default_headers={"x-api-key": key or ""}
        )

    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        p = request.params
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        msgs: list[dict[str, str]] = []
        for m in request.messages:
            if m["role"] == "system":
                continue
            if msgs and msgs[-1]["role"] == m["role"]:  # the API wants alternating roles
                msgs[-1] = {"role": m["role"], "content": msgs[-1]["content"] + "\n\n" + m["content"]}
            else:
                msgs.append({"role": m["role"], "content": m["content"]})
        if not msgs or msgs[0]["role"] != "user":
            msgs.insert(0, {"role": "user", "content": "(conversation start)"})
        # Sampling settings go in the JSON body: recent SDKs dropped them from create()'s keywords,
        # while the API (and compatible servers) still read them.
        sampling: dict[str, Any] = {"temperature": p.temperature}
        if p.top_p < 1.0:
            sampling["top_p"] = p.top_p
        kw: dict[str, Any] = {"model": self.model, "messages": msgs, "max_tokens": p.max_tokens, "extra_body": sampling}
        if system:
            kw["system"] = system
        if p.stop:
            kw["stop_sequences"] = list(p.stop)
        if p.json_schema is not None:
            # structured output on this API is tool mode: one tool whose input is the answer, forced
            kw["tools"] = [
                {"name": ANSWER_TOOL, "description": "Give your answer as structured data.", "input_schema": p.json_schema}
            ]
            kw["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL}
        return kw

    async def generate(self, request: ChatRequest) -> ChatResponse:
        key = self.api_key()
        import anthropic

        t0 = time.perf_counter()
        try:
            r = await self._client().messages.create(**self._payload(request))
        except anthropic.AnthropicError as exc:
            raise self._map_error(exc, anthropic, key) from None
        text = "".join(getattr(b, "text", "") for b in r.content if getattr(b, "type", "") == "text")
        tool = [b for b in r.content if getattr(b, "type", "") == "tool_use" and getattr(b, "name", "") == ANSWER_TOOL]
        if tool:  # tool mode: the answer is the tool's input, as JSON after any text
            text = (text + "\n" if text else "") + json.dumps(tool[-1].input, ensure_ascii=False)
        finish = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length"}.get(
            r.stop_reason or "", r.stop_reason or "stop"
        )
        return ChatResponse(
            text=text,
            finish_reason=finish,
            usage=Usage(prompt_tokens=r.usage.input_tokens or 0, completion_tokens=r.usage.output_tokens or 0),
            latency_s=time.perf_counter() - t0,
            model=self.spec,
        )
