"""Where the real-data tests get their datasets (used by the ``data_dir`` fixture in conftest.py).

In order: ``MASCOT_DATA_DIR``; ``../shared/data`` beside the repository (CI); the user cache
(``<cache>/datasets``, where the project's loaders put downloads); else, when online, the project's
own downloaders (:data:`mascot_eval.data.sources.DOWNLOADERS`: pinned releases, git-blob checked)
fetch the missing datasets into that cache once. Offline (``HF_DATASETS_OFFLINE``, ``HF_HUB_OFFLINE``
or ``MASCOT_OFFLINE`` = 1 in the environment pytest was started with) or when a download fails for
want of a network, there is no data folder and the reason says why; the fixture then skips every
data test with that one reason.

Tests see the files of ``../shared/data`` only (the test splits): a cache folder is shown through
a folder of links to those files, so a test that expects e.g. ``valid.csv`` to be absent holds for
both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

# the files the data tests read, by dataset (the layout of ../shared/data)
FILES: dict[str, tuple[str, ...]] = {
    "empathetic_dialogues": ("empathetic_dialogues/test.csv",),
    "qmsum": tuple(f"qmsum/{d}/jsonl/test.jsonl" for d in ("Academic", "Committee", "Product")),
    "esconv": ("esconv/test.txt",),
}
OFFLINE_VARS = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "MASCOT_OFFLINE")
NO_DATA = "real-data tests skipped: "


@dataclass(frozen=True)
class Found:
    path: Path | None  # the folder the data tests read, or None
    origin: str  # "MASCOT_DATA_DIR", "../shared/data", "cache", "download" or "none"
    reason: str = ""  # why there is no folder (origin "none")


def offline(env: Mapping[str, str]) -> bool:
    return any(env.get(v) == "1" for v in OFFLINE_VARS)


def _missing(root: Path) -> list[str]:
    return [name for name, files in FILES.items() if not all((root / f).is_file() for f in files)]


def _view(root: Path, view: Path) -> Path:
    """A folder holding links to exactly the files in FILES under ``root``."""
    for files in FILES.values():
        for rel in files:
            link = view / rel
            if not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to((root / rel).resolve())
    return view


def find_data(
    env: Mapping[str, str],
    repo: Path,
    cache_root: Path,
    view: Callable[[], Path],
    downloaders: Mapping[str, Callable[[Path], None]] | None = None,
) -> Found:
    """Locate (or fetch, when online) the datasets; ``view()`` makes an empty folder for the links."""
    value = env.get("MASCOT_DATA_DIR", "")
    if value:
        p = Path(value).expanduser()
        if p.is_dir():
            return Found(p, "MASCOT_DATA_DIR")
        return Found(
            None, "none", f"{NO_DATA}MASCOT_DATA_DIR={value} is not a folder; point it to the dataset folder or unset it"
        )
    shared = repo.parent / "shared" / "data"
    if shared.is_dir():
        return Found(shared, "../shared/data")
    missing = _missing(cache_root)
    if not missing:
        return Found(_view(cache_root, view()), "cache")
    where = f"no MASCOT_DATA_DIR, no {shared} and {', '.join(missing)} not in {cache_root}"
    if offline(env):
        on = [v for v in OFFLINE_VARS if env.get(v) == "1"]
        return Found(
            None,
            "none",
            f"{NO_DATA}{where}, and offline ({', '.join(f'{v}=1' for v in on)}) so not "
            "downloaded; set MASCOT_DATA_DIR to the dataset folder, or run the tests online once",
        )
    if downloaders is None:
        from mascot_eval.data.sources import DOWNLOADERS as downloaders
    from mascot_eval.errors import UserError

    for name in missing:
        try:
            downloaders[name](cache_root)
        except UserError as exc:
            if not exc.message.startswith("could not download"):
                raise  # a release that does not match its pin is a failure, never a skip
            return Found(
                None,
                "none",
                f"{NO_DATA}{where}, and the download failed ({exc.message}); set MASCOT_DATA_DIR to the dataset folder",
            )
    still = _missing(cache_root)
    if still:
        raise RuntimeError(f"the downloaders of {', '.join(still)} did not write {cache_root}/{FILES[still[0]][0]}")
    return Found(_view(cache_root, view()), "download")


def environment_at_start() -> dict[str, str]:
    """The variables that decide where data comes from, as pytest was started (before conftest's defaults)."""
    return {k: os.environ[k] for k in ("MASCOT_DATA_DIR", *OFFLINE_VARS) if k in os.environ}
