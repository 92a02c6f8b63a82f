"""The state-yielding transform: any Amaranth component, as written, made able to yield.

``Yieldable(component)`` has the component's own ports plus ``yld``
(:func:`YieldSignature`):

* **Stop and resume.** Hold ``stop`` high to stop. With ``at_boundary`` low the component
  freezes at once: it completes the current cycle and ``stopped`` rises on the next (stop
  latency 1 cycle). With ``at_boundary`` high it first stops accepting packets on its input
  streams at the next packet boundary, lets every packet it holds leave (one packet out per
  packet in, the NT contract's rule 1), then freezes. Drop ``stop`` to resume; the component
  runs again on the next cycle.
* **State port.** While ``stopped``, ``addr``/``read`` read a word of state (``rdata`` one cycle
  later, one word a cycle) and ``addr``/``write``/``wdata`` write one. The words are laid out
  by :class:`~.statemap.StateMap` (``Yieldable.state_map``): every flip-flop, every
  synchronous read port's data register, every memory row. State accesses while running are
  ignored.

How, in Synergy's terms (Landgraf et al., ASPLOS 2021, §4) but without its continuation
transform: Synergy rewrites the design so every cycle can trap to software, which costs 3-4x in
run-time speed. Here the design runs untouched while it runs. Freezing is a clock enable on
every ``sync`` statement (the construction of Amaranth's ``EnableInserter``) and on every
memory port; the streams' ``valid``/``ready`` are masked while frozen so no beat is offered or
taken; state access appends, to each fragment that drives a flip-flop, an assignment from the
state port that wins over the frozen value (in Amaranth the last assignment in a domain wins).
Memories are reached through their own ports, multiplexed while frozen, so a block RAM stays a
block RAM; a synchronous read port's data register is shadowed (``hold``) at the stop so using
the port for the state port does not disturb what the design sees after it resumes.

**Boundary state port** (``state="boundary"``): the map holds only the flip-flops live at a
drained packet boundary (liveness.py), and each left out has a guard; every stop, whatever
``at_boundary`` says, drains to a packet boundary and waits until every guard is 0, the premise
of liveness.py's argument. Flip-flops left out get no write path and no read-mux input. The
full port (``state="full"``, the default) keeps every flip-flop for immediate stops.

While frozen, the output streams withdraw ``valid`` (an offered beat is offered again, unchanged,
after resume): this bends the stream contract's "valid stays until taken" rule, which only an
immediate stop does; the packet-boundary stop never has a beat on offer when it freezes.
"""

from amaranth.hdl import Cat, Const, Elaboratable, Fragment, Module, Mux, Signal
from amaranth.hdl._ast import Switch, _StatementList
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .inventory import TransformError, rewrite_prints, take_inventory

__all__ = ["Yieldable", "YieldSignature", "TransformError", "state_map_of"]

PENDING_BITS = 16


def YieldSignature(addr_width, word_width=32):
    return wiring.Signature({
        "stop": In(1),
        "at_boundary": In(1),
        "stopped": Out(1),
        "addr": In(addr_width),
        "read": In(1),
        "rdata": Out(word_width),
        "write": In(1),
        "wdata": In(word_width),
        "trapped": Out(1),
    })


STATE_MODES = ("full", "boundary")


def state_map_of(component, word_width=32, state="full"):
    """The state map ``Yieldable(component, state=state)`` will have (elaborates
    ``component`` once)."""
    return _inventory(component, state)[0].state_map(word_width)


def _inventory(component, state, plan=None, platform=None):
    """``(inventory, fragment, plan)`` of a fresh elaboration of ``component``."""
    if state not in STATE_MODES:
        raise TransformError(f"state must be one of {', '.join(STATE_MODES)}, not {state!r}")
    frag = Fragment.get(component, platform)
    inv = take_inventory(frag, rewrite_prints(frag))
    if state == "boundary":
        if plan is None:
            plan = inv.keep_live(component, frag)
        else:
            inv.apply_plan(plan)
    return inv, frag, plan


