"""Reading a TOML file (a design configuration, a chain specification) with one clear line for
every way it can fail: missing, unreadable (a directory, no permission), not UTF-8, not TOML."""

import tomllib
from pathlib import Path

__all__ = ["read_toml"]


def read_toml(path, error, what):
    """The table in ``path``; raises ``error`` (an exception class) with one line, naming the
    file as ``what`` when it does not exist."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not a text file (TOML is UTF-8)") from None
    except OSError as e:        # a directory, no permission, ...
        raise error(f"{path}: cannot be read: {e.strerror or e}") from None
