"""Gathering concurrent requests into batches for the in-process engines (transformers, vLLM)."""

from __future__ import annotations

import queue
import time
from typing import Any, TypeVar

J = TypeVar("J")


def next_batch(q: queue.Queue[J], window_s: float, max_batch: int | None = None, first_s: float | None = None) -> list[J]:
    """Block for the first job (at most ``first_s`` seconds when given: then ``[]`` when none came), then
    take whatever else arrives within ``window_s`` (up to ``max_batch``), and drop jobs whose callers gave
    up (``job.future`` cancelled)."""
    try:
        jobs = [q.get(timeout=first_s)] if first_s is not None else [q.get()]
    except queue.Empty:
        return []
    deadline = time.perf_counter() + window_s
    while max_batch is None or len(jobs) < max_batch:
        remaining = deadline - time.perf_counter()
        try:
            jobs.append(q.get(timeout=remaining) if remaining > 0 else q.get_nowait())
        except queue.Empty:
            break
    return [j for j in jobs if _future(j).set_running_or_notify_cancel()]


def _future(job: Any) -> Any:
    return job.future
