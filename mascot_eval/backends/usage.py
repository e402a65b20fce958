"""Process-wide usage ledger: calls, cache hits, retries, failures, tokens, dollars and latency.

Every :class:`~mascot_eval.backends.client.ModelClient` records each finished call here, rolled
up per tag (``system:mascot``, ``judge:gpt``, ``user-sim``, ...) and per model spec. Runs read
``LEDGER.snapshot()`` into their manifest/summary. ``--cost-limit`` and ``--fail-on-error`` are
enforced from this ledger: the client raises :class:`CostLimitReached` / :class:`TooManyFailures`
(both :class:`RunStopped`) before starting a new call, so whatever finished stays saved.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..records.usage import Usage


MIN_CALLS_FOR_FAILURE_SHARE = 10  # below this many finished calls one failure is not yet a "share"


class RunStopped(UserError):
    """The run stopped on purpose (a limit was reached); finished work is saved. Exit code 3."""

    exit_code = 3


class CostLimitReached(RunStopped):
    pass


class TooManyFailures(RunStopped):
    pass


@dataclass
class Ledger:
    by_tag: dict[str, Usage] = field(default_factory=dict)
    by_spec: dict[str, Usage] = field(default_factory=dict)
    prior_cost_usd: float = 0.0  # dollars a resumed run spent in earlier invocations (counts toward --cost-limit)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(
        self,
        *,
        spec: str,
        tag: str,
        cached: bool = False,
        failed: bool = False,
        retries: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float = 0.0,
        latency_s: float = 0.0,
    ) -> None:
        t = Usage(
            calls=1,
            cached=int(cached),
            failures=int(failed),
            retries=retries,
            prompt_tokens=0 if cached else prompt_tokens,
            completion_tokens=0 if cached else completion_tokens,
            cost_usd=0.0 if cached else cost_usd,
            latency_s=0.0 if cached else latency_s,
        )
        with self._lock:
            self.by_tag.setdefault(tag or "(untagged)", Usage()).add(t)
            self.by_spec.setdefault(spec, Usage()).add(t)

    def total(self) -> Usage:
        with self._lock:
            return Usage.total(self.by_spec.values())

    def total_cost(self) -> float:
        """Dollars spent in this process plus what earlier invocations of the same run spent."""
        return self.total().cost_usd + self.prior_cost_usd

    def failure_share(self) -> tuple[int, int]:
        t = self.total()
        return t.failures, t.calls

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            by_tag = {k: v.to_dict() for k, v in sorted(self.by_tag.items())}
            by_spec = {k: v.to_dict() for k, v in sorted(self.by_spec.items())}
        return {"total": self.total().to_dict(), "by_tag": by_tag, "by_spec": by_spec}

    def reset(self) -> None:
        with self._lock:
            self.by_tag.clear()
            self.by_spec.clear()
            self.prior_cost_usd = 0.0


LEDGER = Ledger()


def begin_run(prior_cost_usd: float) -> None:
    """A command starts working on a run: the process ledger restarts from what that run already spent
    (in earlier invocations), so ``--cost-limit`` is the run's limit across resumes."""
    LEDGER.reset()
    LEDGER.prior_cost_usd = float(prior_cost_usd or 0.0)


def check_limits(cost_limit: float | None, fail_on_error: float | None) -> None:
    """Raise RunStopped when a limit has been passed (called before each new model call)."""
    if cost_limit is not None:
        spent = LEDGER.total_cost()
        if spent >= cost_limit:
            raise CostLimitReached(
                f"cost limit reached: ${spent:.4f} spent of --cost-limit ${cost_limit:.4f}; finished work is saved, "
                "rerun with a higher limit to continue"
            )
    if fail_on_error is not None:
        failures, calls = LEDGER.failure_share()
        if failures and calls >= MIN_CALLS_FOR_FAILURE_SHARE or (fail_on_error == 0 and failures):
            share = failures / calls
            if share > fail_on_error:
                raise TooManyFailures(
                    f"stopped: {failures} of {calls} model calls failed ({share:.0%} > --fail-on-error "
                    f"{fail_on_error:.0%}); finished work is saved, see the errors above and rerun to resume"
                )
