"""Model of the tenant classifier (hw/nic/classifier.py): the entries in order, first match wins.

Deliberately naive: every entry is tried with :meth:`ClassifierEntry.matches` on the parser
model's metadata dict (:mod:`supernic.sim.parser_model`), the first one that matches names the
tenant, and the counters follow the hardware's registers.
"""

from ...desc.nic.classifier import ClassifierConfig, DefaultAction
from ...desc.nic.shape import SEQ_BITS

__all__ = ["ClassifierModel"]


class ClassifierModel:
    """``classify(meta)`` gives the tenant of the next packet on ``port``, or ``None`` when the
    default action drops it; ``tag(meta)`` the whole NIC tag it leaves with."""

    def __init__(self, config: ClassifierConfig, port: int):
        if not isinstance(config, ClassifierConfig):
            raise TypeError(f"Classifier model config must be a ClassifierConfig, "
                            f"not {config!r}")
        self.config = config
        self.port = port
        self.hits = [0] * len(config.entries)
        self.stats = {"packets": 0, "unmatched": 0, "dropped": 0}
        self.next_seq = 0

    def classify(self, meta):
        self.stats["packets"] += 1
        self.next_seq = (self.next_seq + 1) % 2 ** SEQ_BITS
        for index, entry in enumerate(self.config.entries):
            if entry.matches(meta, self.port):
                self.hits[index] += 1
                return entry.tenant
        self.stats["unmatched"] += 1
        if self.config.default_action == DefaultAction.DROP:
            self.stats["dropped"] += 1
            return None
        return self.config.default_tenant

    def tag(self, meta):
        """The tag (as :func:`~supernic.sim.layout_codec.decode` gives it) of the next packet,
        or ``None`` if it is dropped; ``beats`` and ``region`` are set later, by the
        scheduler."""
        seq = self.next_seq
        tenant = self.classify(meta)
        if tenant is None:
            return None
        return {"tenant": tenant, "port": self.port, "seq": seq, "beats": 0, "region": 0}

    def counters(self):
        """Register name -> value the hardware's counters must read."""
        return dict(self.stats)
