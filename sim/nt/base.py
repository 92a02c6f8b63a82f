"""The common part of every NT model: the contract's skip rule and the standard counters.

A model's ``process(frame, meta)`` takes a frame and the metadata of its last beat (the dict of
:func:`~supernic.sim.layout_codec.decode`, tail flags included) and returns the frame and
metadata that leave the NT. Subclasses implement ``apply``, which returns the new
``(frame, meta)`` (setting ``meta["drop"]`` to drop), or ``None`` when the packet is not one the
NT handles (it is then skipped). ``counters()`` returns what the NT's ``R`` registers must read.
"""

import copy
import importlib

from ...desc.errors import SnicError
from ...desc.nt.base import task_descriptions
from ..traffic import build, random_packets, random_spec

__all__ = ["TaskModel", "StateBridgeError", "SKIP_FLAGS", "skips", "exact_size_frames",
           "light_frames",
           "LIGHT_MIX", "KEPT_FIELDS", "contract_differences"]

#: Parse errors known on the first beat; a packet with one of them is passed unchanged.
SKIP_FLAGS = ("truncated", "malformed", "runt")


def model_class(task):
    """The Python model class of an NT (``task.model`` is ``"module:Class"`` in this package)."""
    module, _, name = task.model.partition(":")
    return getattr(importlib.import_module(f"supernic.sim.nt.{module}"), name)


def skips(meta):
    return bool(meta["drop"]) or any(meta["flags"][f] for f in SKIP_FLAGS)


def exact_size_frames(rng, n, size, kinds=("ipv4_udp", "ipv4_tcp", "ipv6_udp"), **kw):
    """``n`` valid frames of exactly ``size`` bytes (long options can outgrow small sizes)."""
    frames = []
    while len(frames) < n:
        frame = build(random_spec(rng, size=size, kinds=kinds, **kw), rng)
        if len(frame) == size:
            frames.append(frame)
    return frames


#: Contract rule 4: metadata fields an NT keeps from ingress and never recomputes.
KEPT_FIELDS = ("flow_hash", "ts", "drop", "mark")


def contract_differences(parser, out_frame, out_meta):
    """Contract rule 4: the metadata fields (tail flags and :data:`KEPT_FIELDS` aside) where
    an NT's output metadata differs from what ``parser`` finds in the frame that left."""
    from ...desc.meta import TAIL_FLAGS
    parsed = parser.parse(out_frame)
    wrong = []
    for key, want in parsed.items():
        if key in KEPT_FIELDS:
            continue
        if key == "flags":
            wrong += [f for f, v in want.items()
                      if f not in TAIL_FLAGS and out_meta["flags"][f] != v]
        elif out_meta[key] != want:
            wrong.append(key)
    return wrong


#: A lighter size mix than "mixed": 90% up to 256 bytes, 9% up to 1500, 1% jumbo up to 9000,
#: so 10,000 packets at 64 bits stay quick while large frames are still covered.
LIGHT_MIX = (((60, 256), 0.90), ((257, 1500), 0.09), ((1501, 9000), 0.01))


def light_frames(rng, n, malformed, **kw):
    """``n`` random frames (``malformed`` of them broken) from :data:`LIGHT_MIX`, shuffled;
    ``kw`` go to :func:`~supernic.sim.traffic.random_packets`."""
    frames = []
    counts = [round(n * share) for _, share in LIGHT_MIX[1:]]
    counts.insert(0, n - sum(counts))
    for (dist, _), count in zip(LIGHT_MIX, counts):
        frames += [f for _, f in random_packets(count, rng.randrange(2 ** 32), dist, malformed,
                                                **kw)]
    rng.shuffle(frames)
    return frames


class TaskModel:
    #: The NT's :class:`~supernic.hw.nt.task.TaskConfig` subclass.
    config_class = None

    def __init__(self, params, data_width=512, header_bytes=256):
        self.params = dict(params)
        self.data_width = data_width
        self.header_bytes = header_bytes
        self.stats = {"packets": 0, "dropped": 0, "skipped": 0}
        self.config = None

    def configure(self, config):
        self.config = config

    def apply(self, frame, meta):
        raise NotImplementedError

    def process(self, frame, meta):
        meta = copy.deepcopy(meta)
        self.stats["packets"] += 1
        result = None if skips(meta) else self.apply(frame, meta)
        if result is None:
            self.stats["skipped"] += 1
            return frame, meta
        frame, meta = result
        if meta["drop"]:
            self.stats["dropped"] += 1
        return frame, meta

    def test_case(self, rng, n, malformed):
        """A random configuration and ``n`` frames (``malformed`` of them broken) for the
        random-traffic bench. Override to aim traffic at the configuration (rules that match)."""
        config = self.config_class.random(rng, self.params)
        frames = [f for _, f in random_packets(n, rng.randrange(2 ** 32), "mixed", malformed)]
        return config, frames

    def saturation_case(self, rng, n, size):
        """A configuration and ``n`` valid frames of ``size`` bytes the NT applies to."""
        return self.config_class.random(rng, self.params), exact_size_frames(rng, n, size)

    def counters(self):
        """Register name -> value the hardware must report."""
        return dict(self.stats)

    # --- moving state between the hardware and the model (hw/transform) -------------------------
    @classmethod
    def description(cls):
        """The NT description (supernic.desc.nt) whose ``model`` names this class."""
        name = f"{cls.__module__.rpartition('.')[2]}:{cls.__name__}"
        found = [d for d in task_descriptions().values() if d.model == name]
        if not found:
            raise StateBridgeError(f"{cls.__name__} has no mapping between the hardware's state "
                                   f"map and the model's state (no NT description names it as "
                                   f"its model)")
        return found[0]

    def hw(self, role):
        """The state item(s) of the hardware holding ``role``, as the NT's description
        declares them (``TaskDescription.shared_state``): a capture is read and written only
        through these, never by a signal's spelling."""
        if not hasattr(self, "_shared"):
            self._shared = self.description().shared_state(self.params)
        try:
            return self._shared[role]
        except KeyError:
            raise StateBridgeError(f"{type(self).__name__}: the NT declares no shared state "
                                   f"{role!r}") from None

    def load_hw_state(self, values):
        """Take over the state of this NT's hardware, stopped at a packet boundary (its
        pipeline empty): ``values`` is the state map's decode of a capture
        (:meth:`~supernic.desc.statemap.StateMap.decode`). The model, configured as
        the hardware is, then goes on as the hardware would have: same outputs, counters and
        tables."""
        for name in self.stats:
            item = self.hw(name)
            self.stats[name] = 0 if item is None else values[item]
        self.load_hw_tables(values)

    def store_hw_state(self, values):
        """The reverse of :meth:`load_hw_state`: write the model's counters and tables into
        ``values`` (a decode of the stopped hardware's capture, whose other items, the empty
        pipeline, stay as they are); :meth:`StateMap.encode` gives the words to restore."""
        for name in self.stats:
            item = self.hw(name)
            if item is None:
                if self.stats[name]:
                    raise StateBridgeError(
                        f"{type(self).__name__}: counter {name!r} is {self.stats[name]}, but "
                        f"the hardware keeps no state for it (its register reads 0)")
            else:
                values[item] = self.stats[name]
        self.store_hw_tables(values)

    def load_hw_tables(self, values):
        """Per NT: the tables and other state beyond the counters (none by default)."""

    def store_hw_tables(self, values):
        """Per NT: the reverse of :meth:`load_hw_tables`."""


class StateBridgeError(SnicError, ValueError):
    """A state cannot move between an NT's hardware and its model."""

