"""What an NT declares, without its gateware: the description the hardware, its model and the
driver share.

A description is a class (a subclass of :class:`TaskDescription`) whose class attributes say:

* ``kind``: the name chain specifications use (``"acl"``);
* ``scope``: :data:`Scope.HEADER` if it reads and writes only headers inside the parser's
  window (its payload may wait in the packet store), :data:`Scope.PACKET` if it needs the
  whole packet (checksums over the payload, ciphers);
* ``needs_frame``: a header-scope NT that still needs every beat of the frame: it moves the
  bytes behind the header (VLAN push/pop) or counts the frame's bytes (flow monitor). A chain
  runs header-only (its payload waiting in the NIC's packet store) only if every NT is
  header-scope and none needs the frame;
* ``modifies``: whether it may change the packet's bytes (only the primary branch of a fork
  may hold such NTs);
* ``reads_payload`` / ``writes_payload`` / ``seals_payload``: for the chain checks of
  :mod:`supernic.desc.chain` (an NT that reads the payload must not follow one that rewrites
  it; nothing may rewrite the payload after an NT sealed it with checksums);
* ``type_id``, ``version``: its register block header;
* ``params``: build parameters (:class:`Param`), e.g. table sizes;
* ``config``: its run-time configuration class (:class:`TaskConfig`), shared with the model;
* ``model``: ``"module:Class"`` of its Python model in :mod:`supernic.sim.nt`.

Every register block starts with the three standard counters (:data:`STANDARD_REGISTERS`):
``packets`` (packets out), ``dropped`` (packets this NT dropped) and ``skipped``.

The gateware class of an NT (:class:`supernic.hw.nt.task.NetworkTask`) subclasses its
description, so the two cannot disagree; :func:`task_descriptions` finds the descriptions in
this package without loading Amaranth.
"""

import enum
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

from ..config import ConfigError
from ..registers import R, Register, RegisterBlock

__all__ = [
    "Scope", "Param", "TaskConfig", "TaskDescription", "STANDARD_REGISTERS", "csr_item",
    "task_descriptions", "task_description", "block_type_name", "classes_by_kind", "ConfigError",
]


class Scope(enum.Enum):
    HEADER = "header"
    PACKET = "packet"


STANDARD_REGISTERS = (
    Register("packets", 64, R, doc="Packets that left this NT"),
    Register("dropped", 64, R, doc="Packets this NT dropped (marked drop)"),
    Register("skipped", 64, R, doc="Packets passed unchanged: not applicable, error or dropped"),
)


def block_type_name(name):
    """A register block type ID from its four ASCII letters (``"VPSH"``)."""
    assert len(name) == 4
    return int.from_bytes(name.encode(), "big")


@dataclass(frozen=True)
class Param:
    """A build parameter: an integer in ``[low, high]`` (or one of ``choices``)."""
    name: str
    default: Any
    low: int | None = None
    high: int | None = None
    choices: tuple = ()
    power_of_two: bool = False
    doc: str = ""

    def check(self, kind, value):
        where = f"nt {kind}: parameter {self.name}"
        if self.choices:
            if value not in self.choices:
                raise ConfigError(f"{where} must be one of {list(self.choices)}, not {value!r}")
            return value
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{where} must be an integer, not {value!r}")
        if (self.low is not None and value < self.low) or (
                self.high is not None and value > self.high):
            raise ConfigError(f"{where} must be between {self.low} and {self.high}, not {value!r}")
        if self.power_of_two and value & (value - 1):
            raise ConfigError(f"{where} must be a power of two, not {value!r}")
        return value


class TaskConfig:
    """Run-time configuration of an NT: the same object programs the hardware and the model.

    Subclasses implement :meth:`from_dict` (from a chain specification, raising
    :class:`ConfigError` with a message naming the bad entry), :meth:`register_writes` (the
    ordered register writes that load it into the hardware) and :meth:`random` (a random but
    meaningful configuration for tests).
    """

    @classmethod
    def from_dict(cls, kind, params, raw):
        raise NotImplementedError

    def register_writes(self, params):
        """``[(register name, value), ...]`` in the order they must be written."""
        raise NotImplementedError

    @classmethod
    def random(cls, rng, params):
        raise NotImplementedError


