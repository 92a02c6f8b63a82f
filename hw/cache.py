"""Where generated artefacts are cached: ``$SNIC_CACHE``, or ``~/.cache/supernic``."""

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    root = Path(os.environ.get("SNIC_CACHE", Path.home() / ".cache" / "supernic"))
    root.mkdir(parents=True, exist_ok=True)
    return root
