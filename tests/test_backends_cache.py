"""Response cache: key contents, sample indices, zero-call reruns, two writer processes, corruption."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import sqlite3

import pytest

from mascot_eval.backends import usage
from mascot_eval.backends.base import ChatResponse, GenerationParams, Usage
from mascot_eval.backends.cache import FILENAME, ResponseCache, cache_key
from mascot_eval.backends.client import ClientSettings, ModelClient
from tests import fakes

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


@pytest.fixture(autouse=True)
def _clean_ledger():
    usage.LEDGER.reset()
    yield
    usage.LEDGER.reset()


def _run(client: ModelClient, n: int, params: GenerationParams | None = None) -> list[ChatResponse]:
    async def go():
        return await asyncio.gather(
            *(client.chat([{"role": "user", "content": f"question {i}"}], params, tag="t") for i in range(n))
        )

    return asyncio.run(go())


def test_key_ignores_retry_concurrency_and_tags(fake_model, tmp_path):
    spec = fake_model("keys", fakes.default_responder)
    a = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path)))
    b = ModelClient(
        spec,
        ClientSettings(
            cache_dir=str(tmp_path),
            max_connections=1,
            max_retries=0,
            timeout_s=5,
            requests_per_minute=1000,
            tokens_per_minute=10**6,
            backoff_base_s=0.1,
            fail_on_error=0.5,
        ),
    )
    assert a.key(MSGS, GenerationParams()) == b.key(MSGS, GenerationParams())
    first = asyncio.run(a.chat(MSGS, tag="system:x"))
    second = asyncio.run(b.chat(MSGS, tag="judge:y"))
    assert b.calls == 0 and second.cached and second.text == first.text
    assert len(fakes.CALLS["keys"]) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"max_tokens": 10},
        {"temperature": 0.7},
        {"top_p": 0.9},
        {"seed": 1},
        {"stop": ("\n",)},
        {"sample_index": 1},
        {"logprobs": True},
        {"top_logprobs": 5},
        {"json_schema": {"type": "object"}},
    ],
)
def test_key_changes_with_every_decoding_parameter(change):
    ident = {"kind": "fake", "model": "m", "endpoint": None}
    base = cache_key(ident, MSGS, GenerationParams())
    assert cache_key(ident, MSGS, GenerationParams(**change)) != base


def test_key_changes_with_identity_and_messages():
    ident = {"kind": "fake", "model": "m", "endpoint": None}
    base = cache_key(ident, MSGS, GenerationParams())
    assert cache_key({**ident, "model": "n"}, MSGS, GenerationParams()) != base
    assert cache_key({**ident, "endpoint": "http://x/v1"}, MSGS, GenerationParams()) != base
    assert cache_key(ident, [*MSGS[:1], {"role": "user", "content": "hello!"}], GenerationParams()) != base
    assert cache_key(ident, list(reversed(MSGS)), GenerationParams()) != base


def test_sample_index_gives_k_distinct_reproducible_samples(fake_model, tmp_path):
    spec = fake_model("samples", fakes.default_responder)
    settings = ClientSettings(cache_dir=str(tmp_path))

    async def k_samples(client, k):
        return [await client.chat(MSGS, GenerationParams(temperature=1.0, sample_index=i)) for i in range(k)]

    first = asyncio.run(k_samples(ModelClient(spec, settings), 4))
    assert len({r.text for r in first}) == 4  # k samples stay k distinct samples
    assert len(fakes.CALLS["samples"]) == 4
    again = ModelClient(spec, settings)
    rerun = asyncio.run(k_samples(again, 4))
    assert [r.text for r in rerun] == [r.text for r in first]  # reruns reproduce them
    assert again.calls == 0 and all(r.cached for r in rerun)
    more = asyncio.run(k_samples(again, 6))
    assert again.calls == 2 and [r.cached for r in more] == [True] * 4 + [False] * 2


def test_second_identical_run_makes_zero_model_calls(fake_model, tmp_path):
    spec = fake_model("rerun", fakes.default_responder)
    settings = ClientSettings(cache_dir=str(tmp_path), max_connections=4)
    first = _run(ModelClient(spec, settings), 25)
    assert len(fakes.CALLS["rerun"]) == 25
    client = ModelClient(spec, settings)
    second = _run(client, 25)
    assert client.calls == 0 and len(fakes.CALLS["rerun"]) == 25
    assert [r.text for r in second] == [r.text for r in first]
    assert all(r.cached and r.cost_usd == 0 and r.retries == 0 for r in second)
    snap = usage.LEDGER.snapshot()["by_spec"][spec]
    assert snap["calls"] == 50 and snap["cached"] == 25
    assert ResponseCache(tmp_path).stats()["rows"] == 25


def test_no_cache_reads_and_writes_nothing(fake_model, tmp_path):
    spec = fake_model("nocache", fakes.default_responder)
    settings = ClientSettings(cache_dir=str(tmp_path), use_cache=False)
    _run(ModelClient(spec, settings), 3)
    _run(ModelClient(spec, settings), 3)
    assert len(fakes.CALLS["nocache"]) == 6
    assert not (tmp_path / FILENAME).exists()


def test_concurrent_identical_requests_share_one_call(fake_model, tmp_path):
    spec = fake_model("dedupe", fakes.default_responder)
    client = ModelClient(spec, ClientSettings(cache_dir=str(tmp_path)))

    async def go():
        return await asyncio.gather(*(client.chat(MSGS) for _ in range(10)))

    out = asyncio.run(go())
    assert client.calls == 1 and len({r.text for r in out}) == 1
    assert sum(not r.cached for r in out) == 1


def _writer(cache_dir: str, start: int, n: int, barrier) -> None:
    """Child process: n chats through a real client (keys start..start+n), each row committed at once."""
    from tests import fakes as child_fakes  # registers fake/ in the child

    barrier.wait()  # both processes write at the same time (however long the other takes to start)
    client = ModelClient("fake/mp", ClientSettings(cache_dir=cache_dir, max_connections=4))

    async def go():
        await asyncio.gather(*(client.chat([{"role": "user", "content": f"q{i}"}]) for i in range(start, start + n)))

    asyncio.run(go())
    assert len(child_fakes.CALLS["mp"]) <= n


@pytest.mark.slow
def test_two_processes_writing_one_cache_lose_nothing(tmp_path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    # overlapping ranges: 0..299 and 150..449 -> 450 distinct keys, 150 written by both
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s, 300, barrier)) for s in (0, 150)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(600)  # a guard against a hang, far beyond any machine's start-up time
    assert [p.exitcode for p in procs] == [0, 0]
    assert not list(tmp_path.glob("*corrupt*"))  # a busy first open is not corruption: nothing moved aside
    cache = ResponseCache(tmp_path)
    assert cache.stats()["rows"] == 450
    conn = sqlite3.connect(tmp_path / FILENAME)
    assert conn.execute("SELECT COUNT(DISTINCT key) FROM responses").fetchone()[0] == 450
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    ident = {"kind": "fake", "model": "mp", "endpoint": None}
    for i in (0, 149, 150, 299, 300, 449):
        hit = cache.get(cache_key(ident, [{"role": "user", "content": f"q{i}"}], GenerationParams()))
        assert hit is not None and hit.text.endswith(f"q{i}")


def _resp(text: str = "ok") -> ChatResponse:
    return ChatResponse(text=text, finish_reason="stop", usage=Usage(3, 1), latency_s=0.1, model="fake/x")


def test_put_is_insert_once_and_round_trips(tmp_path):
    c = ResponseCache(tmp_path)
    r = _resp()
    r.top_logprobs = [[("a", -0.1), ("b", -2.0)]]
    assert c.put("k1", "fake/x", r) is True
    assert c.put("k1", "fake/x", _resp("other")) is False  # one key is stored once
    got = c.get("k1")
    assert got.text == "ok" and got.top_logprobs == [[("a", -0.1), ("b", -2.0)]] and got.usage.prompt_tokens == 3
    assert c.stats()["rows"] == 1


def test_garbage_cache_file_is_reported_and_moved_aside(tmp_path, capsys):
    (tmp_path / FILENAME).write_bytes(b"this is not a database " * 200)
    c = ResponseCache(tmp_path)
    assert c.get("k") is None  # opens a fresh cache
    assert c.moved_aside is not None and c.moved_aside.name.startswith(FILENAME + ".corrupt-")
    assert c.moved_aside.read_bytes().startswith(b"this is not a database")
    err = capsys.readouterr().err
    assert "unreadable" in err and str(c.moved_aside) in err
    assert c.put("k", "fake/x", _resp()) and c.get("k").text == "ok"


def test_damaged_pages_are_detected_not_reused(tmp_path, capsys):
    c = ResponseCache(tmp_path)
    for i in range(300):
        c.put(f"k{i}", "fake/x", _resp("x" * 200))
    c.close()
    path = tmp_path / FILENAME
    with sqlite3.connect(path) as conn:  # fold the WAL into the main file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    assert len(data) > 8 * 4096
    for off in range(2 * 4096, 6 * 4096):  # smash b-tree pages after the header page
        data[off] = 0xA5
    path.write_bytes(bytes(data))
    fresh = ResponseCache(tmp_path)
    assert fresh.get("k1") is None
    assert fresh.moved_aside is not None
    assert "moved it to" in capsys.readouterr().err
    assert fresh.stats()["rows"] == 0
