"""A staged table's row as the gateware reads it from its register port (the table's layout is
described once, in supernic.desc.staged)."""

from amaranth.hdl import Cat

__all__ = ["staged_row"]


def staged_row(csr, table):
    """``{field: value}`` staged for each field of ``table`` (a
    :class:`~supernic.desc.staged.StagedTable`) on the register port ``csr``, in the table's
    field order; a field kept in two registers is joined, low half first."""
    row = {}
    for field in table.fields:
        parts = sorted(table.parts(field), key=lambda part: part[1])
        row[field.name] = (getattr(csr, parts[0][0]) if len(parts) == 1
                           else Cat(*(getattr(csr, reg) for reg, _ in parts)))
    return row
