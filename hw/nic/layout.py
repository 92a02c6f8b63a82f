"""The NIC's shape and tag as Amaranth layouts and stream signatures. What they hold is described
in :mod:`supernic.desc.nic.shape`."""

from ...desc.nic.shape import NicShape
from ..parser.meta import layout_of
from ..stream import PacketSignature

__all__ = ["tag_layout", "nic_layout", "NicPacketSignature"]


def tag_layout(shape: NicShape):
    return layout_of(shape.tag_fields())


def nic_layout(shape: NicShape):
    return layout_of(shape.nic_fields())


def NicPacketSignature(shape: NicShape):
    """A packet stream inside the NIC: ``p.meta.hdr`` is the parser's metadata, ``p.meta.tag``
    the NIC tag."""
    return PacketSignature(shape.data_width, nic_layout(shape))
