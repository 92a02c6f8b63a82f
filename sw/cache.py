"""Where generated artefacts are cached: ``$SNIC_CACHE``, or ``~/.cache/supernic``."""

import contextlib
import fcntl
import os
from pathlib import Path

__all__ = ["cache_root", "locked"]


def cache_root() -> Path:
    root = Path(os.environ.get("SNIC_CACHE", Path.home() / ".cache" / "supernic"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def locked(directory: Path, name=".lock"):
    """Hold an exclusive lock on ``directory/name`` (created): parallel builders (pytest-xdist
    workers, two CLI runs) wait for the first one instead of repeating its work."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / name, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
