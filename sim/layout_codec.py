"""Pack and unpack Amaranth struct layouts as Python ints and nested dicts.

The hardware gives a metadata struct as one flat vector; the models speak nested dicts. Both
directions follow the layout object itself, so the two can never disagree about bit positions.
"""

from amaranth.hdl import Shape
from amaranth.lib import data

__all__ = ["decode", "encode", "zero", "diff"]


def _width(shape):
    return Shape.cast(shape).width


def decode(layout, value):
    """Flat int -> nested dict (struct) / list (array) / int (leaf)."""
    if isinstance(layout, data.StructLayout):
        return {name: decode(f.shape, (value >> f.offset) & ((1 << _width(f.shape)) - 1))
                for name, f in layout}
    if isinstance(layout, data.ArrayLayout):
        w = _width(layout.elem_shape)
        return [decode(layout.elem_shape, (value >> (i * w)) & ((1 << w) - 1))
                for i in range(layout.length)]
    return value


def encode(layout, value):
    """Nested dict / list / int -> flat int; missing struct members count as zero."""
    if isinstance(layout, data.StructLayout):
        out = 0
        for name, f in layout:
            if name in value:
                out |= encode(f.shape, value[name]) << f.offset
        return out
    if isinstance(layout, data.ArrayLayout):
        w = _width(layout.elem_shape)
        return sum(encode(layout.elem_shape, v) << (i * w) for i, v in enumerate(value))
    w = _width(layout)
    if not 0 <= value < (1 << w):
        raise ValueError(f"Value must fit in {w} bits, not {value!r}")
    return value


def zero(layout):
    return decode(layout, 0)


def diff(want, got, path=""):
    """``"field: model 0x.. hw 0x.."`` for every leaf where decoded ``got`` differs from
    ``want`` (nested dicts and lists as :func:`decode` gives them)."""
    out = []
    if isinstance(want, dict):
        for k in want:
            out += diff(want[k], got[k], f"{path}.{k}" if path else k)
    elif isinstance(want, list):
        for i, (a, b) in enumerate(zip(want, got)):
            out += diff(a, b, f"{path}[{i}]")
    elif want != got:
        out.append(f"{path}: model {want:#x} hw {got:#x}")
    return out
