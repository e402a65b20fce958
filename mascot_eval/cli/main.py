"""Entry point: a click group whose subcommands live in their own modules and load on demand.

User errors (:class:`mascot_eval.errors.UserError`) print one line on stderr and exit with their
code (2 unless stated); no traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import FrameType

import click

from .. import __version__
from ..errors import UserError

# command name -> "module:attribute" (a click.Command or click.Group)
COMMANDS: dict[str, str] = {
    "run": "mascot_eval.cli.run:run",
    "check": "mascot_eval.cli.check:check",
    "generate": "mascot_eval.cli.generate:generate",
    "judge": "mascot_eval.cli.judge:judge",
    "compare": "mascot_eval.cli.compare:compare",
    "agreement": "mascot_eval.cli.agreement:agreement",
    "judges": "mascot_eval.cli.judges:judges",
    "metrics": "mascot_eval.cli.metrics:metrics",
    "leaderboard": "mascot_eval.cli.leaderboard:leaderboard",
    "sweep": "mascot_eval.cli.sweep:sweep",
    "report": "mascot_eval.cli.report:report",
    "regress": "mascot_eval.cli.regress:regress",
    "plan": "mascot_eval.cli.plan:plan",
    "human": "mascot_eval.cli.human:human",
    "tasks": "mascot_eval.cli.tasks:tasks",
    "systems": "mascot_eval.cli.systems:systems",
    "models": "mascot_eval.cli.models:models",
    "cache": "mascot_eval.cli.cache:cache",
    "train": "mascot_eval.cli.train:train",
    "schema": "mascot_eval.cli.schema:schema",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self._spec_exists(name)]

    @staticmethod
    def _spec_exists(name: str) -> bool:
        module = COMMANDS[name].split(":")[0]
        return importlib.util.find_spec(module) is not None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not self._spec_exists(name):
            return None
        module, attr = COMMANDS[name].split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mascot-eval")
def cli() -> None:
    """Evaluate multi-agent socio-collaborative companions (MASCOT and baselines).

    Typical flow: `mascot-eval run --system mascot --judges gpt,claude`, then
    `mascot-eval leaderboard RUN_DIR --out results/leaderboard.csv` and
    `mascot-eval regress --baseline OLD --candidate NEW` in CI.
    """


_TERMINATED = False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C (asyncio cancels the running work cleanly),
    so finished work is recorded as stopped; the exit code is then 143."""
    import signal

    global _TERMINATED
    _TERMINATED = True
    # the SIGINT handler in place (asyncio's, which cancels the running work, or Python's default),
    # called directly: a process started in the background (`cmd &`, CI runners) inherits SIGINT
    # ignored, and a re-raised SIGINT would then be dropped and the run never stop
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(args=argv, prog_name="mascot-eval", standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click turns Ctrl-C (and our SIGTERM) into Abort
        click.echo("interrupted: finished work is saved; rerun the same command to resume", err=True)
        sys.exit(143 if _TERMINATED else 130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted: finished work is saved; rerun the same command to resume", err=True)
        sys.exit(143 if _TERMINATED else 130)


if __name__ == "__main__":
    main()
