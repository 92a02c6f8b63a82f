"""Design configuration: what `snic build` reads from a TOML file.

Example (``chains/default.toml``)::

    [design]
    name = "supernic"
    data_width = 512

    [parser]
    header_bytes = 256
    walk_steps = 11
"""

import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from .stream import check_data_width

__all__ = ["DesignConfig", "ConfigError", "load_config", "default_config_path"]


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class DesignConfig:
    name: str = "supernic"
    data_width: int = 512
    header_bytes: int = 256
    walk_steps: int = 11

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"design.name must be a Verilog identifier, not {self.name!r}")
        try:
            check_data_width(self.data_width)
        except ValueError as e:
            raise ConfigError(f"design.data_width: {e}") from None
        if self.data_width < 64:
            raise ConfigError(f"design.data_width must be at least 64, not {self.data_width!r}")
        beat = self.data_width // 8
        if (not isinstance(self.header_bytes, int) or self.header_bytes < 64
                or self.header_bytes > 1024 or self.header_bytes % beat):
            raise ConfigError(f"parser.header_bytes must be a multiple of {beat} between 64 and "
                              f"1024, not {self.header_bytes!r}")
        if not isinstance(self.walk_steps, int) or not 1 <= self.walk_steps <= 32:
            raise ConfigError(f"parser.walk_steps must be an integer from 1 to 32, "
                              f"not {self.walk_steps!r}")

    @property
    def build_id(self):
        """32-bit identifier of this configuration, readable from the ID register block."""
        text = json.dumps(asdict(self), sort_keys=True).encode()
        return int.from_bytes(hashlib.sha256(text).digest()[:4], "big")

    def with_(self, **changes):
        return DesignConfig(**{**asdict(self), **changes})


_KNOWN = {"design": {"name", "data_width"}, "parser": {"header_bytes", "walk_steps"}}


def load_config(path):
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    values = {}
    for section, content in raw.items():
        if section not in _KNOWN:
            raise ConfigError(f"{path}: unknown section [{section}] "
                              f"(known: {', '.join(sorted(_KNOWN))})")
        if not isinstance(content, dict):
            raise ConfigError(f"{path}: [{section}] must be a table, not {content!r}")
        for key, value in content.items():
            if key not in _KNOWN[section]:
                raise ConfigError(f"{path}: unknown key {section}.{key} "
                                  f"(known: {', '.join(sorted(_KNOWN[section]))})")
            values[key] = value
    return DesignConfig(**values)


def default_config_path():
    from importlib.resources import files
    return Path(str(files("supernic.chains") / "default.toml"))
