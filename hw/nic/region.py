"""A region: a slot of the fabric that hosts one chain instance at a time, chosen among the
chain *personalities* it was built with.

On an FPGA a region is a partial-reconfiguration partition; loading another personality
rewrites its bitstream, which takes time during which the region does nothing (SuperNIC,
arXiv 2109.07744 §4.2). Here every personality is built into the region behind one stream
interface and a multiplexer, and loading one is modelled faithfully in time:

1. software writes ``load_index`` and strobes ``load``; the region goes offline at once
   (``online`` falls, so the scheduler holds the region's work in the tenant queues or, if the
   control plane re-pointed the tenant's table, steers it to another instance) and stops
   taking new packets;
2. it waits until the packets inside have left (a personality must not be swapped under
   them);
3. it stays offline for ``reconfig_cycles`` (the modelled bitstream load), then switches to
   the new personality and comes back online.

Each personality is a :class:`Personality`: the chain behind the region's stream interface
(``i``, ``o``) with its NTs' register ports as ports of its own, so the generator can also emit
each one as a stand-alone module (``snic build`` writes ``<design>_personality_<chain>.v``),
which a vendor partial-reconfiguration flow takes as the reconfigurable modules of the
partition.

Register block 'REGN' per region, then one block per NT of each personality, named
``r<region>_<chain>_<node>``.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..chain.graph import TaskGraph
from ...desc.nic.region import personality_block_name, region_block
from ..csr.block import csr_signature
from ..parser.meta import meta_layout
from ..stream import PacketSignature
from ..separate import separate
from ..transform import Yieldable
from ...desc.nic.shape import NicShape

__all__ = ["Region", "Personality"]

class Personality(wiring.Component):
    """A chain behind the common region interface: ``i``, ``o`` and, per NT, a port named
    after the node carrying its register block (as the NT sees it)."""

    def __init__(self, shape: NicShape, spec):
        self.spec = spec
        self.graph = TaskGraph(spec, shape.data_width, shape.header_bytes)
        sig = PacketSignature(shape.data_width, meta_layout(shape.header_bytes))
        members = {"i": In(sig), "o": Out(sig)}
        for name, task in self.graph.tasks.items():
            members[f"csr_{name}"] = Out(task.csr.signature)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.graph = self.graph
        wiring.connect(m, wiring.flipped(self.i), self.graph.i)
        wiring.connect(m, self.graph.o, wiring.flipped(self.o))
        for name, task in self.graph.tasks.items():
            wiring.connect(m, wiring.flipped(getattr(self, f"csr_{name}")), task.csr)
        return m


class Region(wiring.Component):
    """Region ``index`` of a NIC of ``shape``, able to host any of ``personalities``
    (:class:`~supernic.desc.chain.ChainSpec`); the first is loaded at reset."""

    def __init__(self, shape: NicShape, index, personalities, yieldable=False,
                 link_branch=None):
        if not personalities:
            raise ValueError(f"Region {index} must have at least one personality, not "
                             f"{personalities!r}")
        if len(personalities) > 255:
            raise ValueError(f"Region {index} must have at most 255 personalities, not "
                             f"{len(personalities)}")
        self.shape = shape
        self.index = index
        self.personalities = list(personalities)
        self.chains = [Personality(shape, spec) for spec in self.personalities]
        # Under the transform each personality is wrapped; the wrapper has the same ports.
        self.yieldable = yieldable
        # yieldable: False, True (the boundary state port) or a mode ("full", "boundary").
        state = yieldable if isinstance(yieldable, str) else "boundary"
        self.graphs = ([Yieldable(c, state=state) for c in self.chains] if yieldable
                       else self.chains)
        self.link_branch = link_branch
        self.block = region_block(index, self.personalities, yieldable, link_branch)
        sig = PacketSignature(shape.data_width, meta_layout(shape.header_bytes))
        members = {
            "i": In(sig), "o": Out(sig),
            "csr": Out(csr_signature(self.block.registers)),
            "online": Out(1), "header_only": Out(1),
            # What the scheduler dispatches on: online, and not asked to stop.
            "taking": Out(1),
        }
        if link_branch is not None:
            members.update({"link_request": Out(1), "linked": In(1)})
        super().__init__(members)

    def task_ports(self):
        """``(block name, register port)`` of every NT, for connecting the register file."""
        for spec, chain, graph in zip(self.personalities, self.chains, self.graphs):
            for name in chain.graph.tasks:
                yield (personality_block_name(self.index, spec.name, name),
                       getattr(graph, f"csr_{name}"))

    def elaborate(self, platform):
        m = Module()
        csr = self.csr
        n = len(self.personalities)
        active = Signal(range(max(2, n)))
        online = Signal(init=1)
        state = self.yieldable if isinstance(self.yieldable, str) else "boundary"
        for k, (spec, graph) in enumerate(zip(self.personalities, self.graphs)):
            # A personality is the same circuit in every region that holds it (the shape is
            # the NIC's): its Verilog module is converted once (hw/separate.py).
            key = ("personality", self.shape, spec.source, spec.name,
                   state if self.yieldable else None)
            m.submodules[f"p{k}_{spec.name}"] = separate(
                graph, key, f"{spec.name}_{state}" if self.yieldable else spec.name)

        # Packets inside: a load waits for zero before the personality may change.
        inside = Signal(16)
        took = self.i.valid & self.i.ready & self.i.p.last
        gave = self.o.valid & self.o.ready & self.o.p.last
        m.d.sync += inside.eq(inside + took - gave)
        with m.If(took):
            m.d.sync += csr.packets_in.eq(csr.packets_in + 1)
        with m.If(gave):
            m.d.sync += csr.packets_out.eq(csr.packets_out + 1)

        # Accept new packets only online; a packet already half in finishes entering.
        mid_in = Signal()
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += mid_in.eq(~self.i.p.last)
        accepting = Signal()
        m.d.comb += accepting.eq(online | mid_in)

        # An injected stall (``inject_stall``) stops the chain as a hung NT would, mid-packet
        # or not, without taking it offline; a beat already offered still waits to be taken
        # (the stream contract: valid holds until taken).
        offered = Signal()   # a beat was offered on ``o`` last cycle and not taken
        m.d.sync += offered.eq(self.o.valid & ~self.o.ready)
        moving_in, moving_out = Signal(), Signal()
        m.d.comb += [moving_in.eq(accepting & ~csr.inject_stall),
                     moving_out.eq(~csr.inject_stall | offered)]
        for k, graph in enumerate(self.graphs):
            with m.If(active == k):
                m.d.comb += [
                    graph.i.p.eq(self.i.p),
                    graph.i.valid.eq(self.i.valid & moving_in),
                    self.i.ready.eq(graph.i.ready & moving_in),
                    self.o.p.eq(graph.o.p),
                    self.o.valid.eq(graph.o.valid & moving_out),
                    graph.o.ready.eq(self.o.ready & moving_out),
                ]

        # A region asked to stop (``snic suspend``, a migration, a context switch) gets no
        # new packet: one dispatched now could stop half-way into the stopped chain, and a
        # packet longer than the region's buffer in the store (admitted into an empty region)
        # would then hold the store's input, which every tenant shares (measured: a suspended
        # region stopped all four tenants, tools/hostile.py).
        asked_to_stop = Signal()
        if self.yieldable:
            self._state_port(m)
            m.d.comb += asked_to_stop.eq(self.csr.state_stop & (self.csr.state_select == active))
        m.d.comb += self.taking.eq(online & ~asked_to_stop)

        header_only = [spec.header_only for spec in self.personalities]
        with m.Switch(active):
            for k, flag in enumerate(header_only):
                with m.Case(k):
                    m.d.comb += self.header_only.eq(int(flag))

        target = Signal.like(active)
        timer = Signal(32)
        with m.FSM(name="load"):
            with m.State("ONLINE"):
                with m.If(csr.load):
                    m.d.sync += [online.eq(0), target.eq(csr.load_index)]
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                with m.If((inside == 0) & ~mid_in):
                    m.d.sync += timer.eq(csr.reconfig_cycles)
                    m.next = "LOAD"
            with m.State("LOAD"):
                with m.If(timer == 0):
                    # An index past the last personality keeps the current one: the driver
                    # checks first, the hardware must still never select nothing.
                    with m.If(target < n):
                        m.d.sync += active.eq(target)
                    m.d.sync += [online.eq(1), csr.loads.eq(csr.loads + 1)]
                    m.next = "ONLINE"
                with m.Else():
                    m.d.sync += timer.eq(timer - 1)
        with m.If(~online):
            m.d.sync += csr.offline_cycles.eq(csr.offline_cycles + 1)
        if self.link_branch is not None:
            m.d.comb += [self.link_request.eq(csr.link), csr.linked.eq(self.linked),
                         csr.link_branch.eq(self.link_branch)]
        m.d.comb += [
            self.online.eq(online),
            csr.online.eq(online),
            csr.active.eq(active),
            csr.personalities.eq(n),
            csr.header_only.eq(self.header_only),
        ]
        return m

    def _state_port(self, m):
        """The state registers onto the selected personality's ``yld`` port."""
        csr = self.csr
        for k, graph in enumerate(self.graphs):
            mine = csr.state_select == k
            m.d.comb += [
                graph.yld.stop.eq(csr.state_stop & mine),
                graph.yld.at_boundary.eq(csr.state_at_boundary),
                graph.yld.addr.eq(csr.state_addr),
                graph.yld.seek.eq(csr.state_addr_stb & mine),
                graph.yld.next.eq(csr.state_rdata_stb & mine),
                graph.yld.write.eq(csr.state_wdata_stb & mine),
                graph.yld.wdata.eq(csr.state_wdata),
            ]
            with m.If(mine):
                m.d.comb += [csr.state_stopped.eq(graph.yld.stopped),
                             csr.state_trapped.eq(graph.yld.trapped),
                             csr.state_rdata.eq(graph.yld.rdata)]
