"""Where dataset files come from: the data directory, else the user cache, else a download.

Rule: with a data directory (``--data-dir`` / ``MASCOT_DATA_DIR``) a dataset file must be in it.
Without one, the file is read from ``<user cache>/datasets/`` and, when absent there, downloaded
from the dataset's canonical public release over plain HTTP (pinned to a commit and checked against
the git blob id where the source is a git repository). Offline (``HF_DATASETS_OFFLINE``,
``HF_HUB_OFFLINE`` or ``MASCOT_OFFLINE`` = 1) nothing is downloaded and a missing file is a one-line
error naming ``MASCOT_DATA_DIR``. Under :func:`no_downloads` (commands that only show, such as
``tasks show``) a file that would be downloaded raises :class:`DownloadNeeded` instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import io
import json
import random
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import UserError
from ..fileio import atomic_write_bytes, confined_path

ED_TARBALL = "https://dl.fbaipublicfiles.com/parlai/empatheticdialogues/empatheticdialogues.tar.gz"
QMSUM_COMMIT = "83d7768c1f2b4dfeb091385d3dc7e239b8e5bb7e"
QMSUM_RAW = f"https://raw.githubusercontent.com/Yale-LILY/QMSum/{QMSUM_COMMIT}/data"
ESCONV_COMMIT = "f262d062ad74cb39b17ea476facc81568ddcba24"
ESCONV_RAW = f"https://raw.githubusercontent.com/thu-coai/Emotional-Support-Conversation/{ESCONV_COMMIT}/ESConv.json"

# git blob ids of files whose exact bytes are known (see the data README)
KNOWN_BLOBS: dict[str, str] = {
    "qmsum/Academic/jsonl/test.jsonl": "5142f78067c03e4c409bd41e29ad8cec4548e5e9",
    "qmsum/Committee/jsonl/test.jsonl": "d085bd14652675031d942d279b192274f857e11a",
    "qmsum/Product/jsonl/test.jsonl": "63c1e795995ac871de7f838a6c4fb6229c3b019d",
    "esconv/ESConv.json": "2f7a69eeda505053eac68f9ab26fd728d0f6db31",
    "esconv/test.txt": "d3fddc001ec2a79b1ae9354f754e4cec5332ac12",
}


_NO_DOWNLOADS: contextvars.ContextVar[bool] = contextvars.ContextVar("mascot_no_downloads", default=False)


class DownloadNeeded(UserError):
    """Raised under :func:`no_downloads` where :func:`locate` would download (nothing was fetched)."""


@contextlib.contextmanager
def no_downloads() -> Iterator[None]:
    token = _NO_DOWNLOADS.set(True)
    try:
        yield
    finally:
        _NO_DOWNLOADS.reset(token)


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def cache_root() -> Path:
    return paths.cache_dir(create=False) / "datasets"  # created only when a download writes into it


def _http_get(url: str) -> bytes:
    import httpx

    with httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0, connect=15.0)) as client:
        resp = client.get(url)
        resp.raise_for_status()
        return resp.content


def fetch(url: str, relpath: str) -> bytes:
    """Download ``url`` (the source of ``relpath``); errors become one line naming MASCOT_DATA_DIR."""
    try:
        data = _http_get(url)
    except Exception as exc:  # any network failure is the user's environment, reported in one line
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(
            f"could not download {url} for {relpath} ({reason}); check the network or set MASCOT_DATA_DIR "
            f"to a folder holding {relpath}"
        ) from None
    blob = KNOWN_BLOBS.get(relpath)
    if blob is not None and git_blob_id(data) != blob:
        raise UserError(
            f"{url}: downloaded bytes do not match the pinned release of {relpath} (git blob {blob}); "
            f"set MASCOT_DATA_DIR to a folder holding a verified copy"
        )
    return data


# ---- dataset-specific download steps: each writes its files under cache_root() -------------------


def _download_ed(root: Path) -> None:
    data = fetch(ED_TARBALL, "empathetic_dialogues/empatheticdialogues.tar.gz")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for split in ("train", "valid", "test"):
                member = tar.extractfile(f"empatheticdialogues/{split}.csv")
                if member is None:
                    raise KeyError(split)
                atomic_write_bytes(root / "empathetic_dialogues" / f"{split}.csv", member.read())
    except (tarfile.TarError, KeyError, OSError) as exc:
        raise UserError(
            f"{ED_TARBALL}: not the EmpatheticDialogues release tarball ({exc}); "
            f"set MASCOT_DATA_DIR to a folder holding empathetic_dialogues/test.csv"
        ) from None


def _download_qmsum(root: Path) -> None:
    files: dict[str, bytes] = {}
    for domain in ("Academic", "Committee", "Product"):
        for split in ("train", "val", "test"):
            rel = f"qmsum/{domain}/jsonl/{split}.jsonl"
            files[rel] = fetch(f"{QMSUM_RAW}/{domain}/jsonl/{split}.jsonl", rel)
    for rel, data in files.items():  # written only once every file arrived and checked out
        atomic_write_bytes(root / rel, data)


def esconv_official_split(original: list[dict]) -> dict[str, list[dict]]:
    """thu-coai's ``codes_zcj/_reformat/process.py`` re-implemented: normalise, seed-13 shuffle, 15/15/70."""

    def norm(x: str) -> str:
        return " ".join(x.strip().split())

    data = []
    for d in original:
        dial = []
        for uttr in d["dialog"]:
            if uttr["speaker"] == "seeker":
                dial.append({"text": norm(uttr["content"]), "speaker": "usr"})
            else:
                dial.append({"text": norm(uttr["content"]), "speaker": "sys", "strategy": uttr["annotation"]["strategy"]})
        data.append(
            {"emotion_type": d["emotion_type"], "problem_type": d["problem_type"], "situation": d["situation"], "dialog": dial}
        )
    rng = random.Random(13)
    rng.shuffle(data)
    dev = int(0.15 * len(data))
    test = int(0.15 * len(data))
    return {"valid": data[:dev], "test": data[dev : dev + test], "train": data[dev + test :]}


