"""Model client: usage and cost roll-ups, --cost-limit, --fail-on-error, retries, API key handling."""

from __future__ import annotations

import asyncio
import math

import pytest

from mascot_eval.backends import prices, usage
from mascot_eval.backends.base import BackendError, GenerationParams
from mascot_eval.backends.client import ClientSettings, ModelClient
from mascot_eval.backends.limits import TokenBucket, backoff_delay
from mascot_eval.backends.usage import CostLimitReached, RunStopped, TooManyFailures
from mascot_eval.errors import UserError
from tests import fakes

FAST = dict(backoff_base_s=0.001, backoff_max_s=0.01)


@pytest.fixture(autouse=True)
def _clean_ledger():
    usage.LEDGER.reset()
    yield
    usage.LEDGER.reset()


@pytest.fixture
def price_file(tmp_path, monkeypatch):
    path = tmp_path / "prices.yaml"
    path.write_text(
        "currency: USD\nper: 1000000\nmodels:\n"
        "  fake/priced: {input: 1000, output: 2000}\n"
        '  "fake/pat*": {input: 10, output: 20}\n'
        '  "fake/*": {input: 0, output: 0}\n'
    )
    monkeypatch.setattr(prices, "prices_path", lambda: path)
    return path


def _msgs(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"one two three {i}"}]  # 4 prompt tokens for the fake backend


def test_price_lookup(price_file):
    t = prices.price_table()
    assert t.lookup("fake/priced").input == 1000
    assert t.lookup("fake/pattern-x").input == 10  # longest matching pattern wins
    assert t.lookup("fake/other").input == 0
    assert t.lookup("fake/priced#lora=/a").input == 1000  # adapters cost their base
    assert t.lookup("openai/unknown") is None
    assert t.cost("fake/priced", 1_000_000, 0) == pytest.approx(1000)


def test_usage_and_cost_roll_up_per_tag_spec_and_run(fake_model, price_file, tmp_path):
    spec = fake_model("priced", lambda r: "a b c")  # 3 completion tokens
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path)))

    async def go():
        for i in range(3):
            await client.chat(_msgs(i), tag="system:mascot")
        for i in range(2):
            await client.chat(_msgs(100 + i), tag="judge:gpt")
        await client.chat(_msgs(0), tag="judge:gpt")  # cache hit: no tokens, no dollars

    asyncio.run(go())
    one_call = (4 * 1000 + 3 * 2000) / 1_000_000
    snap = usage.LEDGER.snapshot()
    sysm, jud = snap["by_tag"]["system:mascot"], snap["by_tag"]["judge:gpt"]
    assert (sysm["calls"], sysm["cached"], sysm["prompt_tokens"], sysm["completion_tokens"]) == (3, 0, 12, 9)
    assert sysm["cost_usd"] == pytest.approx(3 * one_call)
    assert (jud["calls"], jud["cached"], jud["prompt_tokens"]) == (3, 1, 8)
    assert jud["cost_usd"] == pytest.approx(2 * one_call)
    total = snap["total"]
    assert total["calls"] == 6 and total["cost_usd"] == pytest.approx(5 * one_call)
    assert snap["by_spec"][spec]["cost_usd"] == pytest.approx(5 * one_call)


def test_cost_limit_stops_cleanly_and_keeps_finished_work(fake_model, price_file, tmp_path):
    spec = fake_model("priced", lambda r: "a b c")
    one_call = (4 * 1000 + 3 * 2000) / 1_000_000  # $0.01
    limit = 0.035
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), cost_limit=limit))
    done = []

    async def go():
        for i in range(20):
            done.append((await client.chat(_msgs(i))).text)

    with pytest.raises(CostLimitReached) as ei:
        asyncio.run(go())
    assert len(done) == math.ceil(limit / one_call) == 4  # calls start while spent < limit
    assert isinstance(ei.value, RunStopped) and ei.value.exit_code == 3
    assert "--cost-limit" in str(ei.value) and "finished work is saved" in str(ei.value)
    # finished calls are in the cache: a rerun with a higher limit pays only for new ones
    usage.LEDGER.reset()
    again = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), cost_limit=1.0))

    async def rerun():
        return [await again.chat(_msgs(i)) for i in range(6)]

    out = asyncio.run(rerun())
    assert [r.cached for r in out] == [True] * 4 + [False] * 2 and again.calls == 2


