"""Per-tenant queues and the central scheduler: who gets the NIC's one dispatch path next.

Data path (:class:`~.queues.PortQueues`, one a port, a component with its own contract,
tests/test_port_queues.py). ``P`` ingress ports each take one beat a cycle, always (``ready`` is
tied high): a flooding tenant can fill only its own queues, and what does not fit is dropped and
counted, never back-pressured into a port that other tenants share. Each (port, tenant) pair has
a store-and-forward queue of ``queue_beats`` beats in the port's data memory (one write port a
port, the tenants' queues are partitions of it) and a descriptor FIFO of ``queue_packets``
entries written on a packet's last beat (length in beats and bytes, arrival stamp, flow-table
index, and the slot of its metadata in the port's metadata memory: the metadata is kept once a
packet, taken from its last beat, which carries the tail flags). A packet that does not fit
(beats or descriptor) is dropped whole: its beats were written past the committed write pointer,
which simply does not move. Packets of a disabled tenant are dropped and counted.

Decision pipeline (one decision a cycle):

1. *Candidates* (:class:`~.candidates.Candidates`, a component with its own contract,
   combinational): per tenant, the head packet of one of its port queues whose
   target region (the tenant's flow table at ``flow_hash mod table_size``) is online and has
   room, port chosen round-robin (``fifo``: the tenant's oldest head, room or not), with its
   costs, all from this cycle's descriptor heads, table and region state, so a candidate is
   never stale: a tenant dispatched (or whose table was swapped) on the previous cycle
   competes with the head that is now first (tests/test_candidates.py checks it alone).
2. *Pick* (combinational): enable, hold and commit state are checked against this cycle's
   values, then :class:`~.policy.PolicyPick`, a component with its own contract and state,
   picks by the policy in force (DRF on this cycle's tags, which already hold the previous
   dispatch's cost; tests/test_policy_pick.py checks it against the model alone). A dispatch
   pops the descriptor and reads the packet's metadata.
3. *Transfer* (:class:`~.transfer.Transfer`, a component with its own contract): a two-entry
   queue of dispatched packets feeds a reader that issues one memory read a cycle into a
   two-entry output buffer, so the next packet's first beat follows the current packet's
   last beat without a gap; ``o`` carries the packet with ``tag.beats`` and ``tag.region``
   on every beat and the tail flags on the last beat only (tests/test_transfer.py checks it
   alone).

Measured (64-bit build, ``tests/test_nic_scheduler.py``): 5 cycles from a packet's last beat
entering an empty queue to its first beat on ``o`` (6 with registered candidates); one beat a
cycle out with one-beat packets, of several tenants or of a tenant alone, under every policy
(registered candidates, one cycle old after their tenant's dispatch, gave a lone tenant a
packet every other cycle). The pick's path is longer (descriptor head, table lookup and room
check feed it in the same cycle, where a register used to end stage 1), and the block is
smaller: the default NIC's scheduler alone (512 bits, 4 tenants, 2 ports, 4 regions, table of
16) is 15,266 lines of Verilog against 15,700, and 46,962 Yosys generic cells against 49,102
(``proc; flatten; opt; memory -nomap; techmap; opt``, memories kept whole: 4,981 flip-flop
bits against 5,465: the four 123-bit candidate registers and the pick's second room check are
gone).

Room. A packet may start to region ``r`` if ``beats_to_region + unsent[r] <= region_free[r]``
or the region is empty (``region_empty[r]`` and nothing unsent), where ``unsent[r]`` counts the
region's beats dispatched here but not yet taken from ``o``. ``region_free`` and
``region_empty`` must account for every beat taken from ``o`` up to the previous cycle.

Table changes never reorder a flow: writes go to a shadow table and ``table_commit`` swaps a
tenant's table in only once nothing of that tenant is in flight (dispatched but not reported
done); the tenant is not dispatched while the commit is pending.
"""


