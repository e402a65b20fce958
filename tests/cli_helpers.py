"""Call the `mascot-eval` entry point in-process and collect its exit code, stdout and stderr.

The one CLI helper of the test suite: every test that runs a command in-process goes through
:func:`run_cli` (tests that need a real process use ``subprocess`` with ``sys.executable``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from mascot_eval.cli.main import main


class CliResult(NamedTuple):
    code: int
    out: str
    err: str

    @property
    def output(self) -> str:
        """stdout then stderr."""
        return self.out + self.err

    @property
    def code_and_output(self) -> tuple[int, str]:
        return self.code, self.output

    @property
    def err_lines(self) -> list[str]:
        """The non-empty lines of stderr."""
        return [ln for ln in self.err.strip().splitlines() if ln.strip()]


def run_cli(args: list[str], capsys: Any = None) -> CliResult:
    """``main(args)`` as the console script runs it: (exit code, stdout, stderr).

    With pytest's ``capsys`` the output is read (and cleared); without it the output stays in
    pytest's capture and ``out``/``err`` are empty, for tests that only need the exit code.
    """
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if capsys is None:
        return CliResult(code, "", "")
    out = capsys.readouterr()
    return CliResult(code, out.out, out.err)
