"""The parser's metadata as Amaranth layouts: the struct that travels beside every beat of a
packet. What the fields mean, and the flags, kinds and constants, are described in
:mod:`supernic.desc.meta`."""

from amaranth.lib import data

from ...desc.meta import FLAGS, FLOW_FIELDS, meta_fields

__all__ = ["flags_layout", "flow_layout", "meta_layout", "layout_of"]


def layout_of(shape):
    """The Amaranth layout of a layout description (:func:`supernic.desc.meta.meta_fields`)."""
    if isinstance(shape, dict):
        return data.StructLayout({name: layout_of(s) for name, s in shape.items()})
    if isinstance(shape, tuple):
        elem, count = shape
        return data.ArrayLayout(layout_of(elem), count)
    return shape


def flags_layout():
    return layout_of({name: 1 for name in FLAGS})


def flow_layout():
    return layout_of(FLOW_FIELDS)


def meta_layout(header_bytes):
    return layout_of(meta_fields(header_bytes))
