"""Where things live: the data folders (tasks, judges, baselines, paper tables), results, data and cache.

The data folders are searched in layers, first match by name wins:

1. the **user folder** (``user``): ``$MASCOT_HOME`` when set (it must exist), else
   ``$XDG_CONFIG_HOME/mascot-eval`` (``~/.config/mascot-eval``) when that folder exists. Its
   ``tasks/``, ``judges/`` and ``baselines/`` add entries and override shipped ones of the same name.
2. the **shipped data**: the checkout's top-level ``tasks/``, ``judges/``, ``baselines/`` and
   ``results/paper/`` when the package runs from a source checkout (``checkout``: editable install
   or ``PYTHONPATH``), else the copy built into the installed package, ``mascot_eval/_data/``
   (``package``: wheel or sdist, read with :mod:`importlib.resources`).

Nothing falls back to the current directory, except the default output folder of an installed
package: ``results/`` is the checkout's ``results/`` in a checkout and ``./results`` otherwise.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .errors import UserError

PACKAGE_DIR = Path(__file__).resolve().parent
KINDS = ("tasks", "judges", "baselines")  # the folders a user folder may add to / override
DATA_PACKAGE_DIR = "_data"  # inside the package: _data/{tasks,judges,baselines,paper} (built by setup.py)
# shipped folder -> where it is in a checkout (the package's _data/ uses the key itself)
CHECKOUT_LAYOUT = {"tasks": "tasks", "judges": "judges", "baselines": "baselines", "paper": "results/paper"}


@dataclass(frozen=True)
class Layer:
    """One place data folders are read from."""

    source: str  # user | checkout | package
    root: Path
    why: str  # how it was chosen, for `tasks list` and error messages

    def dir(self, kind: str) -> Path:
        if self.source == "checkout":
            return self.root / CHECKOUT_LAYOUT[kind]
        return self.root / kind


def checkout_dir() -> Path | None:
    """The source checkout this package runs from (editable install or PYTHONPATH), else None."""
    root = PACKAGE_DIR.parent
    if (root / "pyproject.toml").is_file() and all((root / d).is_dir() for d in CHECKOUT_LAYOUT.values()):
        return root
    return None


def _materialize(tree: resources.abc.Traversable, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for item in tree.iterdir():
        if item.is_dir():
            _materialize(item, dest / item.name)
        else:
            (dest / item.name).write_bytes(item.read_bytes())


@lru_cache(maxsize=1)
def _package_data() -> Path | None:
    """The installed package's ``_data`` folder as a real path (extracted once when imported from a zip)."""
    tree = resources.files(__package__) / DATA_PACKAGE_DIR
    if not tree.is_dir():
        return None
    if isinstance(tree, Path):
        return tree
    tmp = Path(tempfile.mkdtemp(prefix="mascot-eval-data-"))
    atexit.register(shutil.rmtree, tmp, True)
    _materialize(tree, tmp)
    return tmp


def shipped_layer() -> Layer:
    ck = checkout_dir()
    if ck is not None:
        return Layer("checkout", ck, "running from a source checkout")
    data = _package_data()
    if data is None:
        raise UserError(
            f"{PACKAGE_DIR}: the installed package has no data folders (mascot_eval/{DATA_PACKAGE_DIR} missing); "
            "reinstall from a wheel or sdist built with the repository's setup.py, or run from a checkout"
        )
    return Layer("package", data, "installed package data")


def user_layer() -> Layer | None:
    """The user folder: $MASCOT_HOME (must exist), else ~/.config/mascot-eval when it exists."""
    env = os.environ.get("MASCOT_HOME")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise UserError(
                f"MASCOT_HOME={env}: no such folder; create it (with tasks/, judges/ or baselines/) or unset MASCOT_HOME"
            )
        return Layer("user", path.resolve(), "MASCOT_HOME")
    path = default_user_dir()
    return Layer("user", path.resolve(), "default user folder") if path.is_dir() else None


