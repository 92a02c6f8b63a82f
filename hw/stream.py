"""The packet stream used inside the whole design.

Contract (after `amaranth.lib.stream`):

* A beat transfers on a cycle where ``valid`` and ``ready`` are both high.
* Once ``valid`` is high, the payload holds its value until the beat is taken; ``valid`` never
  waits for ``ready`` (no combinational path from ``ready`` to ``valid``).
* A packet is one or more beats; the last has ``last`` set. Byte ``i`` of a beat is
  ``data[8*i:8*i+8]`` and comes before byte ``i+1`` on the wire (AXI4-Stream byte order).
* ``keep`` marks the bytes that belong to the packet: all ones on every beat but the last, and a
  contiguous run from byte 0 on the last beat. A packet that breaks this rule is still carried
  and counted, and the parser flags it (``keep_error``) on its last beat.
* ``meta`` is sideband metadata (the parser's :class:`~supernic.desc.meta.MetaLayout`, or
  nothing before the parser). It is constant across the beats of a packet, except for fields
  documented as valid with ``last`` only (the tail flags).

AXI4-Stream names (``tdata``, ``tkeep``, ...) appear only in the top-level shell
(:mod:`supernic.hw.axis`).
"""

from amaranth.lib import data, stream

from ..desc.config import check_data_width

__all__ = ["packet_layout", "PacketSignature", "check_data_width"]


def packet_layout(data_width, meta_layout=None):
    """The struct payload of one beat: ``data``, ``keep``, ``last`` and optional ``meta``."""
    check_data_width(data_width)
    fields = {"data": data_width, "keep": data_width // 8, "last": 1}
    if meta_layout is not None:
        fields["meta"] = meta_layout
    return data.StructLayout(fields)


def PacketSignature(data_width, meta_layout=None):
    """A stream signature carrying packets of ``data_width`` bits a beat.

    ``stream.Signature`` is final in Amaranth 0.5, so this is a factory, not a subclass. Two
    signatures built with equal arguments compare equal.
    """
    return stream.Signature(packet_layout(data_width, meta_layout))