from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from ..csr.axil import AxiLiteSignature
from ..csr.regfile import RegisterFile
from ...desc.nic.scheduler import (IN_FLIGHT_BITS, LOAD_BITS, STAMP_BITS, bytes_bits,
                                   deficit_bits, index_bits, is_pow2, scheduler_block,
                                   scheduler_registers)
from ...desc.registers import RegisterMap
from ..csr.block import csr_signature
from ..top import drive_id
from ...desc.blocks import CSR_ADDR_WIDTH, id_block
from ...desc.nic.shape import BEATS_BITS, NicShape
from .layout import NicPacketSignature, nic_layout
from .candidates import Candidates
from .policy import PolicyPick
from .queues import PortQueues
from .transfer import Transfer
from ...desc.nic.scheduler import POLICIES, POLICY_CODES, QUANTUM_BITS

__all__ = ["TenantScheduler", "SchedulerShell", "shell_register_map", "trace_layout"]

def _desc_layout(shape, queue_beats, queue_packets, table_size):
    return data.StructLayout({
        "beats": BEATS_BITS,
        "bytes": bytes_bits(shape, queue_beats),
        "stamp": STAMP_BITS,
        "index": index_bits(table_size),
        "slot": index_bits(queue_packets),
    })


def trace_layout(shape: NicShape, queue_beats=256):
    """What the scheduler decided each cycle, for the model's step-by-step check: the masks
    the pick saw, the pick, and every tenant's candidate."""
    T = shape.tenants
    cand = data.StructLayout({
        "beats": BEATS_BITS, "bytes": bytes_bits(shape, queue_beats),
        "region": shape.region_bits, "to_region": BEATS_BITS,
    })
    return data.StructLayout({
        "valid": 1, "decide": 1, "pick_valid": 1, "pick": shape.tenant_bits,
        "eligible": T, "backlogged": T,
        "cand": data.ArrayLayout(cand, T),
    })


