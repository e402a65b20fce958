"""Rate limits (requests and tokens per minute) and retry back-off with jitter."""

from __future__ import annotations

import asyncio
import random
import time


class TokenBucket:
    """``rate_per_minute`` units refill continuously; ``acquire(n)`` waits until n units are free.

    A request larger than the whole bucket is let through once the bucket is full (it could
    never fit otherwise).
    """

    def __init__(self, rate_per_minute: float) -> None:
        if rate_per_minute <= 0:
            raise ValueError("rate must be positive")
        self.capacity = float(rate_per_minute)
        self.rate = rate_per_minute / 60.0
        self.level = self.capacity
        self.updated = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    async def acquire(self, amount: float = 1.0) -> float:
        """Take ``amount`` units; returns the seconds waited."""
        need = min(float(amount), self.capacity)
        waited = 0.0
        async with self._lock:
            while True:
                self._refill()
                if self.level >= need:
                    self.level -= float(amount) if amount <= self.capacity else self.level
                    return waited
                delay = (need - self.level) / self.rate
                waited += delay
                await asyncio.sleep(delay)


def backoff_delay(attempt: int, *, base: float, cap: float, retry_after: float | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): exponential with jitter, or Retry-After.

    A server's Retry-After is honoured (plus up to 10% jitter so many callers do not return at
    the same instant); otherwise ``base * 2**attempt`` capped at ``cap``, drawn from
    [50%, 100%] of that value ("equal jitter").
    """
    if retry_after is not None and retry_after >= 0:
        return retry_after * (1.0 + 0.1 * random.random())
    ceiling = min(cap, base * (2**attempt))
    return ceiling * (0.5 + 0.5 * random.random())


def estimate_tokens(messages: list[dict[str, str]], max_tokens: int) -> int:
    """Rough token count for the tokens-per-minute limit: ~4 characters a token, plus the reply budget."""
    chars = sum(len(m.get("content", "")) for m in messages)
    return chars // 4 + len(messages) * 4 + max_tokens
