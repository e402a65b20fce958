"""Judge prompt templates (``judges/templates/*.j2``) rendered in a sandboxed jinja2 environment.

Dialogue text never enters a prompt raw: templates wrap it with ``data(...)``, which puts it
between ``<<<DATA id=N>>>`` / ``<<<END DATA id=N>>>`` markers whose id ``N`` is derived from the
content (stable for caching, unpredictable to the text inside). Marker look-alikes inside the
text are defused, so a transcript cannot close the block early.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from .. import paths
from ..errors import UserError

OPEN = "<<<DATA id={nonce}>>>"
CLOSE = "<<<END DATA id={nonce}>>>"


def defuse(text: str) -> str:
    """Make marker look-alikes inside data inert."""
    return text.replace("<<<", "<\u200b<<").replace(">>>", ">>\u200b>")


def data_block(text: str, nonce: str) -> str:
    return f"{OPEN.format(nonce=nonce)}\n{defuse(text)}\n{CLOSE.format(nonce=nonce)}"


def make_nonce(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:12]


@lru_cache(maxsize=8)
def _env(dirs: tuple[str, ...]) -> SandboxedEnvironment:
    return SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(list(dirs)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def template_dirs(judges_root: Path) -> list[Path]:
    """Where a judge's templates are looked up, first match wins: ``judges_root/templates`` when the
    judges folder was given by path, then templates/ of the user folder's and the shipped judges/."""
    return [d / "templates" for d in paths.search("judges", judges_root)]


def template_dir(judges_root: Path) -> Path:
    return template_dirs(judges_root)[0]


def template_path(judges_root: Path, name: str) -> Path:
    dirs = template_dirs(judges_root)
    return next((d / name for d in dirs if (d / name).is_file()), dirs[0] / name)


def template_source(judges_root: Path, name: str) -> str:
    path = template_path(judges_root, name)
    if not path.is_file():
        where = " or ".join(str(d) for d in template_dirs(judges_root))
        raise UserError(f"{path}: judge template not found; templates live in {where}")
    return path.read_text(encoding="utf-8")


def templates_hash(judges_root: Path, names: list[str]) -> str:
    """Hash of the named templates and every shared partial (files starting with '_')."""
    files = sorted(set(names) | {p.name for d in template_dirs(judges_root) for p in d.glob("_*.j2")})
    h = hashlib.sha256()
    for n in files:
        h.update(n.encode())
        h.update(template_source(judges_root, n).encode())
    return h.hexdigest()[:16]


def render(judges_root: Path, name: str, *, nonce: str, **context: Any) -> str:
    """Render template ``name``; ``data(x)`` in the template wraps ``x`` in a delimited data block."""
    env = _env(tuple(str(d) for d in template_dirs(judges_root)))
    template_source(judges_root, name)  # clear error if missing
    try:
        tpl = env.get_template(name)
        return tpl.render(data=lambda text: data_block(str(text), nonce), **context).strip() + "\n"
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"{exc.filename or name}:{exc.lineno}: template syntax error ({exc.message}); fix the template") from None
    except jinja2.UndefinedError as exc:
        raise UserError(f"{template_path(judges_root, name)}: {exc.message}; the template uses a variable the judge does not provide") from None
    except jinja2.exceptions.SecurityError as exc:
        raise UserError(f"{template_path(judges_root, name)}: unsafe template operation blocked by the sandbox ({exc})") from None