class TenantScheduler(wiring.Component):
    """Per-(port, tenant) queues and the fair scheduler (see the module docstring).

    ``trace`` (a plain signal, not a port) shows each cycle's decision; a test shell routes it
    out for the model check (as ``decision``: a top-level port named ``trace`` clashes with
    the ``trace()`` method of Verilator's model class).
    """

    def __init__(self, shape: NicShape, queue_beats: int = 256, table_size: int = 16,
                 policies=POLICIES, queue_packets: int | None = None):
        if not isinstance(shape, NicShape):
            raise TypeError(f"Scheduler shape must be a NicShape, not {shape!r}")
        if not is_pow2(queue_beats) or not 4 <= queue_beats <= 4096:
            raise ValueError(f"Queue beats must be a power of two from 4 to 4096, "
                             f"not {queue_beats!r}")
        if queue_packets is None:
            queue_packets = max(2, queue_beats // 4)
        if not is_pow2(queue_packets) or not 2 <= queue_packets <= queue_beats:
            raise ValueError(f"Queue packets must be a power of two from 2 to queue beats "
                             f"({queue_beats}), not {queue_packets!r}")
        if not is_pow2(table_size) or table_size > 256:
            raise ValueError(f"Table size must be a power of two from 1 to 256, "
                             f"not {table_size!r}")
        if (isinstance(policies, str) or not hasattr(policies, "__iter__")
                or not policies or any(p not in POLICY_CODES for p in policies)
                or len(set(policies)) != len(tuple(policies))):
            raise ValueError(f"Policies must be a non-empty sequence of distinct names from "
                             f"{POLICIES}, not {policies!r}")
        self.shape = shape
        self.queue_beats = queue_beats
        self.queue_packets = queue_packets
        self.table_size = table_size
        self.policies = tuple(policies)
        self.registers = scheduler_registers(shape, table_size)
        R_ = shape.regions
        super().__init__({
            "i": In(NicPacketSignature(shape)).array(shape.ports),
            "o": Out(NicPacketSignature(shape)),
            "region_free": In(data.ArrayLayout(BEATS_BITS, R_)),
            "region_empty": In(R_),
            "region_online": In(R_),
            "header_only": In(R_),
            "done_valid": In(1),
            "done_tenant": In(shape.tenant_bits),
            # A second completion source: a packet refused after dispatch (the packet store
            # was full); it may coincide with a packet reaching the egress.
            "drop_valid": In(1),
            "drop_tenant": In(shape.tenant_bits),
            "csr": Out(csr_signature(self.registers)),
        })
        self.trace = Signal(trace_layout(shape, queue_beats))

    # ------------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        sh = self.shape
        T, P, NR = sh.tenants, sh.ports, sh.regions
        Q, D, S = self.queue_beats, self.queue_packets, self.table_size
        qbits, dbits = index_bits(Q), index_bits(D)
        pbits, rbits = sh.port_bits, sh.region_bits
        bbits = bytes_bits(sh, Q)
        csr = self.csr
        desc_layout = _desc_layout(sh, Q, D, S)
        codes = {name: POLICY_CODES[name] for name in self.policies}

        now = Signal(STAMP_BITS)
        m.d.sync += now.eq(now + 1)

        enable = Signal(T)
        m.d.comb += enable.eq(csr.tenant_enable)
        # Dispatchable: enabled and not held. A held tenant's packets queue (and are dropped
        # only when its queue is full), as an enabled one's do; none is dispatched.
        dispatchable = Signal(T)
        m.d.comb += dispatchable.eq(enable & ~csr.tenant_hold)

        # --- policy in force --------------------------------------------------------------------
        policy = Signal(2)
        with m.Switch(csr.policy):
            for name, code in codes.items():
                with m.Case(code):
                    m.d.comb += policy.eq(code)
            with m.Default():
                m.d.comb += policy.eq(codes[self.policies[0]])
        fifo_mode = Signal()
        m.d.comb += fifo_mode.eq(policy == POLICY_CODES["fifo"] if "fifo" in codes else 0)

        # --- flow tables: active and shadow, reset to region t mod R ----------------------------
        active = [[Signal(rbits, init=t % NR, name=f"table{t}_{i}") for i in range(S)]
                  for t in range(T)]
        shadow = [[Signal(rbits, init=t % NR, name=f"shadow{t}_{i}") for i in range(S)]
                  for t in range(T)]
        with m.If(csr.table_write):
            for t in range(T):
                for i in range(S):
                    with m.If((csr.table_tenant == t) & (csr.table_index == i)):
                        m.d.sync += shadow[t][i].eq(csr.table_region)

        # --- stage 0: each port's tenant queues (hw/nic/queues.py) ------------------------------
        queues = []
        for p in range(P):
            m.submodules[f"queues_p{p}"] = q = PortQueues(sh, Q, D, S, desc_layout)
            wiring.connect(m, wiring.flipped(self.i[p]), q.i)
            m.d.comb += [q.enable.eq(enable), q.now.eq(now)]
            queues.append(q)
        used = [[q.used[t] for t in range(T)] for q in queues]

        # --- stage 1: one candidate a tenant (hw/nic/candidates.py) ----------------------------
        unsent = [Signal(BEATS_BITS + 2, name=f"unsent_r{r}") for r in range(NR)]
        backlogged = Signal(T)
        m.d.comb += backlogged.eq(Cat(Cat(q.head_valid[t] for q in queues).any()
                                      for t in range(T)))
        m.submodules.candidates = cands = Candidates(sh, desc_layout, S)
        m.d.comb += [cands.online.eq(self.region_online), cands.empty.eq(self.region_empty),
                     cands.header_only.eq(self.header_only), cands.free.eq(self.region_free),
                     cands.fifo_mode.eq(fifo_mode), cands.now.eq(now)]
        for r in range(NR):
            m.d.comb += [cands.unsent[r].eq(unsent[r]),
                         cands.cost[r].eq(getattr(csr, f"r{r}_cost"))]
        for t in range(T):
            for p in range(P):
                m.d.comb += [cands.head_valid[t][p].eq(queues[p].head_valid[t]),
                             cands.head[t][p].eq(queues[p].head[t])]
            for i in range(S):
                m.d.comb += cands.table[t][i].eq(active[t][i])
        cand = [cands.cand[t] for t in range(T)]
        cand_layout = cands.cand_layout

        # --- stage 2: the pick ------------------------------------------------------------------
        pending = Signal(T)
        in_flight = [Signal(IN_FLIGHT_BITS, name=f"in_flight_t{t}") for t in range(T)]
        eligible = Signal(T)
        # A candidate's `valid` already checked room and online against this cycle's values.
        m.d.comb += eligible.eq(Cat(cand[t].valid for t in range(T)) & dispatchable & ~pending)

        decide = Signal()            # the transfer takes another packet (two are held)

        # The policy in force picks among the eligible tenants (hw/nic/policy.py, PolicyPick).
        m.submodules.pick = pol = PolicyPick(T, self.policies, bbits, STAMP_BITS + pbits,
                                             deficit_bits(sh, Q), QUANTUM_BITS)
        m.d.comb += [
            pol.policy.eq(policy), pol.eligible.eq(eligible), pol.decide.eq(decide),
            pol.backlogged.eq(backlogged),
            pol.contenders.eq(Cat(cand[t].head for t in range(T)) & dispatchable & ~pending),
        ]
        for t in range(T):
            m.d.comb += [pol.bytes[t].eq(cand[t].bytes), pol.dom[t].eq(cand[t].dom),
                         pol.key[t].eq(cand[t].key),
                         pol.inv_weight[t].eq(getattr(csr, f"t{t}_inv_weight")),
                         pol.quantum[t].eq(getattr(csr, f"t{t}_quantum"))]
        pick_valid, pick = pol.pick_valid, pol.pick
        m.d.comb += [cands.dispatch.eq(decide & pick_valid), cands.pick.eq(pick)]
        rise, fall = pol.rise, pol.fall

        dispatch = Signal()
        m.d.comb += dispatch.eq(decide & pick_valid)
        # (``decide`` is driven below, from the transfer's ``ready``.)
        picked = Signal(cand_layout)
        m.d.comb += picked.eq(Array(c.as_value() for c in cand)[pick])

        # --- commits and in-flight counts --------------------------------------------------------
        swap = Signal(T)
        for t in range(T):
            m.d.comb += swap[t].eq(pending[t] & (in_flight[t] == 0))
            with m.If(swap[t]):
                m.d.sync += [active[t][i].eq(shadow[t][i]) for i in range(S)]
            dispatched_t = Signal(name=f"dispatched_t{t}")
            done_t = Signal(name=f"done_t{t}")
            drop_t = Signal(name=f"drop_t{t}")
            m.d.comb += [dispatched_t.eq(dispatch & (pick == t)),
                         done_t.eq(self.done_valid & (self.done_tenant == t) & (in_flight[t] > 0)),
                         drop_t.eq(self.drop_valid & (self.drop_tenant == t)
                                   & (in_flight[t] > done_t))]
            m.d.sync += in_flight[t].eq(in_flight[t] + dispatched_t - done_t - drop_t)
        m.d.sync += pending.eq((pending & ~swap) | csr.table_commit)

        # Dispatch: pop the descriptor (the candidates advance the tenant's port pointer).
        for p in range(P):
            for t in range(T):
                m.d.comb += queues[p].pop[t].eq(dispatch & (pick == t) & (picked.port == p))

        # --- transfer: record queue -> reader -> output buffer (hw/nic/transfer.py) ------------
        m.submodules.transfer = xfer = Transfer(sh, qbits, dbits)
        m.d.comb += [
            decide.eq(xfer.ready),
            xfer.push.eq(dispatch),
            xfer.rec.port.eq(picked.port), xfer.rec.tenant.eq(pick), xfer.rec.slot.eq(picked.slot),
            xfer.rec.beats.eq(picked.beats), xfer.rec.region.eq(picked.region),
            xfer.rec.to_region.eq(picked.to_region),
            xfer.rd_ptr.eq(Array(Array(q.rd_ptr) for q in queues)[xfer.cur_port][xfer.cur_tenant]),
        ]
        wiring.connect(m, xfer.o, wiring.flipped(self.o))
        for p, q in enumerate(queues):
            m.d.comb += [
                q.data_addr.eq(xfer.data_addr), q.data_en.eq(xfer.data_en[p]),
                q.meta_addr.eq(xfer.meta_addr), q.meta_en.eq(xfer.meta_en[p]),
                xfer.data[p].eq(q.data), xfer.meta[p].eq(q.meta),
            ]
            for t in range(T):
                reading = Signal(name=f"reading_p{p}_t{t}")
                m.d.comb += [
                    reading.eq(xfer.issue & (xfer.cur_port == p) & (xfer.cur_tenant == t)),
                    q.advance[t].eq(reading),
                    q.release[t].eq(reading & xfer.first),
                ]

        # Unsent region beats: up at dispatch, down as they leave on `o`.
        for r in range(NR):
            up = Signal(BEATS_BITS, name=f"unsent_up_r{r}")
            down = Signal(name=f"unsent_down_r{r}")
            m.d.comb += [
                up.eq(Mux(dispatch & (picked.region == r), picked.to_region, 0)),
                down.eq(xfer.region_beat_taken & (self.o.p.meta.tag.region == r)),
            ]
            m.d.sync += unsent[r].eq(unsent[r] + up - down)

        # --- counters ---------------------------------------------------------------------------
        for t in range(T):
            def add(reg, *events):
                m.d.sync += reg.eq(reg + sum(events))
            add(getattr(csr, f"t{t}_enqueued"), *(q.enqueued[t] for q in queues))
            add(getattr(csr, f"t{t}_queue_drops"), *(q.queue_drop[t] for q in queues))
            add(getattr(csr, f"t{t}_disabled_drops"), *(q.disabled_drop[t] for q in queues))
            with m.If(dispatch & (pick == t)):
                m.d.sync += [
                    getattr(csr, f"t{t}_dispatched").eq(getattr(csr, f"t{t}_dispatched") + 1),
                    getattr(csr, f"t{t}_dispatched_beats").eq(
                        getattr(csr, f"t{t}_dispatched_beats") + picked.beats),
                ]
            m.d.comb += [
                getattr(csr, f"t{t}_backlog_beats").eq(sum(used[p][t] for p in range(P))),
                getattr(csr, f"t{t}_in_flight").eq(in_flight[t]),
                getattr(csr, f"t{t}_tag").eq(pol.tag[t]),
                getattr(csr, f"t{t}_deficit").eq(pol.deficit[t]),
            ]
        m.d.sync += csr.bad_tenant_drops.eq(csr.bad_tenant_drops + sum(q.bad for q in queues))

        # Load per flow-table entry: beats dispatched through each (tenant, entry), so the
        # control plane can move entries between a tenant's instances by their measured load
        # (RSS++, Barbette et al., CoNEXT 2019 §3: flows hash unevenly, buckets can be
        # rebalanced). One read-modify-write a dispatch: read at the dispatch, write the sum
        # a cycle later; the read port is transparent to that write, so back-to-back
        # dispatches through one entry still add up.
        m.submodules.bucket_load = load_mem = Memory(shape=LOAD_BITS, depth=T * S, init=[])
        load_w = load_mem.write_port()
        load_r = load_mem.read_port(transparent_for=(load_w,))
        load_csr = load_mem.read_port()
        load_addr = Signal(range(T * S))
        load_valid = Signal()
        load_at = Signal.like(load_addr)
        load_beats = Signal(BEATS_BITS)
        m.d.comb += [
            load_addr.eq(pick * S + picked.index),
            load_r.addr.eq(load_addr),
            load_w.addr.eq(load_at),
            load_w.data.eq(load_r.data + load_beats),
            load_w.en.eq(load_valid),
            load_csr.addr.eq(csr.bucket_select),
            csr.bucket_beats.eq(load_csr.data),
        ]
        m.d.sync += [load_valid.eq(dispatch), load_at.eq(load_addr),
                     load_beats.eq(picked.beats)]
        m.d.comb += [csr.commit_pending.eq(pending), csr.virtual_time.eq(pol.vtime)]

        # --- trace ------------------------------------------------------------------------------
        tr = self.trace
        m.d.comb += [
            tr.valid.eq((decide & eligible.any()) | rise.any() | fall.any()),
            tr.decide.eq(decide),
            tr.pick_valid.eq(dispatch),
            tr.pick.eq(pick),
            tr.eligible.eq(eligible),
            tr.backlogged.eq(backlogged),
        ]
        for t in range(T):
            m.d.comb += [
                tr.cand[t].beats.eq(cand[t].beats), tr.cand[t].bytes.eq(cand[t].bytes),
                tr.cand[t].region.eq(cand[t].region), tr.cand[t].to_region.eq(cand[t].to_region),
            ]
        return m


# ----------------------------------------------------------------------------------------------
# ----------------------------------------------------------------------------------------------
def shell_register_map(shape: NicShape, table_size=16):
    return RegisterMap([id_block(), scheduler_block("sched", shape, table_size)])


class SchedulerShell(wiring.Component):
    """Test and benchmark shell: ``s_axis{p}`` (NIC layout on ``tuser``) into the scheduler,
    ``m_axis`` out, the region and completion signals as plain ports, the decision ``trace``
    out, and an AXI4-Lite register file with the ``id`` and ``sched`` blocks."""

    def __init__(self, shape: NicShape, queue_beats=256, table_size=16, policies=POLICIES,
                 queue_packets=None):
        self.shape = shape
        self.args = dict(queue_beats=queue_beats, table_size=table_size, policies=policies,
                         queue_packets=queue_packets)
        self.regmap = shell_register_map(shape, table_size)
        user = nic_layout(shape).size
        members = {f"s_axis{p}": In(AxiStreamSignature(shape.data_width, user))
                   for p in range(shape.ports)}
        members.update({
            "m_axis": Out(AxiStreamSignature(shape.data_width, user)),
            "region_free": In(BEATS_BITS * shape.regions),
            "region_empty": In(shape.regions),
            "region_online": In(shape.regions),
            "header_only": In(shape.regions),
            "done_valid": In(1),
            "done_tenant": In(shape.tenant_bits),
            "decision": Out(trace_layout(shape, queue_beats).size),
            "s_axil": In(AxiLiteSignature(CSR_ADDR_WIDTH)),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        sh = self.shape
        layout = nic_layout(sh)
        m.submodules.sched = sched = TenantScheduler(sh, **self.args)
        for p in range(sh.ports):
            rx = AxiStreamToPacket(sh.data_width, layout)
            m.submodules[f"rx{p}"] = rx
            wiring.connect(m, wiring.flipped(getattr(self, f"s_axis{p}")), rx.s_axis)
            wiring.connect(m, rx.o, sched.i[p])
        m.submodules.tx = tx = PacketToAxiStream(sh.data_width, layout)
        wiring.connect(m, sched.o, tx.i)
        wiring.connect(m, tx.m_axis, wiring.flipped(self.m_axis))
        m.submodules.csr = regs = RegisterFile(self.regmap, CSR_ADDR_WIDTH)
        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        wiring.connect(m, regs.fields.sched, sched.csr)
        m.d.comb += [
            sched.region_free.eq(self.region_free),
            sched.region_empty.eq(self.region_empty),
            sched.region_online.eq(self.region_online),
            sched.header_only.eq(self.header_only),
            sched.done_valid.eq(self.done_valid),
            sched.done_tenant.eq(self.done_tenant),
            self.decision.eq(sched.trace.as_value()),
        ]
        drive_id(m, regs, 0, sh.data_width, sh.header_bytes)
        return m
