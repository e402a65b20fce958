"""Call the `mascot-eval` entry point in-process and collect its exit code, stdout and stderr."""

from __future__ import annotations

from mascot_eval.cli.main import main


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    """``main(args)`` as the console script runs it: (exit code, stdout, stderr)."""
    code = 0
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return code, out.out, out.err