def _download_esconv(root: Path) -> None:
    raw = fetch(ESCONV_RAW, "esconv/ESConv.json")
    try:
        splits = esconv_official_split(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{ESCONV_RAW}: unexpected ESConv.json content ({exc}); set MASCOT_DATA_DIR to a folder holding esconv/test.txt"
        ) from None
    out = {s: "".join(json.dumps(e) + "\n" for e in rows).encode() for s, rows in splits.items()}
    if git_blob_id(out["test"]) != KNOWN_BLOBS["esconv/test.txt"]:
        raise UserError(
            "esconv/test.txt: the split rebuilt from ESConv.json differs from the official one; "
            "set MASCOT_DATA_DIR to a folder holding the official esconv/test.txt"
        )
    for split, data in out.items():
        atomic_write_bytes(root / "esconv" / f"{split}.txt", data)


DOWNLOADERS: dict[str, Callable[[Path], None]] = {
    "empathetic_dialogues": _download_ed,
    "qmsum": _download_qmsum,
    "esconv": _download_esconv,
}


@dataclass(frozen=True)
class Located:
    path: Path
    origin: str  # "data_dir", "cache" or "download"


def locate(dataset: str, relpath: str, data_dir: Path | None, *, where: str = "the task", field: str = "source.path") -> Located:
    """Find ``relpath`` (e.g. ``empathetic_dialogues/test.csv``) for ``dataset``; download it if allowed.

    ``relpath`` must stay inside the data directory (or the cache): an absolute path or one that
    climbs out with '..' is refused with one line naming ``where``/``field`` and the allowed root, and
    nothing outside is read."""
    root = data_dir if data_dir is not None else cache_root()
    label = "the data directory" if data_dir is not None else "the dataset cache"
    if not isinstance(relpath, str) or Path(relpath).is_absolute() or relpath.startswith("~"):
        raise UserError(
            f"{where}: field '{field}': absolute path {relpath!r} is not allowed; dataset paths are relative to {label} {root}"
        )
    p = confined_path(root, relpath, field=field, where=where, follow_links=False)
    if data_dir is not None:
        if not p.exists():
            raise UserError(
                f"{p}: data file not found; MASCOT_DATA_DIR (or --data-dir) must be a folder holding "
                f"{relpath} (unset it to download {dataset} into the user cache)"
            )
        return Located(p, "data_dir")
    cached = p
    if cached.exists():
        return Located(cached, "cache")
    if paths.offline():
        raise UserError(
            f"{relpath}: dataset file not available offline (no data directory, not in {cache_root()}); "
            f"set MASCOT_DATA_DIR to a folder holding {relpath}"
        )
    if dataset not in DOWNLOADERS:
        raise UserError(f"{relpath}: not found and {dataset} has no download source; set MASCOT_DATA_DIR to a folder holding it")
    if _NO_DOWNLOADS.get():
        raise DownloadNeeded(
            f"{relpath} is not in {cache_root()} yet; the first run downloads {dataset} there "
            "(or set MASCOT_DATA_DIR to a folder holding it)"
        )
    DOWNLOADERS[dataset](cache_root())
    if not cached.exists():
        raise UserError(f"{relpath}: not part of the downloaded {dataset} release; set MASCOT_DATA_DIR to a folder holding it")
    return Located(cached, "download")