def test_cost_limit_needs_a_price(price_file):
    with pytest.raises(UserError, match="no price for model 'anthropic/claude-unknown'"):
        prices.call_cost("anthropic/claude-unknown", 1, 1, cost_limit=1.0)
    assert prices.call_cost("anthropic/claude-unknown", 1, 1, cost_limit=None) == 0.0


def test_retryable_errors_are_retried_and_counted(fake_model, tmp_path):
    attempts = {}

    def flaky(req):
        n = attempts[req.messages[-1]["content"]] = attempts.get(req.messages[-1]["content"], 0) + 1
        if n <= 2:
            raise BackendError("HTTP 503 overloaded", retryable=True, status=503)
        return "fine"

    spec = fake_model("flaky", flaky)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), max_retries=3, **FAST))
    r = asyncio.run(client.chat(_msgs(1)))
    assert r.text == "fine" and r.retries == 2 and client.calls == 3
    assert usage.LEDGER.total().retries == 2 and usage.LEDGER.total().failures == 0


def test_gives_up_with_cause_and_retry_count(fake_model, tmp_path):
    def down(req):
        raise BackendError("server exploded", retryable=True, status=500)

    spec = fake_model("down", down)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), max_retries=2, **FAST))
    with pytest.raises(BackendError) as ei:
        asyncio.run(client.chat(_msgs(1)))
    assert str(ei.value) == f"{spec}: HTTP 500: server exploded (gave up after 2 retries)"
    assert client.calls == 3
    t = usage.LEDGER.total()
    assert (t.failures, t.retries) == (1, 2)
    assert ResponseCacheRows(tmp_path) == 0  # failures are not cached


def ResponseCacheRows(path) -> int:  # noqa: N802 - reads like a value
    from mascot_eval.backends.cache import FILENAME, ResponseCache

    return ResponseCache(path).stats()["rows"] if (path / FILENAME).exists() else 0


def test_client_errors_are_not_retried(fake_model, tmp_path):
    def bad(req):
        raise BackendError("bad request", retryable=False, status=400)

    spec = fake_model("bad", bad)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), max_retries=5, **FAST))
    with pytest.raises(BackendError, match=r"HTTP 400: bad request \(not retried\)"):
        asyncio.run(client.chat(_msgs(1)))
    assert client.calls == 1


def test_fail_on_error_stops_the_run(fake_model, tmp_path):
    def half(req):
        if int(req.messages[-1]["content"].split()[-1]) % 2:
            raise BackendError("boom", retryable=False, status=500)
        return "ok"

    spec = fake_model("half", half)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), max_retries=0, fail_on_error=0.3, **FAST))
    outcomes = []

    async def go():
        for i in range(40):
            try:
                await client.chat(_msgs(i))
                outcomes.append("ok")
            except TooManyFailures:
                raise
            except BackendError:
                outcomes.append("failed")

    with pytest.raises(TooManyFailures, match=r"5 of 10 model calls failed \(50% > --fail-on-error 30%\)"):
        asyncio.run(go())
    assert len(outcomes) == 10  # MIN_CALLS_FOR_FAILURE_SHARE finished calls, then it stops
    assert ResponseCacheRows(tmp_path) == 5


def test_fail_on_error_zero_stops_at_first_failure(fake_model, tmp_path):
    def bad(req):
        raise BackendError("nope", retryable=False, status=500)

    spec = fake_model("zero", bad)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), max_retries=0, fail_on_error=0.0))
    with pytest.raises(BackendError):
        asyncio.run(client.chat(_msgs(1)))
    with pytest.raises(TooManyFailures):
        asyncio.run(client.chat(_msgs(2)))
    assert client.calls == 1


@pytest.mark.parametrize(
    "spec, var",
    [("openai/gpt-4o", "OPENAI_API_KEY"), ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY")],
)
def test_missing_api_key_names_the_variable(spec, var, monkeypatch, tmp_path):
    monkeypatch.delenv(var, raising=False)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path)))
    ok, why = client.backend.available()
    assert not ok and var in why
    with pytest.raises(UserError) as ei:
        asyncio.run(client.chat(_msgs(1)))
    assert f"{var} is not set" in str(ei.value) and f"export {var}=" in str(ei.value)


