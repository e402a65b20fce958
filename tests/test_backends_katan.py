"""End to end against real llm-katan servers on 127.0.0.1, through the official openai/anthropic SDKs.

(a) llm-katan serving the embedded SmolLM2 (safetensors folder) over the OpenAI and Anthropic APIs;
(b) llm-katan's echo backend with fault injection (500s, 429s, 504s, latency, key validation).
Each test module starts and stops its own servers (tests/katan.py).
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from mascot_eval.backends import usage
from mascot_eval.backends.base import BackendError, GenerationParams
from mascot_eval.backends.cache import FILENAME, ResponseCache
from mascot_eval.backends.client import ClientSettings, ModelClient
from mascot_eval.backends.usage import TooManyFailures
from tests.katan import katan_server

pytestmark = pytest.mark.katan

OPENAI_KEY = "sk-katan-openai-RIGHT-0123456789"
ANTHROPIC_KEY = "sk-ant-katan-RIGHT-0123456789"
FAST = dict(backoff_base_s=0.01, backoff_max_s=0.05)


@pytest.fixture(autouse=True)
def _clean_ledger():
    usage.LEDGER.reset()
    yield
    usage.LEDGER.reset()


def _ask(client: ModelClient, texts: list[str], params: GenerationParams | None = None):
    """Send all texts concurrently; return (responses or exceptions) in order."""

    async def go():
        try:
            return await asyncio.gather(
                *(client.chat([{"role": "user", "content": t}], params) for t in texts), return_exceptions=True
            )
        finally:
            await client.aclose()

    return asyncio.run(go())


def _cache_bytes(folder) -> bytes:
    return b"".join(p.read_bytes() for p in folder.glob(FILENAME + "*"))


# -- (a) the embedded model served by llm-katan -----------------------------------------------------


@pytest.fixture(scope="module")
def smol_server():
    from mascot_eval.backends.modeldir import embedded_model_dir

    model = str(embedded_model_dir())
    with katan_server(
        "--device",
        "cpu",
        "--no-quantize",
        "--validate-keys",
        "--api-keys",
        f"openai={OPENAI_KEY},anthropic={ANTHROPIC_KEY}",
        model=model,
        backend="transformers",
        providers="openai,anthropic",
        served_name="smollm2",
    ) as srv:
        yield srv


QUESTIONS = ["Name one colour of the sky.", "Say hello to Ana in one short sentence."]
GREEDY = GenerationParams(max_tokens=12, temperature=0.0)


@pytest.mark.slow
def test_openai_sdk_against_served_embedded_model(smol_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", OPENAI_KEY)
    spec = f"openai-compatible/smollm2@{smol_server.v1}"
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), max_connections=2))
    out = _ask(client, QUESTIONS, GREEDY)
    for r in out:
        assert not isinstance(r, Exception), r
        assert r.text.strip() and r.usage.prompt_tokens > 5 and 0 < r.usage.completion_tokens <= 13
        assert r.model == spec and not r.cached and r.latency_s > 0
    assert client.calls == 2 and smol_server.successes() == 2

    # the same greedy answers as the embedded model in this process (same weights, same template)
    local = _ask(ModelClient("embedded", ClientSettings(use_cache=False)), QUESTIONS, GREEDY)
    assert [r.text.strip() for r in out] == [r.text.strip() for r in local]

    # a second identical run makes zero model calls
    again = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path)))
    rerun = _ask(again, QUESTIONS, GREEDY)
    assert again.calls == 0 and [r.text for r in rerun] == [r.text for r in out]
    assert smol_server.successes() == 2
    assert OPENAI_KEY.encode() not in _cache_bytes(tmp_path)  # keys never enter cache rows


@pytest.mark.slow
def test_anthropic_sdk_against_served_embedded_model(smol_server, tmp_path, monkeypatch):
    # llm-katan checks x-api-key (Anthropic's documented header); the SDK itself sends a Bearer token.
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    spec = f"anthropic/smollm2@{smol_server.url}"
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path)))
    msgs = [
        {"role": "system", "content": "You answer in one short sentence."},
        {"role": "user", "content": QUESTIONS[0]},
    ]

    async def go():
        try:
            return await client.chat(msgs, GREEDY, tag="judge:claude")
        finally:
            await client.aclose()

    r = asyncio.run(go())
    assert r.text.strip() and r.finish_reason in ("stop", "length") and r.usage.prompt_tokens > 5
    assert usage.LEDGER.snapshot()["by_tag"]["judge:claude"]["calls"] == 1
    assert ANTHROPIC_KEY.encode() not in _cache_bytes(tmp_path)

    # a wrong key: 401 at once, not retried, the key scrubbed from the message, nothing cached
    wrong = "sk-ant-WRONG-abcdefghijkl"
    monkeypatch.setenv("ANTHROPIC_API_KEY", wrong)
    bad = ModelClient(spec, ClientSettings(use_cache=False, max_retries=5, **FAST))
    (err,) = _ask(bad, ["hello"], GREEDY)
    assert isinstance(err, BackendError) and err.status == 401
    assert bad.calls == 1 and "not retried" in str(err) and "ANTHROPIC_API_KEY" in str(err)
    assert wrong not in str(err)


# -- (b) echo backend with fault injection --------------------------------------------------------


@pytest.fixture(scope="module")
def flaky_server():
    with katan_server(
        "--error-rate", "0.3", "--max-concurrent", "16", "--validate-keys", "--api-keys", f"openai={OPENAI_KEY}"
    ) as srv:
        yield srv


def test_error_rate_every_request_succeeds_retries_counted_no_duplicates(flaky_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", OPENAI_KEY)
    spec = f"openai-compatible/echo@{flaky_server.v1}"
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), max_connections=8, max_retries=10, **FAST))
    before = flaky_server.successes()
    texts = [f"request {i}" for i in range(40)] + [f"request {i}" for i in range(5)]  # 5 asked twice at once
    out = _ask(client, texts)
    assert all(not isinstance(r, Exception) for r in out), [r for r in out if isinstance(r, Exception)]
    assert all(r.text.endswith(f"User: {t}") for r, t in zip(out, texts))
    retries = sum(r.retries for r in out)
    assert retries > 0  # 30% of attempts fail: retries happened and were counted
    assert client.calls == 40 + retries  # attempts = one per distinct request + its retries
    assert usage.LEDGER.total().retries == retries
    assert flaky_server.successes() - before == 40  # the server answered each request once
    conn = sqlite3.connect(tmp_path / FILENAME)
    rows, distinct = conn.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM responses").fetchone()
    conn.close()
    assert rows == distinct == 40


def test_401_is_not_retried_and_key_never_shown(flaky_server, tmp_path, monkeypatch):
    wrong = "sk-wrong-key-0123456789abcdef"
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", wrong)
    client = ModelClient(
        f"openai-compatible/echo@{flaky_server.v1}", ClientSettings(cache_dir=str(tmp_path), max_retries=6, **FAST)
    )
    (err,) = _ask(client, ["hello"])
    assert isinstance(err, BackendError) and err.status == 401 and not err.retryable
    assert client.calls == 1
    msg = str(err)
    assert "HTTP 401" in msg and "not retried" in msg and "OPENAI_COMPATIBLE_API_KEY" in msg
    assert wrong not in msg and "***" in msg  # llm-katan echoes the key it got; we scrub it
    assert usage.LEDGER.total().failures == 1
    assert ResponseCache(tmp_path).stats()["rows"] == 0


def test_rate_limit_failures_are_reported_with_cause_and_fail_on_error_stops(tmp_path):
    with katan_server("--rate-limit-after", "10") as srv:
        spec = f"openai-compatible/echo@{srv.v1}"
        client = ModelClient(
            spec, ClientSettings(cache_dir=str(tmp_path), max_connections=1, max_retries=1, fail_on_error=0.25, **FAST)
        )
        results: list[object] = []

        async def go():
            try:
                for i in range(30):
                    try:
                        results.append(await client.chat([{"role": "user", "content": f"q{i}"}]))
                    except TooManyFailures:
                        raise
                    except BackendError as exc:
                        results.append(exc)
            finally:
                await client.aclose()

        with pytest.raises(TooManyFailures, match=r"4 of 14 model calls failed"):
            asyncio.run(go())
    ok = [r for r in results if not isinstance(r, Exception)]
    failed = [r for r in results if isinstance(r, BackendError)]
    assert len(ok) == 10 and len(failed) == 4  # 4/14 > 25 %: the run stops before call 15
    for e in failed:
        assert e.status == 429 and "rate limit exceeded" in str(e) and "gave up after 1 retries" in str(e)
    assert client.calls == 10 + 4 * 2
    t = usage.LEDGER.total()
    assert (t.calls, t.failures, t.retries) == (14, 4, 4)
    assert ResponseCache(tmp_path).stats()["rows"] == 10  # finished work is kept


def test_timeouts_and_504s_are_retried_then_reported(tmp_path):
    # the first two requests never get an answer (10 min latency, the server is killed long before), so
    # the client's 1 s timeout is what ends them on an idle or a saturated machine; the third gets a 504
    with katan_server("--latency-ms", "600000", "--timeout-after", "2", "--max-concurrent", "4") as srv:
        client = ModelClient(
            f"openai-compatible/echo@{srv.v1}",
            ClientSettings(cache_dir=str(tmp_path), max_connections=1, max_retries=1, timeout_s=1.0, **FAST),
        )

        async def go():
            out = []
            try:
                for q in ("slow", "then 504"):
                    try:
                        out.append(await client.chat([{"role": "user", "content": q}]))
                    except BackendError as exc:
                        out.append(exc)
            finally:
                await client.aclose()
            return out

        slow, gateway = asyncio.run(go())
    assert isinstance(slow, BackendError) and "timed out after 1 s (gave up after 1 retries)" in str(slow)
    assert isinstance(gateway, BackendError) and gateway.status == 504
    assert "upstream request timeout (gave up after 1 retries)" in str(gateway)
    assert client.calls == 4 and usage.LEDGER.total().retries == 2


def test_katan_tool_quirk(tmp_path, monkeypatch):
    """llm-katan answers a request with tools by calling the first tool with placeholder arguments,
    unless `--no-auto-tool-providers <provider>` is passed (tests/katan.py passes it by default).
    Our Anthropic backend sends structured output as a forced tool, so this decides what it gets."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer"}, "why": {"type": "string"}},
        "required": ["score", "why"],
    }
    params = GenerationParams(max_tokens=16, temperature=0.0, json_schema=schema)
    texts = {}
    for auto in (False, True):
        with katan_server(providers="anthropic", auto_tools=auto) as srv:
            client = ModelClient(f"anthropic/echo@{srv.url}", ClientSettings(use_cache=False))
            (r,) = _ask(client, ["rate this"], params)
            assert not isinstance(r, Exception), r
            texts[auto] = r.text
    assert "{" not in texts[False] and "rate this" in texts[False]  # the model's (echoed) text, no tool call
    placeholder = __import__("json").loads(texts[True].splitlines()[-1])  # the tool input, after the text
    assert set(placeholder) == {"score", "why"} and "rate this" not in str(placeholder)
