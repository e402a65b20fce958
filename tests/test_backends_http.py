"""HTTP backends against a scripted local server: Retry-After is honoured, dropped connections retried."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mascot_eval.backends import usage
from mascot_eval.backends.base import BackendError
from mascot_eval.backends.client import ClientSettings, ModelClient


class Script:
    """What the server does for request 1, 2, ...: ("429", retry_after) / ("drop",) / ("ok",)."""

    def __init__(self, steps):
        self.steps = list(steps)
        self.times: list[float] = []
        self.auth: list[str] = []


def _serve(reply):
    """A scripted HTTP server on 127.0.0.1: ``reply(handler, body)`` returns (status, JSON object, extra
    headers), or None to drop the connection without an answer."""

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            out = reply(self, body)
            if out is None:
                self.close_connection = True
                self.connection.shutdown(2)
                return
            status, obj, headers = out
            data = json.dumps(obj).encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _server(script: Script):
    def reply(handler, body):
        script.times.append(time.monotonic())
        script.auth.append(handler.headers.get("authorization", ""))
        step = script.steps.pop(0) if script.steps else ("ok",)
        if step[0] == "drop":
            return None
        if step[0] in ("429", "503"):
            return int(step[0]), {"error": {"message": "slow down"}}, {"retry-after": str(step[1])}
        return (
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
            {},
        )

    return _serve(reply)


@pytest.fixture(autouse=True)
def _clean_ledger():
    usage.LEDGER.reset()
    yield
    usage.LEDGER.reset()


def _chat(spec, **settings):
    client = ModelClient(spec, ClientSettings(use_cache=False, backoff_base_s=0.001, backoff_max_s=0.002, **settings))

    async def go():
        try:
            return await client.chat([{"role": "user", "content": "ping"}])
        finally:
            await client.aclose()

    return client, asyncio.run(go())


@pytest.mark.parametrize("status", ["429", "503"])
def test_retry_after_is_honoured(status, monkeypatch):
    from mascot_eval.backends import client as client_mod

    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    waits: list[float] = []
    real = client_mod.backoff_delay

    def recorded(*a, **kw):
        waits.append(real(*a, **kw))
        return waits[-1]

    monkeypatch.setattr(client_mod, "backoff_delay", recorded)
    script = Script([(status, 1), ("ok",)])
    srv = _server(script)
    try:
        client, r = _chat(f"openai-compatible/m@http://127.0.0.1:{srv.server_port}/v1")
    finally:
        srv.shutdown()
    assert r.text == "pong" and r.retries == 1 and client.calls == 2
    assert len(waits) == 1 and 1.0 <= waits[0] <= 1.1  # the server's Retry-After (+<=10% jitter), not the 1 ms back-off
    assert script.times[1] - script.times[0] >= 0.99  # and the client did wait it out (a busy machine only waits longer)
    assert script.auth[0] == "Bearer EMPTY"  # keyless servers get a placeholder, never another variable's key


def test_dropped_connection_is_retried():
    script = Script([("drop",), ("drop",), ("ok",)])
    srv = _server(script)
    try:
        client, r = _chat(f"openai-compatible/m@http://127.0.0.1:{srv.server_port}/v1", max_retries=3)
    finally:
        srv.shutdown()
    assert r.text == "pong" and r.retries == 2 and client.calls == 3


def test_dropped_connections_give_up_with_cause():
    script = Script([("drop",)] * 5)
    srv = _server(script)
    try:
        with pytest.raises(BackendError, match=r"connection failed.*\(gave up after 1 retries\)"):
            _chat(f"openai-compatible/m@http://127.0.0.1:{srv.server_port}/v1", max_retries=1)
    finally:
        srv.shutdown()
    assert len(script.times) == 2


def test_key_sent_only_in_header(monkeypatch, tmp_path):
    key = "sk-compat-secret-abcdef123456"
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", key)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other-provider-key-999999")
    script = Script([("ok",)])
    srv = _server(script)
    try:
        client = ModelClient(
            f"openai-compatible/m@http://127.0.0.1:{srv.server_port}/v1", ClientSettings(cache_dir=str(tmp_path))
        )

        async def go():
            try:
                return await client.chat([{"role": "user", "content": "ping"}])
            finally:
                await client.aclose()

        r = asyncio.run(go())
    finally:
        srv.shutdown()
    assert r.text == "pong" and script.auth == [f"Bearer {key}"]
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("responses.sqlite*"))
    assert b"pong" in stored and key.encode() not in stored and b"sk-other" not in stored


def test_parse_chat_completion_with_logprobs():
    from mascot_eval.backends.http import parse_chat_completion

    body = {
        "choices": [
            {
                "message": {"role": "assistant", "content": "4"},
                "finish_reason": "length",
                "logprobs": {
                    "content": [
                        {
                            "token": "4",
                            "logprob": -0.1,
                            "top_logprobs": [{"token": "4", "logprob": -0.1}, {"token": "5", "logprob": -2.5}],
                        }
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1},
    }
    r = parse_chat_completion(body, "openai/x", 0.5)
    assert (r.text, r.finish_reason, r.usage.prompt_tokens, r.usage.completion_tokens) == ("4", "length", 10, 1)
    assert r.top_logprobs == [[("4", -0.1), ("5", -2.5)]]
    with pytest.raises(BackendError, match="no choices") as ei:
        parse_chat_completion({"error": "x"}, "openai/x", 0.1)
    assert ei.value.retryable


def test_anthropic_structured_output_is_a_forced_tool_and_comes_back_as_json(monkeypatch):
    """Judges ask for a JSON schema; on the Anthropic API that is tool mode (one forced tool)."""
    from mascot_eval.backends.base import GenerationParams

    seen: list[dict] = []

    def reply(handler, body):
        seen.append(body)
        return (
            200,
            {
                "id": "m1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": "Scoring now."},
                    {"type": "tool_use", "id": "t1", "name": "answer", "input": {"rationale": "ok", "empathy": 4}},
                ],
                "usage": {"input_tokens": 12, "output_tokens": 9},
            },
            {},
        )

    srv = _serve(reply)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    schema = {"type": "object", "properties": {"rationale": {"type": "string"}, "empathy": {"type": "integer"}}}
    client = ModelClient(f"anthropic/claude-test@http://127.0.0.1:{srv.server_port}", ClientSettings(use_cache=False))

    async def go():
        try:
            return await client.chat(
                [{"role": "user", "content": "score it"}], GenerationParams(max_tokens=50, json_schema=schema)
            )
        finally:
            await client.aclose()

    try:
        r = asyncio.run(go())
    finally:
        srv.shutdown()
    assert seen[0]["tools"][0]["input_schema"] == schema
    assert seen[0]["tool_choice"] == {"type": "tool", "name": seen[0]["tools"][0]["name"]}
    assert r.finish_reason == "stop" and r.usage.completion_tokens == 9
    assert json.loads(r.text.splitlines()[-1]) == {"rationale": "ok", "empathy": 4}


def _messages_server(seen: list[str]):
    """An Anthropic-style server that answers only at /v1/messages (404 elsewhere, like the real API)."""

    def reply(handler, body):
        seen.append(handler.path)
        if handler.path != "/v1/messages":
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": f"no route {handler.path}"}}, {}
        return (
            200,
            {
                "id": "m1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "pong"}],
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
            {},
        )

    return _serve(reply)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
@pytest.mark.parametrize("where", ["env", "spec"])
def test_anthropic_base_url_with_or_without_v1(suffix, where, monkeypatch):
    """ANTHROPIC_BASE_URL (or anthropic/<model>@<url>) may be given as https://host or https://host/v1."""
    seen: list[str] = []
    srv = _messages_server(seen)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    base = f"http://127.0.0.1:{srv.server_port}{suffix}"
    if where == "env":
        monkeypatch.setenv("ANTHROPIC_BASE_URL", base)
        spec = "anthropic/claude-test"
    else:
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
        spec = f"anthropic/claude-test@{base}"
    try:
        _, r = _chat(spec)
    finally:
        srv.shutdown()
    assert r.text == "pong"
    assert seen == ["/v1/messages"]
