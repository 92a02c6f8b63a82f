"""Design configuration: what `snic build` reads from a TOML file.

Example (``chains/default.toml``)::

    [design]
    name = "supernic"
    data_width = 512

    [parser]
    header_bytes = 256
    walk_steps = 11
    ext_headers = 4        # IP extension headers walked per layer (RFC 8200 section 4)
    header_checksum = false  # check IPv4 header checksums (RFC 791): a bad one is malformed

    [chains]
    specs = ["web", "monitoring"]   # chain specifications: a path relative to this file,
                                    # or the name of one shipped in chains/

Each named chain is emitted as its own single-tenant design (``<name>_<tenant>.v``, see
:mod:`supernic.hw.chain.top`) beside the top level.

A ``[nic]`` section makes the top level the multi-tenant NIC (:mod:`supernic.hw.nic.top`)::

    [nic]
    tenants = 4            # tenants the classifier, queues and scheduler serve
    ports = 2              # ingress ports, each with its own parser and classifier
    regions = [["web", "metered"], ["secure"]]   # per region: the chain personalities it can
                                                 # load (names or paths, as for [chains])
    queue_beats = 256      # per tenant and port
    store_beats = 1024     # the central packet store, shared by the regions
    region_fifo_beats = 64  # each region's input buffer
    stall_cycles = 1024    # a region that takes no beat this long, holding the store's shared
                           # input with a packet larger than its buffer, is cut off (0: never)
    policies = ["drf", "rr", "drr", "fifo"]      # schedulers built in; the first runs at reset
    yieldable = true       # region personalities under the state-yielding transform
                           # (suspend, resume, capture and restore their state), with the
                           # boundary state port (only the state live at a drained packet
                           # boundary); or a list of region indices: only those; or "full":
                           # every region, with every flip-flop (stops at once too)
    links = [[0, 1]]       # [primary, branch] region pairs that can run a DAG's branches side
                           # by side (hw/nic/link.py): personalities "monitoring#primary"
                           # and "monitoring#branches" are the two parts of that chain

Without it the top level is the parser alone (:mod:`supernic.hw.top`).
"""

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import SnicError
from .toml_file import read_toml

# The stream widths the gateware is built for (hw/stream.py): powers of two, a byte to 1024 bits.
_WIDTHS = (8, 16, 32, 64, 128, 256, 512, 1024)


def check_data_width(data_width):
    if not isinstance(data_width, int) or data_width not in _WIDTHS:
        raise ValueError(f"Data width must be one of {_WIDTHS}, not {data_width!r}")
    return data_width


__all__ = ["DesignConfig", "ConfigError", "load_config", "default_config_path"]


#: ``nic.yieldable`` as a string: every region transformed, with this state port.
YIELDABLE_STATES = ("full", "boundary")


class ConfigError(SnicError, ValueError):
    """A configuration or chain specification that cannot be built (one line naming the bad
    entry)."""