class _Elaborated(Elaboratable):
    """An already elaborated (and transformed) fragment, to add as a submodule."""

    def __init__(self, fragment):
        self.fragment = fragment

    def elaborate(self, platform):
        return self.fragment


class Yieldable(wiring.Component):
    """``component``, transformed. Attributes of the component stay reachable through it."""

    def __init__(self, component, *, word_width=32, state="full"):
        if not isinstance(component, wiring.Component):
            raise TransformError(f"{component!r} is not an amaranth.lib.wiring.Component")
        if "yld" in component.signature.members:
            raise TransformError("the component already has a port named 'yld'")
        self.component = component
        self.word_width = word_width
        self.state = state
        # The liveness analysis runs once; each elaboration reuses its plan (the inventory's
        # order is repeatable, which elaborate() checks).
        inv, _frag, self._plan = _inventory(component, state)
        self.state_map = inv.state_map(word_width)
        self.inventory = None       # of the last elaboration: the signals behind the map
        self.read_port_signals = []  # of the last elaboration: what each rdport item reads
        members = dict(component.signature.members.items())
        members["yld"] = Out(YieldSignature(self.state_map.addr_width, word_width))
        super().__init__(wiring.Signature(members))

    # -- elaboration --------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        W = self.word_width
        inv, frag, _plan = _inventory(self.component, self.state, self._plan, platform)
        traps = inv.traps
        smap = inv.state_map(W)
        if not smap.same_layout(self.state_map):
            raise TransformError(f"{type(self.component).__name__} elaborated to different "
                                 f"state twice; its elaborate() must be repeatable")
        self.inventory = inv
        self.read_port_signals = []
        y = self.yld
        stopped = Signal()
        run = Signal()
        # A trap freezes the component on the cycle after its print executed (the arguments
        # were latched at that edge) and holds it until software clears its `fired` flag.
        trapped = Signal()
        m.d.comb += trapped.eq(Cat(t.fired for t in traps).any() if traps else 0)
        m.d.comb += [run.eq(~stopped & ~trapped), y.stopped.eq(stopped),
                     y.trapped.eq(trapped)]
        wr = Signal()
        m.d.comb += wr.eq(y.write & stopped)
        rd = y.read & stopped

        # Freeze: every sync statement of the component runs only while `run`.
        for _path, f in inv.fragments:
            if "sync" in f.statements:
                f.statements["sync"] = _StatementList(
                    [Switch(run, [(1, f.statements["sync"], None)])])

        items = iter(smap.items)
        words = []              # (address, value slice) of every register word, for reads
        # Register words (flip-flops, then read-port registers) take addresses 0..n-1: a
        # write selects one through one-hot decodes of 4-bit address digits (one small AND a
        # word instead of a full address compare). Reads stay a flat case: measured on the
        # VLAN push NT (ECP5), a binary mux tree of the address bits took 1,700 LUTs more.
        n_regs = sum(i.words for i in smap.items if i.kind != "mem")
        levels = max(1, (n_regs - 1).bit_length())
        aw = len(y.addr)
        reg_wr = Signal()
        m.d.comb += reg_wr.eq(wr & (y.addr[levels:] == 0) if aw > levels else wr)
        digits = []
        for lo in range(0, levels, 4):
            hi = min(levels, lo + 4)
            onehot = Signal(1 << (hi - lo), name=f"state_addr_{lo}_onehot")
            m.d.comb += onehot.eq(Cat(y.addr[lo:hi] == k for k in range(1 << (hi - lo))))
            digits.append((lo, hi, onehot))

        def hit(addr):
            h = Signal(name=f"state_write_{addr}")
            m.d.comb += h.eq(reg_wr & Cat(onehot[(addr >> lo) & ((1 << (hi - lo)) - 1)]
                                          for lo, hi, onehot in digits).all())
            return h

        # Flip-flops: writes go into the fragment that drives the signal.
        by_fragment = {}
        for path, f, sig in inv.flip_flops:
            item = next(items)
            by_fragment.setdefault(id(f), (f, []))[1].append((item, sig))
        for f, entries in by_fragment.values():
            scratch = Module()
            for item, sig in entries:
                for w in range(item.words):
                    lo, hi = w * W, min(len(sig), (w + 1) * W)
                    words.append((item.addr + w, sig[lo:hi]))
                    with scratch.If(hit(item.addr + w)):
                        scratch.d.sync += sig[lo:hi].eq(y.wdata[:hi - lo])
            f.add_statements("sync", *Fragment.get(scratch, None).statements["sync"])

        # Synchronous read ports: shadow the data register (see the module docstring).
        for _path, mem in inv.memories:
            for port in mem._read_ports:
                if port._domain == "comb":
                    continue
                item = next(items)
                seen = port._data
                if not isinstance(seen, Signal):
                    raise TransformError(f"{item.name}: read data is not a plain signal")
                raw = Signal(len(seen), name=f"{seen.name}_raw")
                hold = Signal(len(seen), name=f"{seen.name}_hold")
                held = Signal(name=f"{seen.name}_held")
                port._data = raw
                self.read_port_signals.append(seen)
                m.d.comb += seen.eq(Mux(held, hold, raw))
                own_en = port._en
                with m.If(run):
                    with m.If(own_en):
                        m.d.sync += held.eq(0)
                with m.Elif(~held):
                    m.d.sync += [hold.eq(raw), held.eq(1)]
                for w in range(item.words):
                    lo, hi = w * W, min(len(seen), (w + 1) * W)
                    words.append((item.addr + w, seen[lo:hi]))
                    with m.If(hit(item.addr + w)):
                        m.d.sync += [hold[lo:hi].eq(y.wdata[:hi - lo]), held.eq(1)]

        # Memories: reached through their own ports while frozen.
        rdata_regs = Signal(W)
        word = Signal(W)
        with m.Switch(y.addr):
            for addr, value in words:
                with m.Case(addr):
                    m.d.comb += word.eq(value)
        m.d.sync += rdata_regs.eq(word)
        rdata = rdata_regs
        max_row_words = max((i.words for i in smap.items if i.kind == "mem"), default=1)
        rowbuf = Signal(max(1, (max_row_words - 1) * W))
        for _path, mem in inv.memories:
            item = next(items)
            row_bits = (item.stride - 1).bit_length()
            size_bits = (item.size - 1).bit_length()
            hit = Signal(name=f"hit_{len(words)}_{item.addr}")
            m.d.comb += hit.eq((y.addr[size_bits:] == (item.addr >> size_bits))
                               if aw > size_bits else 1)
            row = y.addr[row_bits:size_bits]
            sel = y.addr[:row_bits]
            # Read.
            sync_ports = [p for p in mem._read_ports if p._domain != "comb"]
            comb_ports = [p for p in mem._read_ports if p._domain == "comb"]
            if sync_ports:
                chosen = sync_ports[0]
                row_data = chosen._data            # the raw port data, one cycle after
            elif comb_ports:
                chosen = comb_ports[0]
                row_data = Signal(item.width, name=f"mem{item.addr}_q")
                m.d.sync += row_data.eq(chosen._data)
            else:
                raise TransformError(f"memory {item.name} has no read port")
            for port in sync_ports:
                mine = rd & hit if port is chosen else Const(0)
                port._en = Mux(run, port._en, mine)
            chosen._addr = Mux(run, chosen._addr, row)
            hit_q, sel_q = Signal(name=f"hit_q_{item.addr}"), Signal(max(1, row_bits))
            m.d.sync += [hit_q.eq(rd & hit), sel_q.eq(sel)]
            selected = Signal(W, name=f"mem_word_{item.addr}")
            with m.Switch(sel_q):
                for w in range(item.words):
                    lo, hi = w * W, min(item.width, (w + 1) * W)
                    with m.Case(w):
                        m.d.comb += selected.eq(row_data[lo:hi])
            rdata = Mux(hit_q, selected, rdata)
            # Write: words before the last go to the row buffer, the last commits the row.
            if mem._write_ports:
                port = mem._write_ports[0]
                last = item.words - 1
                commit = wr & hit & (sel == last)
                with m.If(wr & hit & (sel < last)):
                    with m.Switch(sel):
                        for w in range(last):
                            with m.Case(w):
                                m.d.sync += rowbuf[w * W:(w + 1) * W].eq(y.wdata)
                value = Cat(rowbuf[:last * W], y.wdata)[:item.width] if last else \
                    y.wdata[:item.width]
                port._addr = Mux(run, port._addr, row)
                port._data = Mux(run, port._data, value)
                port._en = Mux(run, port._en, commit.replicate(len(port._en)))
                for other in mem._write_ports[1:]:
                    other._en = Mux(run, other._en, Const(0, len(other._en)))
        m.d.comb += y.rdata.eq(rdata)

        self._connect_ports(m, run, stopped, trapped, inv.guard_signals())
        m.submodules.inner = _Elaborated(frag)
        return m

    def _connect_ports(self, m, run, stopped, trapped, guards=()):
        """Pass every port through; mask the streams' handshakes while frozen and track
        packets for the boundary stop. With the boundary state port (``guards``: the live
        1-bit flip-flops that liveness.py proved guard every flip-flop left out of the map),
        every stop drains to a packet boundary and waits for every guard to be 0: only
        there is the map the whole state."""
        y = self.yld
        draining = Signal()
        pending = Signal(PENDING_BITS)
        mids, ins, outs = [], [], []
        for name, member in self.component.signature.members.items():
            outer, inner = getattr(self, name), getattr(self.component, name)
            if member.is_port:
                if member.flow == In:
                    m.d.comb += inner.eq(outer)
                else:
                    m.d.comb += outer.eq(inner)
                continue
            if member.dimensions:
                raise TransformError(f"port {name}: arrays of interfaces are not supported")
            if not isinstance(member.signature, stream.Signature):
                wiring.connect(m, wiring.flipped(outer), inner)
                continue
            payload = inner.payload
            last = payload.last if hasattr(payload, "last") else Const(1)
            if member.flow == In:
                mid = Signal(name=f"{name}_mid")
                gate = Signal(name=f"{name}_open")
                m.d.comb += [
                    gate.eq(run & ~(draining & ~mid)),
                    inner.valid.eq(outer.valid & gate),
                    outer.ready.eq(inner.ready & gate),
                    inner.payload.eq(outer.payload),
                ]
                accept = inner.valid & inner.ready
                with m.If(accept):
                    m.d.sync += mid.eq(~last)
                mids.append(mid)
                ins.append(accept & last)
            else:
                m.d.comb += [
                    outer.valid.eq(inner.valid & run),
                    inner.ready.eq(outer.ready & run),
                    outer.payload.eq(inner.payload),
                ]
                outs.append(inner.valid & inner.ready & last)
        m.d.sync += pending.eq(pending + sum(ins, Const(0, 2)) - sum(outs, Const(0, 2)))
        drained = (pending == 0)
        for mid in mids:
            drained = drained & ~mid
        if guards:
            drained = drained & ~Cat(*guards).any()
        boundary = y.at_boundary if self.state == "full" else Const(1)
        with m.If(~stopped):
            with m.If(trapped):
                m.d.sync += [stopped.eq(1), draining.eq(0)]
            with m.Elif(y.stop):
                with m.If(~boundary | (draining & drained)):
                    m.d.sync += [stopped.eq(1), draining.eq(0)]
                with m.Else():
                    m.d.sync += draining.eq(1)
            with m.Else():
                m.d.sync += draining.eq(0)
        with m.Elif(~y.stop & ~trapped):
            m.d.sync += stopped.eq(0)