def test_redact_scrubs_keys():
    from mascot_eval.backends.http import redact

    key = "sk-proj-ABCDEF1234567890"
    assert key not in redact(f"invalid key {key} given", key)
    assert "sk-ant-api03-zzzzzzzz" not in redact("got 'sk-ant-api03-zzzzzzzz'", None)
    assert redact("custom-key-value here", "custom-key-value") == "*** here"


def test_backoff_and_retry_after(monkeypatch):
    for attempt in range(6):
        d = backoff_delay(attempt, base=1.0, cap=8.0)
        assert min(8.0, 2**attempt) * 0.5 <= d <= min(8.0, 2**attempt)
    assert 3.0 <= backoff_delay(0, base=1.0, cap=8.0, retry_after=3.0) <= 3.3
    from mascot_eval.backends.http import retry_after_seconds

    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    import types
    from email.utils import formatdate

    now = 1_800_000_000.0  # a scripted clock: the HTTP date is exactly 10 s ahead
    monkeypatch.setattr("mascot_eval.backends.http.time", types.SimpleNamespace(time=lambda: now))
    assert retry_after_seconds({"retry-after": formatdate(now + 10, usegmt=True)}) == 10.0
    assert retry_after_seconds({"retry-after": "soon"}) is None


def test_token_bucket_rate(monkeypatch):
    """On a scripted clock: the bucket asks to sleep exactly as long as the rate requires."""
    import types

    from mascot_eval.backends import limits

    clock = [0.0]  # binary fractions only (8 per second: 0.125 s a unit), so the arithmetic is exact
    slept: list[float] = []

    async def sleep(seconds):
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(limits, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(limits, "asyncio", types.SimpleNamespace(sleep=sleep, Lock=asyncio.Lock))

    async def go():
        b = TokenBucket(480)  # 8 per second, bucket of 480
        b.level = 0
        waits = [await b.acquire(1) for _ in range(3)]
        clock[0] += 60.0  # a minute later the bucket is full again: no wait, even for 480 at once
        waits.append(await b.acquire(480))
        waits.append(await b.acquire(960))  # larger than the bucket: let through once it is full
        return waits, b.level

    waits, level = asyncio.run(go())
    assert slept == [0.125, 0.125, 0.125, 60.0]
    assert waits == [0.125, 0.125, 0.125, 0.0, 60.0] and level == 0


def test_settings_validation():
    with pytest.raises(UserError, match="max-connections"):
        ClientSettings(max_connections=0)
    with pytest.raises(UserError, match="fail-on-error"):
        ClientSettings(fail_on_error=1.5)
    with pytest.raises(UserError, match="cost-limit"):
        ClientSettings(cost_limit=-1)


def test_bad_messages_are_rejected(fake_model, tmp_path):
    client = ModelClient(fake_model("m", fakes.default_responder), ClientSettings(cache_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="non-empty"):
        asyncio.run(client.chat([]))
    with pytest.raises(ValueError, match="bad message"):
        asyncio.run(client.chat([{"role": "robot", "content": "x"}], GenerationParams()))


def test_a_cancel_that_meets_a_finishing_call_is_not_swallowed(fake_model, tmp_path):
    """Ctrl-C / SIGTERM cancel the running calls; one whose answer lands in the same instant must still
    end cancelled (Python 3.11's wait_for returned the answer and dropped the cancel, so a stopped run
    went on with that dialogue and could hang)."""
    caller: list[asyncio.Task] = []

    def answer_while_cancelled(req):
        caller[0].cancel()  # the interrupt arrives while this call is completing
        return "an answer"

    spec = fake_model("cancel-race", answer_while_cancelled)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path), **FAST))

    async def dialogue() -> str:
        caller.append(asyncio.current_task())
        await client.chat(_msgs(1))
        await asyncio.sleep(0)  # the dialogue's next step: the cancel must be delivered by now
        return "went on after the cancel"

    async def main() -> str:
        task = asyncio.create_task(dialogue())
        try:
            return await task
        except asyncio.CancelledError:
            return "cancelled"

    assert asyncio.run(main()) == "cancelled"
