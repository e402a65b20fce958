"""How generate() schedules work: dialogues admitted beyond the connections (so a free connection
never waits for a dialogue between calls) and transcripts written off the event loop. Assertions
are on event order and threads, never on timings."""

from __future__ import annotations

import asyncio
import threading

from mascot_eval.backends.base import BACKENDS
from mascot_eval.backends.client import ClientSettings
from mascot_eval.runs.rundir import RunDir
from mascot_eval.systems import generate as gen
from tests.fakes import FakeBackend
from tests.test_engine import responder
from tests.test_generate import pairs, task


class _Counting(FakeBackend):
    """`counting/<name>`: the scripted fake, yielding to the event loop inside every call and
    counting the calls in flight."""

    in_flight = 0
    max_in_flight = 0

    async def generate(self, request):  # type: ignore[no-untyped-def]
        cls = type(self)
        cls.in_flight += 1
        cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            return await super().generate(request)
        finally:
            cls.in_flight -= 1


if "counting" not in BACKENDS:
    BACKENDS.add("counting", _Counting)


def test_dialogues_are_admitted_beyond_the_connections_and_calls_stay_capped(tmp_path, tmp_cache, monkeypatch):
    events: list[str] = []
    real = gen.run_dialogue

    async def traced(*args, **kwargs):  # type: ignore[no-untyped-def]
        events.append("start")
        try:
            return await real(*args, **kwargs)
        finally:
            events.append("end")

    monkeypatch.setattr(gen, "run_dialogue", traced)
    _Counting.max_in_flight = 0
    settings = ClientSettings(max_connections=2, cache_dir=str(tmp_path / "cache"))
    rd = RunDir(tmp_path / "run", create=True)
    res = gen.generate(rd, [task(2)], ["zero-shot"], model="counting/c", pairs=pairs(10), settings=settings, progress=False)
    assert (res.new, res.failed) == (10, 0)
    # twice the connections are in a dialogue before the first dialogue ends ...
    assert events[: events.index("end")].count("start") == 4
    # ... but never more calls in flight than connections
    assert _Counting.max_in_flight == 2


def test_transcripts_are_written_by_one_writer_thread(tmp_path, fake_model, tmp_cache, monkeypatch):
    threads: list[str] = []
    real = RunDir.append_transcript

    def spy(self, t):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        real(self, t)

    monkeypatch.setattr(RunDir, "append_transcript", spy)
    rd = RunDir(tmp_path / "run", create=True)
    res = gen.generate(rd, [task()], ["zero-shot"], model=fake_model("w", responder()), pairs=pairs(5), progress=False)
    assert res.new == 5 and len(rd.transcripts()) == 5 and rd.read_manifest()["steps"]["generate"]["counts"]["new"] == 5
    assert len(threads) == 5 and len(set(threads)) == 1 and threads[0].startswith("transcripts")
