"""The tenant scheduler's stage 1 (hw/nic/scheduler.py): one candidate packet a tenant, from
this cycle's descriptor heads, flow tables and region state.

Contract. Each cycle, per tenant and port, the head descriptor of its queue (``head``, valid in
``head_valid``); per tenant its active flow table (``table``); per region whether it is
``online``, the beats it has ``free``, whether it is ``empty``, whether it takes
``header_only``, the beats dispatched to it not yet sent (``unsent``) and its ``cost``; the
policy's ``fifo_mode`` and the time ``now``. Out comes, combinationally, each tenant's
``cand``: the head of one of its ports whose target region (the table at the flow hash's
index) is online and has room (``valid``), ports taken round-robin (in FIFO mode the tenant's
oldest head, room or not), with its beats, bytes, region, the beats that go to the region
(a header-only region takes ``header_beats``), the DRF dominant cost (supernic.desc.drf),
metadata slot, table index, and its FIFO ``key`` (age, then the lower port); ``head`` says the
tenant has a head at all. ``dispatch`` with ``pick`` moves the picked tenant's port pointer
past the port it was served from.

Room. A packet may start to region ``r`` if ``beats_to_region + unsent[r] <= free[r]`` or the
region is empty (``empty[r]`` and nothing unsent).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ...desc.drf import dominant_cost
from ...desc.nic.scheduler import STAMP_BITS
from ...desc.nic.shape import BEATS_BITS, NicShape
from .policy import round_robin_pick, tournament

__all__ = ["Candidates", "candidate_layout"]


def candidate_layout(shape: NicShape, bytes_bits, slot_bits, index_bits):
    return data.StructLayout({
        "valid": 1, "head": 1, "port": shape.port_bits, "beats": BEATS_BITS, "bytes": bytes_bits,
        "region": shape.region_bits, "to_region": BEATS_BITS, "dom": 32, "slot": slot_bits,
        "key": STAMP_BITS + shape.port_bits, "index": index_bits,
    })


class Candidates(wiring.Component):
    def __init__(self, shape: NicShape, desc_layout, table_size, cost_bits=16):
        self.shape = shape
        self.desc_layout = desc_layout
        self.table_size = table_size
        P, T, NR = shape.ports, shape.tenants, shape.regions
        width = {name: Shape.cast(shape_).width for name, shape_ in desc_layout.members.items()}
        self.cand_layout = candidate_layout(shape, width["bytes"], width["slot"], width["index"])
        super().__init__({
            "head_valid": In(data.ArrayLayout(P, T)),
            "head": In(data.ArrayLayout(data.ArrayLayout(desc_layout, P), T)),
            "table": In(data.ArrayLayout(data.ArrayLayout(shape.region_bits, table_size), T)),
            "online": In(NR), "empty": In(NR), "header_only": In(NR),
            "free": In(data.ArrayLayout(BEATS_BITS, NR)),
            "unsent": In(data.ArrayLayout(BEATS_BITS + 2, NR)),
            "cost": In(data.ArrayLayout(cost_bits, NR)),
            "fifo_mode": In(1), "now": In(STAMP_BITS),
            "dispatch": In(1), "pick": In(range(max(T, 2))),
            "cand": Out(data.ArrayLayout(self.cand_layout, T)),
        })

    def elaborate(self, platform):
        m = Module()
        sh = self.shape
        P, T, NR, S = sh.ports, sh.tenants, sh.regions, self.table_size
        H = max(1, sh.header_beats)
        pbits, rbits = sh.port_bits, sh.region_bits
        desc_layout, cand = self.desc_layout, self.cand
        unsent = [self.unsent[r] for r in range(NR)]
        free = [self.free[r] for r in range(NR)]
        empty_bits = [self.empty[r] for r in range(NR)]
        online_bits = [self.online[r] for r in range(NR)]
        header_bits = [self.header_only[r] for r in range(NR)]
        costs = [self.cost[r] for r in range(NR)]
        now, fifo_mode = self.now, self.fifo_mode

        def room(name, region, to_region):
            ok = Signal(name=name)
            un = Signal(BEATS_BITS + 2, name=f"{name}_unsent")
            m.d.comb += [
                un.eq(Array(unsent)[region]),
                ok.eq(Array(online_bits)[region]
                      & ((to_region + un <= Array(free)[region])
                         | (Array(empty_bits)[region] & (un == 0)))),
            ]
            return ok

        # Combinational, not registered: a registered candidate is one cycle old after its
        # tenant's dispatch (it still shows the popped head), which halved a lone tenant's rate
        # with one-beat packets. Computed from the heads, the table and the region state of the
        # cycle, it is never stale: no skip after a dispatch or a table swap.
        port_ptr = [Signal(pbits, name=f"port_ptr_t{t}") for t in range(T)]
        for t in range(T):
            active = [self.table[t][i] for i in range(S)]
            heads, oks, keys, regions, to_regions = [], [], [], [], []
            for p in range(P):
                h = self.head[t][p]
                region = Signal(rbits, name=f"region_p{p}_t{t}")
                to_region = Signal(BEATS_BITS, name=f"to_region_p{p}_t{t}")
                m.d.comb += [
                    region.eq(Array(active)[h.index] if S > 1 else active[0]),
                    to_region.eq(Mux(Array(header_bits)[region] & (h.beats > H), H, h.beats)),
                ]
                ok = Signal(name=f"ok_p{p}_t{t}")
                m.d.comb += ok.eq(self.head_valid[t][p]
                                  & room(f"room_p{p}_t{t}", region, to_region))
                # Age first, then the lower port on a tie: completion order across ports.
                key = Signal(STAMP_BITS + pbits, name=f"key_p{p}_t{t}")
                m.d.comb += key.eq(Cat(Const(P - 1 - p, pbits), (now - h.stamp)[:STAMP_BITS]))
                heads.append(self.head_valid[t][p])
                oks.append(ok)
                keys.append(key)
                regions.append(region)
                to_regions.append(to_region)
            ok_bits = Signal(P, name=f"ok_t{t}")
            m.d.comb += ok_bits.eq(Cat(oks))
            rr_any, rr_port = round_robin_pick(m, ok_bits, port_ptr[t], P, f"port_rr_t{t}")
            old_any, old_port, _ = tournament(
                m, list(zip(heads, keys)), lambda a, b: a > b, f"port_old_t{t}")
            choice = Signal(range(max(P, 2)), name=f"port_t{t}")
            valid = Signal(name=f"cand_valid_t{t}")
            m.d.comb += [
                choice.eq(Mux(fifo_mode, old_port, rr_port)),
                valid.eq(Mux(fifo_mode, old_any & Array(oks)[old_port], rr_any)),
            ]
            chosen = Signal(desc_layout, name=f"chosen_t{t}")
            m.d.comb += chosen.eq(Array(self.head[t][p] for p in range(P))[choice])
            h = chosen
            c_region = Signal(rbits, name=f"c_region_t{t}")
            c_to = Signal(BEATS_BITS, name=f"c_to_t{t}")
            m.d.comb += [c_region.eq(Array(regions)[choice]), c_to.eq(Array(to_regions)[choice])]
            # Dominant cost in units of 1/(256 R) beat (supernic.desc.drf, the model's formula).
            dom = Signal(32, name=f"dom_t{t}")
            m.d.comb += dom.eq(dominant_cost(h.beats, c_to, Array(costs)[c_region], NR,
                                             larger=lambda a, b: Mux(b > a, b, a)))
            m.d.comb += [
                cand[t].valid.eq(valid),
                cand[t].head.eq(Cat(heads).any()),
                cand[t].port.eq(choice),
                cand[t].beats.eq(h.beats),
                cand[t].bytes.eq(h.bytes),
                cand[t].region.eq(c_region),
                cand[t].to_region.eq(c_to),
                cand[t].dom.eq(dom),
                cand[t].slot.eq(h.slot),
                cand[t].key.eq(Array(keys)[choice]),
                cand[t].index.eq(h.index),
            ]
        # The served tenant's next head is taken from the port after the one it was served from.
        picked_port = Signal(pbits)
        m.d.comb += picked_port.eq(Array(cand[t].port for t in range(T))[self.pick])
        for t in range(T):
            with m.If(self.dispatch & (self.pick == t)):
                m.d.sync += port_ptr[t].eq(Mux(picked_port == P - 1, 0, picked_port + 1))
        return m
