"""Small asyncio helpers shared by the judging and comparison runners."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable
from typing import Any


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
