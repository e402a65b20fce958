"""One event loop for the trainer's model calls.

Model clients are shared per process and bind their limits to the loop that first uses them, so the
trainer runs every coroutine (sampling, judging, reward calls from inside trl) on the same loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_LOOP: asyncio.AbstractEventLoop | None = None


def run(coro: Coroutine[Any, Any, T]) -> T:
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP.run_until_complete(coro)
