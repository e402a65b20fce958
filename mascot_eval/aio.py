"""The one way to run async work: concurrent coroutines with cancel-on-error, and a sync entry point."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_all(coros: Iterable[Coroutine[Any, Any, Any]]) -> None:
    """Run coroutines concurrently until all finish; on the first error (or a cancel/interrupt) cancel
    the others, wait for them to unwind, and re-raise. What already finished stays finished."""
    tasks = [asyncio.create_task(c) for c in coros]
    try:
        for fut in asyncio.as_completed(tasks):
            await fut
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


_RUNNERS = threading.local()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` from synchronous code and return its result.

    Every call of a thread runs on that thread's one event loop (an :class:`asyncio.Runner`), so
    model clients, which bind their limits and sessions to a loop, are shared by successive calls
    (the trainer makes many). Ctrl-C and SIGTERM cancel the running work, which unwinds and
    records what finished. The clients' HTTP sessions are closed after each call (they reopen on
    demand); local engines stay loaded."""
    from .backends.client import close_clients

    runner = getattr(_RUNNERS, "runner", None)
    if runner is None:
        runner = _RUNNERS.runner = asyncio.Runner()

    async def main() -> T:
        try:
            return await coro
        finally:
            await close_clients()

    try:
        return runner.run(main())
    except BaseException:
        # an interrupted or failed run may leave tasks behind: close the loop (cancelling them) so the
        # next call starts clean
        _RUNNERS.runner = None
        runner.close()
        raise
