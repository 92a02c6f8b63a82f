"""Blocks own their registers (issue 20, item 2): every block exposes its register block the
same way, as a ``csr`` port of ``csr_signature(<its block>.registers)``, and a top connects
``regfile.fields.<block>`` to it whole. A top drives by hand only the constant blocks it owns
itself (``id``, and the NIC's ``nic`` shape).

Checked on the source (any ``csr.field(...)`` in a top names one of those constant blocks) and
on the components (the store, egress, chain egress and parser expose exactly their block's
registers, so nothing is left for a top to map)."""

import ast
from pathlib import Path

import pytest
from amaranth.lib import wiring

from supernic.desc.blocks import chain_block, parser_block
from supernic.desc.nic.blocks import egress_block, store_block
from supernic.desc.nic.shape import NicShape
from supernic.hw.chain.discard import DropStage
from supernic.hw.csr.block import csr_signature
from supernic.hw.nic.egress import EgressStage
from supernic.hw.nic.store import PacketStore
from supernic.hw.parser.meta import meta_layout
from supernic.hw.parser.parser import HeaderParser

ROOT = Path(__file__).resolve().parents[1]
TOPS = ["hw/top.py", "hw/nic/top.py", "hw/chain/top.py"]
CONSTANT_BLOCKS = {"id", "nic"}


def hand_mapped(path):
    """``[(block, register)]`` of every ``<x>.field(block, register)`` call in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "field" and node.args:
            first = node.args[0]
            name = first.value if isinstance(first, ast.Constant) else ast.unparse(first)
            out.append(name)
    return out


@pytest.mark.parametrize("top", TOPS)
def test_tops_map_only_their_constant_blocks_by_hand(top):
    mapped = hand_mapped(ROOT / top)
    assert set(mapped) <= CONSTANT_BLOCKS, f"{top} maps {sorted(set(mapped))} by hand"


def test_the_check_finds_a_hand_mapped_counter(tmp_path):
    bad = tmp_path / "top.py"
    bad.write_text('m.d.comb += csr.field("store", "drops").eq(store.drops)\n'
                   'm.d.comb += csr.field(f"parser{p}", "bytes").eq(parser.bytes)\n')
    assert set(hand_mapped(bad)) - CONSTANT_BLOCKS == {"store", "f'parser{p}'"}


SHAPE = NicShape(64, 64, 2, 2, 3)


@pytest.mark.parametrize("component,block", [
    (lambda: PacketStore(SHAPE, 256, 64), lambda: store_block(SHAPE)),
    (lambda: EgressStage(SHAPE), lambda: egress_block(SHAPE)),
    (lambda: DropStage(64, meta_layout(64)), chain_block),
    (lambda: HeaderParser(64, 64), parser_block),
], ids=["store", "egress", "chain_egress", "parser"])
def test_blocks_expose_exactly_their_registers(component, block):
    port = component().signature.members["csr"]
    assert port.flow is wiring.Out
    assert port.signature == csr_signature(block().registers)
