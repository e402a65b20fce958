"""Where things live: the project folders users edit, the data directory and the user cache."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UserError

PACKAGE_DIR = Path(__file__).resolve().parent


def project_dir() -> Path:
    """Folder holding tasks/, judges/, baselines/ and results/.

    ``MASCOT_PROJECT_DIR`` wins; otherwise the checkout this package was installed from
    (editable install), otherwise the current directory.
    """
    env = os.environ.get("MASCOT_PROJECT_DIR")
    if env:
        return Path(env).expanduser().resolve()
    candidate = PACKAGE_DIR.parent
    if (candidate / "tasks").is_dir():
        return candidate
    return Path.cwd()


def tasks_dir() -> Path:
    return project_dir() / "tasks"


def personas_dir() -> Path:
    return tasks_dir() / "personas"


def judges_dir() -> Path:
    return project_dir() / "judges"


def baselines_dir() -> Path:
    return project_dir() / "baselines"


def results_dir() -> Path:
    return project_dir() / "results"


def cache_dir(*, create: bool = True) -> Path:
    """User cache (``MASCOT_CACHE_DIR``, else ``$XDG_CACHE_HOME/mascot-eval``, else ~/.cache/mascot-eval)."""
    env = os.environ.get("MASCOT_CACHE_DIR")
    if env:
        path = Path(env).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "mascot-eval"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir(explicit: str | os.PathLike[str] | None = None, *, required: bool = False) -> Path | None:
    """The dataset folder: ``--data-dir`` if given, else ``MASCOT_DATA_DIR``, else None."""
    value = explicit if explicit is not None else os.environ.get("MASCOT_DATA_DIR")
    if not value:
        if required:
            raise UserError("no data directory: pass --data-dir or set MASCOT_DATA_DIR to the folder holding the datasets")
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise UserError(f"data directory {path} does not exist: fix --data-dir or MASCOT_DATA_DIR")
    return path.resolve()


def offline() -> bool:
    return any(os.environ.get(v) == "1" for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "MASCOT_OFFLINE"))
