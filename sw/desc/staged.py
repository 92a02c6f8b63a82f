"""Staged tables: a table that software fills one row at a time through registers. The row's
fields sit in staging registers (``<prefix>_<field>``; a field wider than 64 bits as
``_hi``/``_lo`` halves), one or more selectors name the slot (``<prefix>_index``), and a
write strobe (``<prefix>_write``, W1P) copies the staged row into it.

One :class:`StagedTable` gives all three sides from one layout: the registers of the block
(:meth:`StagedTable.registers`), the writes that program a row (:meth:`StagedTable.row_writes`,
what a configuration's ``register_writes`` returns), and, in gateware, the staged row read back
from the register port (``supernic.hw.csr.staged.staged_row``). Used by the ACL's rules, the
NAT's slots, the rate limiter's buckets and classes, and the NIC classifier's entries.
"""

from dataclasses import dataclass

from .registers import RW, W1P, Register

__all__ = ["Field", "StagedTable"]

#: Widest register: wider fields are split into two.
WORD_LIMIT = 64


@dataclass(frozen=True)
class Field:
    name: str
    width: int
    doc: str = ""


@dataclass(frozen=True)
class StagedTable:
    """``prefix``: the registers' common prefix; ``fields``: the row, in register order;
    ``selectors``: the registers naming the slot (:class:`Field`, their full names), in order;
    ``write_doc``: the strobe's documentation; ``selectors_first``: the selectors come before
    the fields (in the registers and in a row's writes). The strobe comes last."""
    prefix: str
    fields: tuple
    selectors: tuple
    write_doc: str
    selectors_first: bool = False

    @property
    def strobe(self):
        return f"{self.prefix}_write"

    def parts(self, field):
        """``[(register, low bit)]`` holding ``field``: itself, or its ``_hi`` then ``_lo``
        halves."""
        base = f"{self.prefix}_{field.name}"
        if field.width <= WORD_LIMIT:
            return [(base, 0)]
        return [(f"{base}_hi", WORD_LIMIT), (f"{base}_lo", 0)]

    def _field_registers(self):
        regs = []
        for f in self.fields:
            if f.width <= WORD_LIMIT:
                regs.append(Register(f"{self.prefix}_{f.name}", f.width, RW, doc=f.doc))
            else:
                regs += [Register(f"{self.prefix}_{f.name}_hi", f.width - WORD_LIMIT, RW,
                                  doc=f"{f.doc} bits {f.width - 1}:{WORD_LIMIT}"),
                         Register(f"{self.prefix}_{f.name}_lo", WORD_LIMIT, RW,
                                  doc=f"{f.doc} bits {WORD_LIMIT - 1}:0")]
        return regs

    def registers(self):
        selectors = [Register(s.name, s.width, RW, doc=s.doc) for s in self.selectors]
        fields = self._field_registers()
        ordered = selectors + fields if self.selectors_first else fields + selectors
        return ordered + [Register(self.strobe, 1, W1P, doc=self.write_doc)]

    def row_writes(self, values, **selectors):
        """``[(register, value)]`` programming one row: the fields given in ``values`` (by
        field name; a field left out keeps its staged value), the ``selectors`` (by register
        name), then the strobe."""
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise KeyError(f"{self.prefix}: no fields {sorted(unknown)}")
        if set(selectors) != {s.name for s in self.selectors}:
            raise KeyError(f"{self.prefix}: the selectors are "
                           f"{[s.name for s in self.selectors]}, not {sorted(selectors)}")
        fields = []
        for f in self.fields:
            if f.name in values:
                fields += [(reg, values[f.name] >> low & (2 ** WORD_LIMIT - 1)
                            if f.width > WORD_LIMIT else values[f.name])
                           for reg, low in self.parts(f)]
        chosen = [(s.name, selectors[s.name]) for s in self.selectors]
        ordered = chosen + fields if self.selectors_first else fields + chosen
        return ordered + [(self.strobe, 1)]
