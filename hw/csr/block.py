"""A block's side of its register block: the one way every block (NTs, parsers, the NIC's
scheduler, classifiers, regions, store and egress) exposes its registers, so a top connects
``regfile.fields.<block>`` to ``block.csr`` and maps no register by hand."""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...desc.registers import R

__all__ = ["csr_signature"]


def csr_signature(registers):
    """A block's view of its register block: ``R`` out, ``RW``/``W1P`` in, access strobes
    in."""
    members = {}
    for reg in registers:
        members[reg.name] = Out(reg.width) if reg.access is R else In(reg.width, init=reg.reset)
        if reg.strobe:
            members[reg.strobe_name] = In(1)
    return wiring.Signature(members)
