"""The one jinja2 environment every user-editable template renders in (systems, user simulator, judges,
human form, report).

* :class:`Sandbox` is jinja2's :class:`~jinja2.sandbox.SandboxedEnvironment` (no access to
  attributes starting with ``_``, to function globals, to ``str.format`` tricks) with
  :class:`~jinja2.StrictUndefined` (a missing variable is an error, never an empty string) and
  limits on ``*`` / ``**`` (``'a' * 10**10`` and ``9**9**9`` are refused instead of eating the machine).
* :class:`ConfinedLoader` resolves template names inside its folders only: no absolute names, no
  ``..``, no symlink that leads out of the folder, files over :data:`MAX_TEMPLATE_BYTES` refused
  before they are read. This applies to ``{% include %}`` / ``{% import %}`` as well.
* :func:`render` turns every template failure (syntax, missing variable, sandbox violation, an error
  inside an expression) into one :class:`~mascot_eval.errors.UserError` line naming the file.

Use :func:`environment` to get an environment and :func:`render` to render::

    env = environment([folder], autoescape=True)
    html = render(env, "report.html.j2", {"title": ...}, limit=None)
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from .errors import UserError

MAX_TEMPLATE_BYTES = 256 * 1024  # one template file
MAX_RENDER_CHARS = 2_000_000  # a rendered prompt (the report passes limit=None)
MAX_REPEAT = 1_000_000  # longest sequence '*' may build
MAX_EXPONENT = 128  # largest integer exponent '**' accepts


def _one_line(text: object, n: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= n else line[: n - 3] + "..."


def check_name(name: Any, *, what: str = "template") -> str:
    """A template name is a relative path without '..' (``a.j2``, ``partials/x.j2``); else UserError."""
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{what} name {name!r}: give a file name such as agent.j2")
    if "\x00" in name or "\\" in name:
        raise UserError(f"{what} name {name!r}: contains a backslash or NUL; use a plain relative file name")
    p = PurePosixPath(name)
    if p.is_absolute() or name.startswith("~") or (len(name) > 1 and name[1] == ":"):
        raise UserError(f"{what} name {name!r}: absolute paths are not allowed; name a file inside the templates folder")
    if ".." in p.parts:
        raise UserError(f"{what} name {name!r}: '..' is not allowed; templates must stay inside their folder")
    return name


def resolve(dirs: Sequence[str | Path], name: str, *, what: str = "template") -> Path | None:
    """The file ``name`` in the first of ``dirs`` that holds it, checked to stay inside that folder
    after symlinks; None when no folder has it."""
    check_name(name, what=what)
    for d in dirs:
        root = Path(d)
        candidate = root / name
        if not candidate.is_file():
            continue
        real, real_root = candidate.resolve(), root.resolve()
        if not real.is_relative_to(real_root):
            raise UserError(
                f"{candidate}: {what} '{name}' is a link that leads outside {root}; templates must be files inside their folder"
            )
        return candidate
    return None


class _IncludeError(UserError):
    """A name an ``{% include %}`` / ``{% import %}`` asked for that may not be loaded."""


class ConfinedLoader(jinja2.BaseLoader):
    """Loads templates from ``dirs`` (searched in order) and from nowhere else."""

    def __init__(self, dirs: Sequence[str | Path], *, what: str = "template") -> None:
        self.dirs = [Path(d) for d in dirs]
        self.what = what

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        try:
            path = resolve(self.dirs, template, what=self.what)
        except UserError as exc:
            raise _IncludeError(exc.message) from None
        if path is None:
            raise jinja2.TemplateNotFound(template)
        size = path.stat().st_size
        if size > MAX_TEMPLATE_BYTES:
            raise UserError(f"{path}: {size:,} bytes, over the {MAX_TEMPLATE_BYTES:,}-byte limit for a template; shorten it")
        try:
            source = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise UserError(f"{path}: not UTF-8 text (byte {exc.start}); save the template as UTF-8") from None
        mtime = path.stat().st_mtime_ns

        def uptodate() -> bool:
            try:
                return path.stat().st_mtime_ns == mtime
            except OSError:
                return False

        return source, str(path), uptodate

    def list_templates(self) -> list[str]:
        out: set[str] = set()
        for d in self.dirs:
            if d.is_dir():
                for p in d.rglob("*"):
                    if p.is_file():
                        out.add(p.relative_to(d).as_posix())
        return sorted(out)


class Sandbox(SandboxedEnvironment):
    """jinja2's sandbox plus size limits on ``*`` and ``**``."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, op: str, left: Any, right: Any) -> Any:
        if op == "**":
            if isinstance(right, int) and not isinstance(right, bool):
                bits = left.bit_length() * abs(right) if isinstance(left, int) else 0
                if abs(right) > MAX_EXPONENT or bits > MAX_REPEAT:
                    raise SecurityError(
                        f"'**' with exponent {right} is too large (limits: exponent {MAX_EXPONENT}, result {MAX_REPEAT:,} bits)"
                    )
            return operator.pow(left, right)
        if op == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple, bytes)) and isinstance(n, int) and len(seq) * n > MAX_REPEAT:
                    raise SecurityError(f"'*' would build a sequence of {len(seq) * n:,} items (limit {MAX_REPEAT:,})")
            return operator.mul(left, right)
        return super().call_binop(context, op, left, right)


