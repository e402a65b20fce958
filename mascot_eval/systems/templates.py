"""Jinja2 prompt templates for systems and the user simulator.

Templates live in ``baselines/templates/`` of the user folder, then of the shipped data (a YAML
config given as a path may bring its own ``templates/`` folder next to it, searched first, and files
beside it). They render in the shared sandbox (:mod:`mascot_eval.templating`): undefined variables
are errors, Python internals are out of reach and names resolve inside those folders only. A
template's text is split into chat messages by marker lines ``[system]``, ``[user]`` and
``[assistant]``; text before the first marker (or a template with no markers) is one user message.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .. import paths, templating
from ..errors import UserError
from ..fileio import sha256_file

_MARKER = re.compile(r"^\[(system|user|assistant)\]\s*$", re.MULTILINE)


def search_path(config_file: str | None = None) -> list[Path]:
    dirs: list[Path] = []
    if config_file and paths.source_of(config_file) == "path":  # a config given by path brings its own
        here = Path(config_file).resolve().parent
        dirs += [here / "templates", here]
    dirs += [d / "templates" for d in paths.dirs("baselines")]  # user folder first, then shipped
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return out


class Templates:
    """The templates one system (or the user simulator) renders."""

    def __init__(self, config_file: str | None = None) -> None:
        self.dirs = search_path(config_file)
        self.env = templating.environment(self.dirs, what="template")

    def path(self, name: str) -> Path:
        found = templating.resolve(self.dirs, name)
        if found is None:
            raise UserError(f"template '{name}' not found in {', '.join(str(d) for d in self.dirs)}; create it or fix the name")
        return found

    def hash(self, name: str) -> str:
        return sha256_file(self.path(name))[:16]

    def render_text(self, name: str, **variables: Any) -> str:
        self.path(name)
        return templating.render(self.env, name, variables).strip()

    def render(self, name: str, **variables: Any) -> list[dict[str, str]]:
        return split_messages(self.render_text(name, **variables), where=name)


def split_messages(text: str, *, where: str = "template") -> list[dict[str, str]]:
    parts = _MARKER.split(text)
    messages: list[dict[str, str]] = []
    head = parts[0].strip()
    if head:
        messages.append({"role": "user", "content": head})
    for role, body in zip(parts[1::2], parts[2::2]):
        body = body.strip()
        if body:
            messages.append({"role": role, "content": body})
    if not messages or messages[-1]["role"] == "assistant" and len(messages) == 1:
        raise UserError(f"template '{where}' rendered no user message; it must produce some text")
    return messages
