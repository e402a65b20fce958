"""Multi-process runs (``accelerate launch``): which process writes shared files."""

from __future__ import annotations

import os


def is_main_process() -> bool:
    """True on rank 0 (or without a launcher): only it writes checkpoint.json, config.yaml, the log and plots."""
    return os.environ.get("RANK", "0") == "0"