def csr_item(register):
    """The state item of an NT register's port: the ``csr`` port's member as Amaranth flattens
    it (``csr__<register>``), where an NT increments a counter in place."""
    return f"csr__{register}"


class TaskDescription:
    """An NT as the control plane and the models know it; see the module's docstring."""
    kind = None
    scope = Scope.HEADER
    needs_frame = False
    modifies = False
    reads_payload = False
    writes_payload = False
    seals_payload = False
    drops = True      # False: the NT never drops a packet (its ``dropped`` register reads 0)
    type_id = None
    version = 0x0001_0000
    params = ()
    config = None
    model = None
    doc = ""

    @classmethod
    def check_params(cls, raw):
        """Validated build parameters with defaults filled in."""
        if not isinstance(raw, dict):
            raise ConfigError(f"nt {cls.kind}: parameters must be a table, not {raw!r}")
        known = {p.name: p for p in cls.params}
        for name in raw:
            if name not in known:
                raise ConfigError(f"nt {cls.kind}: unknown parameter {name!r} "
                                  f"(known: {', '.join(sorted(known)) or 'none'})")
        return {p.name: p.check(cls.kind, raw.get(p.name, p.default)) for p in cls.params}

    @classmethod
    def task_registers(cls, params):
        """The NT's own registers, after the standard counters."""
        return []

    @classmethod
    def registers(cls, params):
        return [*STANDARD_REGISTERS, *cls.task_registers(params)]

    @classmethod
    def cycles_per_beat(cls, data_width, params):
        """Cycles the NT needs per beat at saturation (1.0: line rate), the region-time cost the
        scheduler charges a packet for (SuperNIC §5: NT cycles are a shared resource)."""
        return 1.0

    @classmethod
    def shared_state(cls, params):
        """The state this NT shares with its Python model (sim/nt), by name: role -> the item
        of the NT's state map (hw/transform) that holds it, ``None`` where the hardware keeps
        nothing for it (its register is tied to 0), or a list of items (one per row, stage
        or slot). The model reads and writes a capture only through these roles
        (``TaskModel.hw``), and tests/test_nt_contract.py checks every item is in the NT's
        full state map, so a renamed signal fails there, not in a model. A counter's role is
        its name in the model's ``stats``. Default: the standard counters, each kept in its
        register (``NetworkTask.count_standard``); ``dropped`` is none where the NT never
        drops."""
        return {"packets": csr_item("packets"),
                "dropped": csr_item("dropped") if cls.drops else None,
                "skipped": csr_item("skipped")}

    @classmethod
    def register_block(cls, name, params):
        # ``doc`` (not the class's docstring) names the block, so the gateware class, which
        # subclasses this description with a docstring of its own, gives the same register map.
        return RegisterBlock(name, cls.type_id, cls.version, cls.registers(params), doc=cls.doc)


def classes_by_kind(package, base):
    """Every subclass of ``base`` with a ``kind`` defined in a module of ``package``, by kind
    (found by walking the package: an NT is registered by being written there)."""
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, base)
                    and value.kind and value.__module__ == module.__name__):
                if value.kind in found and found[value.kind] is not value:
                    raise RuntimeError(f"two NTs named {value.kind!r}")
                found[value.kind] = value
    return dict(sorted(found.items()))


def task_descriptions():
    """Every NT description in :mod:`supernic.desc.nt`, by kind."""
    from .. import nt as package
    return classes_by_kind(package, TaskDescription)


def task_description(kind):
    descriptions = task_descriptions()
    if kind not in descriptions:
        raise ConfigError(f"unknown NT {kind!r} (known: {', '.join(descriptions)})")
    return descriptions[kind]