@dataclass(frozen=True)
class DesignConfig:
    name: str = "supernic"
    data_width: int = 512
    header_bytes: int = 256
    walk_steps: int = 11
    ext_headers: int = 4
    header_checksum: bool = False
    chains: tuple = ()
    tenants: int = 4
    ports: int = 2
    regions: tuple = ()
    queue_beats: int = 256
    store_beats: int = 1024
    region_fifo_beats: int = 64
    stall_cycles: int = 1024
    classifier_entries: int = 16
    table_size: int = 16
    policies: tuple = ("drf", "rr", "drr", "fifo")
    yieldable: bool | tuple = False
    links: tuple = ()
    # A rack port (sw/desc/nic/rack.py): one more ingress port, for packets peers redirect
    # here, and the redirect action that sends a tenant's packets to a peer.
    rack: bool = False
    # Where relative chain paths are looked up; not part of the build identity.
    config_dir: str = field(default="", compare=False)

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
        if not isinstance(self.ext_headers, int) or not 0 <= self.ext_headers <= 15:
            raise ConfigError(f"parser.ext_headers must be an integer from 0 to 15, "
                              f"not {self.ext_headers!r}")
        if not isinstance(self.header_checksum, bool):
            raise ConfigError(f"parser.header_checksum must be true or false, "
                              f"not {self.header_checksum!r}")
        if isinstance(self.chains, list):
            object.__setattr__(self, "chains", tuple(self.chains))
        if not isinstance(self.chains, tuple) or not all(
                isinstance(c, str) and c for c in self.chains):
            raise ConfigError(f"chains.specs must be a list of chain names or paths, "
                              f"not {self.chains!r}")

        if isinstance(self.regions, list):
            object.__setattr__(self, "regions", tuple(
                tuple(r) if isinstance(r, list) else r for r in self.regions))
        if not isinstance(self.regions, tuple) or not all(
                isinstance(r, tuple) and r and all(isinstance(c, str) and c for c in r)
                for r in self.regions):
            raise ConfigError(f"nic.regions must be a list of regions, each a non-empty list "
                              f"of chain names or paths, not {self.regions!r}")
        if isinstance(self.policies, list):
            object.__setattr__(self, "policies", tuple(self.policies))
        known = ("drf", "rr", "drr", "fifo")
        if (not isinstance(self.policies, tuple) or not self.policies
                or any(p not in known for p in self.policies)
                or len(set(self.policies)) != len(self.policies)):
            raise ConfigError(f"nic.policies must be a non-empty list of distinct names from "
                              f"{list(known)}, not {self.policies!r}")
        for name, low, high in (("tenants", 1, 16), ("ports", 1, 4), ("queue_beats", 16, 65536),
                                ("store_beats", 16, 1 << 20), ("region_fifo_beats", 2, 16383),
                                ("stall_cycles", 0, 1 << 24),
                                ("classifier_entries", 1, 256),
                                ("table_size", 1, 256)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise ConfigError(f"nic.{name} must be an integer from {low} to {high}, "
                                  f"not {value!r}")
        header_beats = self.header_bytes // (self.data_width // 8)
        if self.stall_cycles and self.region_fifo_beats < header_beats:
            raise ConfigError(f"nic.region_fifo_beats ({self.region_fifo_beats}) must hold a "
                              f"header-only chain's {header_beats} header beats (the stall "
                              f"watchdog never cuts a header part)")
        if isinstance(self.yieldable, list):
            object.__setattr__(self, "yieldable", tuple(self.yieldable))
        if not (isinstance(self.yieldable, bool) or self.yieldable in YIELDABLE_STATES or (
                isinstance(self.yieldable, tuple) and all(
                    isinstance(r, int) and not isinstance(r, bool)
                    and 0 <= r < max(1, len(self.regions)) for r in self.yieldable))):
            raise ConfigError(f"nic.yieldable must be true, false, \"full\", \"boundary\" or a "
                              f"list of region indices, not {self.yieldable!r}")
        if isinstance(self.links, list):
            object.__setattr__(self, "links", tuple(
                tuple(k) if isinstance(k, list) else k for k in self.links))
        n = len(self.regions)
        if not isinstance(self.links, tuple) or not all(
                isinstance(k, tuple) and len(k) == 2 and all(
                    isinstance(r, int) and not isinstance(r, bool) and 0 <= r < n for r in k)
                and k[0] != k[1] for k in self.links):
            raise ConfigError(f"nic.links must be a list of [primary, branch] pairs of distinct "
                              f"region indices, not {self.links!r}")
        linked = [r for k in self.links for r in k]
        if len(set(linked)) != len(linked):
            raise ConfigError(f"nic.links: a region may be in one link only, not "
                              f"{self.links!r}")
        if self.regions and len(self.regions) > 16:
            raise ConfigError(f"nic.regions must list at most 16 regions, not "
                              f"{len(self.regions)}")
        if not isinstance(self.rack, bool):
            raise ConfigError(f"nic.rack must be true or false, not {self.rack!r}")
        if self.rack and self.ports + 1 > 4:
            raise ConfigError(f"nic.rack adds an ingress port: nic.ports must be at most 3 "
                              f"with it, not {self.ports}")
        if self.table_size & (self.table_size - 1):
            raise ConfigError(f"nic.table_size must be a power of two, not {self.table_size!r}")

    @property
    def yieldable_regions(self):
        """Indices of the regions whose personalities are under the state-yielding transform."""
        if isinstance(self.yieldable, tuple):
            return frozenset(self.yieldable)
        return frozenset(range(len(self.regions))) if self.yieldable else frozenset()

    @property
    def yieldable_state(self):
        """The transform's state port: "full" (every flip-flop; stops at once or at a packet
        boundary) or "boundary" (only the flip-flops live at a drained packet boundary; every
        stop drains to one). ``yieldable = true`` or a list of regions: "boundary"."""
        return self.yieldable if isinstance(self.yieldable, str) else "boundary"

    @property
    def is_nic(self):
        """Whether the top level is the multi-tenant NIC (a ``[nic]`` section with regions)."""
        return bool(self.regions)

    def chain_paths(self):
        """The chain specification files, resolved (see the module docstring)."""
        return self._resolve(self.chains)

    def region_paths(self):
        """Per region, the specification files of its personalities."""
        return [self._resolve(r) for r in self.regions]

    def _resolve(self, names):
        from importlib.resources import files
        shipped = Path(str(files("supernic.chains")))
        out = []
        for name in names:
            # ``name#part``: a part of a split chain (sw/desc/chain.py, split_chain).
            name, hash_, part = name.partition("#")
            candidates = [Path(self.config_dir or ".") / name, shipped / name,
                          shipped / f"{name}.toml"]
            for path in candidates:
                if path.is_file():
                    out.append(Path(f"{path}{hash_}{part}") if part else path)
                    break
            else:
                known = sorted(p.stem for p in shipped.glob("*.toml") if p.stem != "default")
                raise ConfigError(f"chain {name!r} is neither a file nor a shipped chain "
                                  f"(shipped: {', '.join(known)})")
        return out

    @property
    def build_id(self):
        """32-bit identifier of this configuration, readable from the ID register block."""
        fields = asdict(self)
        fields.pop("config_dir")
        for later in ("header_checksum", "rack"):
            if not fields[later]:
                fields.pop(later)           # added later: designs without it keep their IDs
        text = json.dumps(fields, sort_keys=True).encode()
        return int.from_bytes(hashlib.sha256(text).digest()[:4], "big")

    def parser_args(self):
        """The header parser's arguments in this design (hw/parser/parser.py)."""
        return (self.data_width, self.header_bytes, self.walk_steps, self.ext_headers,
                self.header_checksum)

    def with_(self, **changes):
        return DesignConfig(**{**asdict(self), **changes})


_KNOWN = {"design": {"name", "data_width"},
          "parser": {"header_bytes", "walk_steps", "ext_headers", "header_checksum"},
          "chains": {"specs"},
          "nic": {"tenants", "ports", "regions", "queue_beats", "store_beats",
                  "region_fifo_beats", "stall_cycles", "classifier_entries", "table_size",
                  "policies",
                  "yieldable", "links", "rack"}}
_RENAMED = {"specs": "chains"}


def load_config(path):
    path = Path(path)
    raw = read_toml(path, ConfigError, "configuration file")
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
            values[_RENAMED.get(key, key)] = value
    return DesignConfig(**values, config_dir=str(path.parent))


def default_config_path():
    from importlib.resources import files
    return Path(str(files("supernic.chains") / "default.toml"))
