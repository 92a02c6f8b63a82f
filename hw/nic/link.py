"""A link between two regions: a DAG's branches in two regions at the same time.

A chain whose DAG ends in a fork splits into two personalities (sw/desc/chain.py,
``split_chain``): *primary* (the nodes before the fork, then the primary branch) and
*branches* (the nodes before the fork, then the secondary branches). With the link on, the
packet store's traffic for the primary region ``A`` goes through a fork to both ``A`` and the
branch region ``B``, and their outputs meet in a join before the store takes them back as
``A``'s: ``A``'s packet leaves with ``B``'s drop and mark verdicts OR-ed in, exactly what
the join inside one region does for the whole chain (SuperNIC, arXiv 2109.07744 §4: a DAG's
independent branches run in parallel regions and their results join before egress). The
fork and join are the chain builder's own (hw/chain/fork.py, join.py): every beat reaches
both regions, the join pairs packets by position, so order is kept.

With the link off both regions are connected to the store as usual. The link register is a
request: it takes effect only while neither region holds a packet (``idle``: nothing in
either region's store queues or inside ``B``), so no packet is ever split between the two
wirings. While linked, ``B`` reads offline to the scheduler (``b_online`` is 0) and its own
store port is closed; the store counts the pair's packets as ``A``'s.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..chain.fork import PacketFork
from ..chain.join import PacketJoin
from ..parser.meta import meta_layout
from ..stream import PacketSignature
from ...desc.nic.shape import NicShape

__all__ = ["RegionLink", "LINK_PRIMARY_DEPTH"]

#: Beats of ``A``'s output the join holds while ``B`` decides (hw/chain/join.py): the two
#: regions run the same nodes before the fork, so their latencies differ by the branches'.
LINK_PRIMARY_DEPTH = 32


class RegionLink(wiring.Component):
    """Ports: ``store_a``/``store_b`` face the packet store's ``to_region``/``from_region`` of
    the two regions (``*_in`` from the store, ``*_out`` back to it), ``region_a``/``region_b``
    face the regions (``*_i`` into the region, ``*_o`` out of it)."""

    def __init__(self, shape: NicShape, primary_depth=LINK_PRIMARY_DEPTH):
        self.shape = shape
        self.primary_depth = primary_depth
        sig = PacketSignature(shape.data_width, meta_layout(shape.header_bytes))
        super().__init__({
            "store_a_in": In(sig), "store_a_out": Out(sig),
            "store_b_in": In(sig), "store_b_out": Out(sig),
            "region_a_i": Out(sig), "region_a_o": In(sig),
            "region_b_i": Out(sig), "region_b_o": In(sig),
            "request": In(1),        # the link register
            "idle": In(1),           # neither region has packets in the store's queues
            "b_online_in": In(1),
            "b_online": Out(1),      # B as the scheduler sees it
            "linked": Out(1),        # the link in effect
        })

    def elaborate(self, platform):
        m = Module()
        shape = self.shape
        m.submodules.fork = fork = PacketFork(shape.data_width, meta_layout(shape.header_bytes), 2)
        m.submodules.join = join = PacketJoin(shape.data_width, meta_layout(shape.header_bytes), 2,
                                              primary=0, primary_depth=self.primary_depth)
        linked = Signal()
        ports = [self.store_a_in, self.store_a_out, self.store_b_in, self.store_b_out,
                 self.region_a_i, self.region_a_o, self.region_b_i, self.region_b_o]
        # A port is mid-packet from its first beat to its last. The store's in-flight counts
        # (``idle``) are not enough: the join lets A's packet out as soon as B's first beat
        # gave its verdict, so the store can have A's packet back while the fork still owes B
        # the packet's last beats (the store's last beat not yet retired) and B is still
        # sending its copy to the join. Switching then would hand B's tail to the store as a
        # packet never dispatched (found by the formal proof, hw/formal/properties.py).
        mid = Signal(len(ports))
        for k, port in enumerate(ports):
            with m.If(port.valid & port.ready):
                m.d.sync += mid[k].eq(~port.p.last)
        # Packets inside B while linked, from their first beat in to their last beat out.
        b_inside = Signal(16)
        b_began = self.region_b_i.valid & self.region_b_i.ready & ~mid[6]
        b_gave = self.region_b_o.valid & self.region_b_o.ready & self.region_b_o.p.last
        with m.If(linked):
            m.d.sync += b_inside.eq(b_inside + b_began - b_gave)
        with m.If(self.idle & (b_inside == 0) & ~mid.any()):
            m.d.sync += linked.eq(self.request)
        m.d.comb += [self.linked.eq(linked), self.b_online.eq(self.b_online_in & ~linked)]

        def connect(m, source, sink):
            m.d.comb += [sink.valid.eq(source.valid), sink.p.eq(source.p),
                         source.ready.eq(sink.ready)]

        with m.If(linked):
            connect(m, self.store_a_in, fork.i)
            connect(m, fork.o0, self.region_a_i)
            connect(m, fork.o1, self.region_b_i)
            connect(m, self.region_a_o, join.i0)
            connect(m, self.region_b_o, join.i1)
            connect(m, join.o, self.store_a_out)
            # B's own store port stays closed (its queue is empty and the scheduler sees B
            # offline, so nothing is dispatched to it).
        with m.Else():
            connect(m, self.store_a_in, self.region_a_i)
            connect(m, self.region_a_o, self.store_a_out)
            connect(m, self.store_b_in, self.region_b_i)
            connect(m, self.region_b_o, self.store_b_out)
        return m
