"""Judge prompt templates (``judges/templates/*.j2``) rendered in the shared sandbox (:mod:`mascot_eval.templating`).

Dialogue text never enters a prompt raw: templates wrap it with ``data(...)``, which puts it
between ``<<<DATA id=N>>>`` / ``<<<END DATA id=N>>>`` markers whose id ``N`` is derived from the
content (stable for caching, unpredictable to the text inside). Marker look-alikes inside the
text are defused, so a transcript cannot close the block early.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .. import paths, templating
from ..errors import UserError
from ..fileio import read_text

OPEN = "<<<DATA id={nonce}>>>"
CLOSE = "<<<END DATA id={nonce}>>>"


def defuse(text: str) -> str:
    """Make marker look-alikes inside data inert."""
    return text.replace("<<<", "<\u200b<<").replace(">>>", ">>\u200b>")


def data_block(text: str, nonce: str) -> str:
    return f"{OPEN.format(nonce=nonce)}\n{defuse(text)}\n{CLOSE.format(nonce=nonce)}"


def make_nonce(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:12]


def template_dirs(judges_root: Path) -> list[Path]:
    """Where a judge's templates are looked up, first match wins: ``judges_root/templates`` when the
    judges folder was given by path, then templates/ of the user folder's and the shipped judges/."""
    return [d / "templates" for d in paths.search("judges", judges_root)]


def template_dir(judges_root: Path) -> Path:
    return template_dirs(judges_root)[0]


def environment(judges_root: Path, *, autoescape: bool = False, **kw: Any) -> templating.Sandbox:
    """The shared sandbox over the judge template folders (names resolve inside them only)."""
    return templating.environment(template_dirs(judges_root), what="judge template", autoescape=autoescape, **kw)


def template_path(judges_root: Path, name: str) -> Path:
    dirs = template_dirs(judges_root)
    path = templating.resolve(dirs, name, what="judge template")
    if path is None:
        raise UserError(f"{dirs[0] / name}: judge template not found; templates live in {' or '.join(map(str, dirs))}")
    return path


def template_source(judges_root: Path, name: str) -> str:
    path = template_path(judges_root, name)
    return read_text(path, what="a judge template", limit=templating.MAX_TEMPLATE_BYTES)


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
    template_path(judges_root, name)  # clear error if missing
    env = environment(judges_root)
    variables = {"data": lambda text: data_block(str(text), nonce), **context}
    return templating.render(env, name, variables).strip() + "\n"
