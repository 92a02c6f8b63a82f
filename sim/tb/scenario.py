"""The NIC test's scenario: one JSON-serialisable object that a test composes from named steps.

    result = run_bench(nic_sim, "random_traffic", NicScenario(
        seed=31, spare_regions=(5,),
        steps=(Migrate(source=3, target=5, at=1 / 6), MoveRegion(at=1 / 3),
               Suspend(regions=(5,), at=1 / 2))), module="supernic.sim.tb.nic_tb")

:func:`supernic.sim.session.run_bench` passes it to the bench as JSON (``SNIC_SCENARIO``);
:mod:`supernic.sim.tb.nic_tb` reads it back with :meth:`NicScenario.from_json` and runs the
steps one after another while traffic flows, each once ``at`` (a fraction) of the input
packets went in and the step before it is done. Every step goes through the driver's control
plane or state port, as on a device.
"""

from dataclasses import asdict, dataclass, field, fields

__all__ = ["NicScenario", "Migrate", "MoveRegion", "Suspend", "Switch", "DrainShared",
           "STEPS"]


@dataclass(frozen=True)
class Migrate:
    """Migrate the instance in region ``source`` live to the free region ``target``
    (``ControlPlane.migrate``)."""
    source: int
    target: int
    at: float = 1 / 6


@dataclass(frozen=True)
class MoveRegion:
    """Scale a tenant with two instances in by one region and scale a tenant whose chain that
    region can also load out to it (``ControlPlane.scale_in`` then ``scale_out``)."""
    at: float = 1 / 3


@dataclass(frozen=True)
class Suspend:
    """Suspend each region, capture, scramble, restore, round-trip its state through the
    chain's Python model, and resume (sw/driver/state.py)."""
    regions: tuple
    at: float = 1 / 2


@dataclass(frozen=True)
class Switch:
    """Switch the time-shared region to ``tenant``'s context (``ControlPlane.switch``)."""
    tenant: int
    at: float


@dataclass(frozen=True)
class DrainShared:
    """Once every packet went in, switch the time-shared region between its tenants until
    neither has packets queued."""
    at: float = 1.0


#: Step name in JSON -> its class.
STEPS = {"migrate": Migrate, "move_region": MoveRegion, "suspend": Suspend, "switch": Switch,
         "drain_shared": DrainShared}
_NAMES = {cls: name for name, cls in STEPS.items()}


@dataclass(frozen=True)
class NicScenario:
    """Traffic and steps of one NIC test run (sim/tb/nic_tb.py).

    ``packets`` frames (``malformed`` a share of them malformed, sizes from the ``sizes``
    mix) over every tenant plus a share with a key nobody owns; the scheduler's ``policy``;
    ``spare_regions`` left free; ``time_share``: a region that a second tenant (the next
    free id, its own key and metering) shares by context switches; ``steps`` run in order."""
    seed: int = 1
    packets: int = 2000
    policy: str = "drf"
    malformed: float = 0.1
    sizes: str = "light"
    spare_regions: tuple = ()
    time_share: int | None = None
    steps: tuple = field(default=())

    def __post_init__(self):
        for step in self.steps:
            if type(step) not in _NAMES:
                raise TypeError(f"A scenario step must be one of {sorted(STEPS)}, not "
                                f"{step!r}")
            if not 0 <= step.at <= 1:
                raise ValueError(f"A step's 'at' is a fraction of the input, not {step.at!r}")

    def to_json(self):
        out = asdict(self)
        out["spare_regions"] = list(self.spare_regions)
        out["steps"] = [{"step": _NAMES[type(s)], **asdict(s)} for s in self.steps]
        return out

    @classmethod
    def from_json(cls, raw):
        raw = dict(raw)
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"Unknown NIC scenario fields {sorted(unknown)}")
        steps = []
        for s in raw.pop("steps", ()):
            s = dict(s)
            kind = STEPS[s.pop("step")]
            if "regions" in s:
                s["regions"] = tuple(s["regions"])
            steps.append(kind(**s))
        raw["spare_regions"] = tuple(raw.get("spare_regions", ()))
        return cls(**raw, steps=tuple(steps))
