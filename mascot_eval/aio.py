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
        # an interrupted or failed run may leave tasks behind: cancel them and let them unwind (their
        # cleanup records what finished), then close the loop, so the next call starts clean
        _RUNNERS.runner = None
        _drain(runner)
        raise


def _drain(runner: asyncio.Runner) -> None:
    loop = runner.get_loop()
    pending = {t for t in asyncio.all_tasks(loop) if not t.done()}
    for _ in range(10):  # a task may raise KeyboardInterrupt again while it unwinds: go on until all are done
        if not pending:
            break
        for t in pending:
            t.cancel()
        try:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except BaseException:  # noqa: BLE001 - keep unwinding the others
            pass
        pending = {t for t in pending if not t.done()}
    try:
        runner.close()
    except BaseException:  # noqa: BLE001 - the loop is closed either way
        pass