@lru_cache(maxsize=32)
def _environment(
    dirs: tuple[str, ...], what: str, autoescape: bool, trim_blocks: bool, lstrip_blocks: bool, keep_trailing_newline: bool
) -> Sandbox:
    return Sandbox(
        loader=ConfinedLoader(dirs, what=what),
        undefined=jinja2.StrictUndefined,
        autoescape=autoescape,
        trim_blocks=trim_blocks,
        lstrip_blocks=lstrip_blocks,
        keep_trailing_newline=keep_trailing_newline,
        auto_reload=True,
    )


def environment(
    dirs: Sequence[str | Path],
    *,
    what: str = "template",
    autoescape: bool = False,
    trim_blocks: bool = True,
    lstrip_blocks: bool = True,
    keep_trailing_newline: bool = False,
) -> Sandbox:
    """The shared sandboxed environment over ``dirs`` (cached per argument set)."""
    return _environment(tuple(str(d) for d in dirs), what, autoescape, trim_blocks, lstrip_blocks, keep_trailing_newline)


# errors raised by Python inside a template expression ({{ 1/0 }}, {{ "a" + 1 }}, range(10**9), ...)
_EXPRESSION_ERRORS = (ArithmeticError, TypeError, ValueError, LookupError, AttributeError, RecursionError)


def _where(env: jinja2.Environment, name: str) -> str:
    loader = env.loader
    if isinstance(loader, ConfinedLoader):
        try:
            path = resolve(loader.dirs, name, what=loader.what)
        except UserError:
            path = None
        if path is not None:
            return str(path)
        return f"{loader.what} '{name}'"
    return f"template '{name}'"


def _origin(exc: BaseException, default: str) -> str:
    """``file:line`` of the innermost template frame of ``exc`` (an included partial names itself)."""
    found = default
    tb = exc.__traceback__
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if fn and not fn.endswith(".py") and Path(fn).is_file():
            found = f"{fn}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def render(
    env: jinja2.Environment,
    name: str,
    variables: Mapping[str, Any],
    *,
    limit: int | None = MAX_RENDER_CHARS,
    where: str | None = None,
) -> str:
    """Render ``name`` with ``variables``; every failure is one UserError line naming the file."""
    loader = env.loader
    what = loader.what if isinstance(loader, ConfinedLoader) else "template"
    check_name(name, what=what)
    try:
        tpl = env.get_template(name)
    except jinja2.TemplateNotFound as exc:
        dirs = ", ".join(str(d) for d in loader.dirs) if isinstance(loader, ConfinedLoader) else "its folder"
        missing = exc.name if exc.name != name else name
        raise UserError(f"{where or what} '{missing}' not found in {dirs}; create it or fix the name") from None
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(
            f"{exc.filename or _where(env, name)}:{exc.lineno}: template syntax error "
            f"({_one_line(exc.message or '')}); fix the template"
        ) from None
    path = tpl.filename or _where(env, name)
    try:
        if limit is None:
            return tpl.render(**variables)
        parts: list[str] = []
        size = 0
        for chunk in tpl.generate(**variables):
            size += len(chunk)
            if size > limit:
                raise UserError(f"{path}: renders more than {limit:,} characters; shorten the template")
            parts.append(chunk)
        return "".join(parts)
    except _IncludeError as exc:
        raise UserError(f"{_origin(exc, path)}: includes {exc.message}") from None
    except UserError:
        raise
    except jinja2.TemplateNotFound as exc:
        dirs = ", ".join(str(d) for d in loader.dirs) if isinstance(loader, ConfinedLoader) else "its folder"
        raise UserError(f"{_origin(exc, path)}: includes '{exc.name}', which is not in {dirs}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(
            f"{exc.filename or path}:{exc.lineno}: template syntax error ({_one_line(exc.message or '')}); fix the template"
        ) from None
    except SecurityError as exc:
        raise UserError(
            f"{_origin(exc, path)}: unsafe template operation blocked by the sandbox ({_one_line(exc)}); "
            "templates may only read the variables they are given"
        ) from None
    except jinja2.UndefinedError as exc:
        available = ", ".join(sorted(variables))
        raise UserError(f"{_origin(exc, path)}: {_one_line(exc.message or exc)}; variables available: {available}") from None
    except jinja2.TemplateError as exc:
        raise UserError(f"{_origin(exc, path)}: template failed ({_one_line(exc)})") from None
    except OverflowError as exc:
        raise UserError(f"{_origin(exc, path)}: template failed ({_one_line(exc)})") from None
    except RecursionError:
        raise UserError(f"{path}: template failed (RecursionError: it includes or calls itself without end)") from None
    except _EXPRESSION_ERRORS as exc:
        raise UserError(f"{_origin(exc, path)}: template failed ({type(exc).__name__}: {_one_line(exc)})") from None


def compile_check(env: jinja2.Environment, name: str) -> Path | None:
    """Load and compile ``name`` (syntax errors, includes are checked when rendered); its path."""
    loader = env.loader
    what = loader.what if isinstance(loader, ConfinedLoader) else "template"
    try:
        tpl = env.get_template(check_name(name, what=what))
    except jinja2.TemplateNotFound:
        dirs = ", ".join(str(d) for d in loader.dirs) if isinstance(loader, ConfinedLoader) else "its folder"
        raise UserError(f"{what} '{name}' not found in {dirs}; create it or fix the name") from None
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(
            f"{exc.filename or name}:{exc.lineno}: template syntax error ({_one_line(exc.message or '')}); fix the template"
        ) from None
    return Path(tpl.filename) if tpl.filename else None


__all__ = [
    "MAX_TEMPLATE_BYTES",
    "MAX_RENDER_CHARS",
    "ConfinedLoader",
    "Sandbox",
    "check_name",
    "compile_check",
    "environment",
    "render",
    "resolve",
]
