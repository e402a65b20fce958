"""Client flags shared by every command that calls models (generate, judge, run, train, ...).

    @click.command()
    @client_options
    def generate(..., **kw):
        settings = settings_from_options(**kw)

``settings_from_options`` takes the whole ``**kw`` and picks the client flags out of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..backends.client import ClientSettings

CLIENT_OPTION_NAMES = (
    "max_connections",
    "rpm",
    "tpm",
    "cache_dir",
    "no_cache",
    "fail_on_error",
    "cost_limit",
    "max_retries",
    "timeout",
)


def _share(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is None:
        return None
    if value > 1:  # "--fail-on-error 10" means 10 %
        value = value / 100.0
    if not 0 <= value <= 1:
        raise click.BadParameter("a share between 0 and 1 (or a percentage up to 100)")
    return value


def client_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator adding the model-client flags to a click command."""
    opts = [
        click.option(
            "--max-connections",
            type=click.IntRange(min=1),
            default=None,
            help="Concurrent calls per model [default: 8 for API models, 64 for local models, whose calls one "
            "worker batches together].",
        ),
        click.option("--rpm", type=click.FloatRange(min=0, min_open=True), default=None, help="Requests per minute per model."),
        click.option(
            "--tpm", type=click.FloatRange(min=0, min_open=True), default=None, help="Tokens per minute per model (estimated)."
        ),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Response cache folder (default: $MASCOT_RESPONSE_CACHE_DIR, else the user cache).",
        ),
        click.option("--no-cache", is_flag=True, default=False, help="Neither read nor write the response cache."),
        click.option(
            "--fail-on-error",
            type=float,
            default=None,
            callback=_share,
            help="Stop the run when the share of failed model calls passes this (0.1 or 10 = 10%). Default: never.",
        ),
        click.option(
            "--cost-limit",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Stop cleanly (finished work saved) once this many dollars are spent (prices: judges/prices.yaml).",
        ),
        click.option(
            "--max-retries", type=click.IntRange(min=0), default=6, show_default=True, help="Retries on 429/5xx/timeouts."
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=300.0,
            show_default=True,
            help="Seconds per call attempt.",
        ),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def settings_from_options(**kw: Any) -> ClientSettings:
    """Build :class:`ClientSettings` from a command's keyword arguments (unrelated keys are ignored)."""
    return ClientSettings(
        max_connections=kw.get("max_connections"),
        requests_per_minute=kw.get("rpm"),
        tokens_per_minute=kw.get("tpm"),
        max_retries=kw["max_retries"] if kw.get("max_retries") is not None else 6,
        timeout_s=kw.get("timeout") or 300.0,
        use_cache=not kw.get("no_cache", False),
        cache_dir=kw.get("cache_dir"),
        cost_limit=kw.get("cost_limit"),
        fail_on_error=kw.get("fail_on_error"),
    )


def pop_client_options(kw: dict[str, Any]) -> ClientSettings:
    """Like :func:`settings_from_options` but also removes the client flags from ``kw``."""
    settings = settings_from_options(**kw)
    for name in CLIENT_OPTION_NAMES:
        kw.pop(name, None)
    return settings