def default_user_dir() -> Path:
    """``$XDG_CONFIG_HOME/mascot-eval``, else ``~/.config/mascot-eval`` (used when it exists)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mascot-eval"


def layers() -> list[Layer]:
    """The search order: the user folder (if any), then the shipped data."""
    user = user_layer()
    return [*([user] if user else []), shipped_layer()]


def dirs(kind: str) -> list[Path]:
    """The existing ``kind`` folders (tasks, judges, baselines), highest priority first."""
    if kind not in KINDS:
        raise ValueError(f"unknown data folder {kind!r}; one of {KINDS}")
    out: list[Path] = []
    for d in (layer.dir(kind) for layer in layers()):
        if d.is_dir() and d not in out:
            out.append(d)
    return out


def search(kind: str, own: str | os.PathLike[str] | None = None) -> list[Path]:
    """Folders to look up a ``kind`` file referenced by name (a template, a rubric): ``own`` first when
    it is a folder given by path (not one of the layers), then :func:`dirs` in search order."""
    out = [Path(own)] if own is not None and source_of(own) == "path" else []
    return out + [d for d in dirs(kind) if d not in out]


def find(kind: str, rel: str | os.PathLike[str]) -> Path | None:
    """The first ``<layer>/<kind>/<rel>`` that exists, in search order, or None."""
    for d in dirs(kind):
        if (d / rel).exists():
            return d / rel
    return None


def entries(kind: str, sub: str = "", pattern: str = "*.yaml") -> dict[str, Path]:
    """Files ``<kind>/<sub>/<pattern>`` over all layers by stem; a higher layer's file overrides a lower one's."""
    out: dict[str, Path] = {}
    for d in reversed(dirs(kind)):
        folder = d / sub if sub else d
        if folder.is_dir():
            out.update({p.stem: p for p in folder.glob(pattern)})
    return dict(sorted(out.items()))


def source_of(path: str | os.PathLike[str]) -> str:
    """Which layer a file comes from (user, checkout, package), or 'path' for a file given by path."""
    p = Path(path).resolve()
    for layer in layers():
        if any(p.is_relative_to(layer.dir(k).resolve()) for k in CHECKOUT_LAYOUT):
            return layer.source
    return "path"


def describe() -> str:
    """One line naming the search order, e.g. for `mascot-eval tasks list`."""
    line = "data search order: " + " > ".join(f"{layer.source} {layer.root} ({layer.why})" for layer in layers())
    if user_layer() is None:
        line += f"; no user folder (set MASCOT_HOME or create {default_user_dir()})"
    return line


def tasks_dir() -> Path:
    """The shipped tasks folder (lowest layer); use :func:`dirs`/:func:`entries`/:func:`find` to honour the user folder."""
    return shipped_layer().dir("tasks")


def personas_dir() -> Path:
    return tasks_dir() / "personas"


def personas_dirs() -> list[Path]:
    """``tasks/personas`` of every layer, highest priority first."""
    return [d / "personas" for d in dirs("tasks") if (d / "personas").is_dir()]


def judges_dir() -> Path:
    """The shipped judges folder (lowest layer)."""
    return shipped_layer().dir("judges")


def baselines_dir() -> Path:
    """The shipped baselines folder (lowest layer)."""
    return shipped_layer().dir("baselines")


def paper_dir() -> Path:
    """The published MASCOT tables (``results/paper/`` in a checkout, ``_data/paper`` in a package)."""
    return shipped_layer().dir("paper")


def results_dir() -> Path:
    """Default output folder: the checkout's results/ in a checkout, else ./results (installed package)."""
    ck = checkout_dir()
    return ck / "results" if ck is not None else Path.cwd() / "results"


def evaluate_modules_dir() -> Path:
    """The bundled Hugging Face ``evaluate`` modules (package code, loaded by path)."""
    tree = resources.files("mascot_eval.metrics.evaluate_modules")
    if isinstance(tree, Path):
        return tree
    raise UserError("mascot_eval is imported from a zip archive; install it unpacked to use the evaluate modules")


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
