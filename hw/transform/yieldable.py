"""The state-yielding transform: any Amaranth component, as written, made able to yield.

``Yieldable(component)`` has the component's own ports plus ``yld`` (:func:`YieldSignature`):

* **Stop and resume.** Hold ``stop`` high to stop. With ``at_boundary`` low the component
  freezes at once: it completes the current cycle and ``stopped`` rises on the next (stop
  latency 1 cycle). With ``at_boundary`` high it first stops accepting packets on its input
  streams at the next packet boundary, lets every packet it holds leave (one packet out per
  packet in, the NT contract's rule 1), then freezes. Drop ``stop`` to resume; the component
  runs again once its scan chain is home (at once, after a whole pass).
* **State port.** While ``stopped``, the port has a current address: ``seek`` moves it to
  ``addr``; ``rdata`` shows the word there one cycle after the address moved (a seek into the
  scan chain turns the chain a word a cycle until the word is at its tail, and ``stopped`` is
  low until then); ``next`` moves past it; ``write`` writes ``wdata`` there and moves past it. The address moves on in
  the order of :meth:`~.statemap.StateMap.addresses`, so software reads or writes the whole
  state with one seek and one strobe a word (one bus transaction a word through a register
  file with access strobes). The words are laid out by :class:`~.statemap.StateMap`
  (``Yieldable.state_map``). State accesses while running are ignored.

How, in Synergy's terms (Landgraf et al., ASPLOS 2021, §4) but without its continuation
transform: Synergy rewrites the design so every cycle can trap to software, which costs 3-4x in
run-time speed. Here the design runs untouched while it runs. Freezing is a clock enable on the
``sync`` statements (the construction of Amaranth's ``EnableInserter``) and on every memory
port; the streams' ``valid``/``ready`` are masked while frozen so no beat is offered or taken.

**The scan chain.** The flip-flops in the map (and the read ports' data registers) are one
shift register, ``word_width`` bits wide, while frozen: each shift moves every word one place
towards the tail (word 0) and takes a new word at the head, either the tail word (a rotation:
reading) or ``wdata`` (writing). A pass of the chain's words reads or rewrites all of them and
leaves the chain home. A flip-flop's only cost is a 2:1 multiplexer in front of it (its
neighbour's value while shifting): no read multiplexer as wide as the state, no address
decoder a word. Measured on the ECP5, the addressed port this replaces cost 1,700 more LUTs on
the VLAN push NT for the read multiplexer alone, and a write multiplexer a bit on top. The
traps' flip-flops stay addressed (software services one trap at a time). Memories are reached
through their own ports, multiplexed while frozen, so a block RAM stays a block RAM; a
synchronous read port's data register is shadowed (``hold``) at the stop so using the port for
the state port does not disturb what the design sees after it resumes; where another port of
its memory serves the state port, the register is left alone instead, read by address and
restored through the memory (see "read ports restored through their memory" below).

**Boundary state** (``state="boundary"``, the default): the map holds only the flip-flops live
at a drained packet boundary (liveness.py); each left out has guards; every stop, whatever
``at_boundary`` says, drains to a packet boundary and waits until every guard is 0, the premise
of liveness.py's argument. Flip-flops left out are not in the chain and are not frozen: while
the component is stopped they may change, which the argument allows (their guards stay 0).
A component with ``Print`` traps freezes everything, since a trap stops it mid-packet. The
full port (``state="full"``) keeps every flip-flop, for immediate stops.

**Counters** (boundary state): a live counter that an output port shows (an NT's statistics,
``R`` registers the register file reads) is not in the scan chain. Software reads it where
it reads it anyway, through the port's register (``StateItem.port``; the state port's words
for it read as nothing in particular); writing its words restores it: the first clears it
(a synchronous reset), the last adds the value through the counter's own adder, whose other
operand is its increment while running and the written value in that one cycle. No
multiplexer in front of its bits, which in the chain cost about a LUT a bit (inventory.py,
``find_counters``).

While frozen, the output streams withdraw ``valid`` (an offered beat is offered again, unchanged,
after resume): this bends the stream contract's "valid stays until taken" rule, which only an
immediate stop does; the packet-boundary stop never has a beat on offer when it freezes.
"""

from amaranth.hdl import Cat, Const, Elaboratable, Fragment, Module, Mux, Signal
from amaranth.hdl._ast import Assign, Switch, _StatementList
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .inventory import TransformError, assigns, increment, rewrite_prints, take_inventory

__all__ = ["Yieldable", "YieldSignature", "TransformError", "state_map_of", "STATE_MODES"]

PENDING_BITS = 16


def YieldSignature(addr_width, word_width=32):
    return wiring.Signature({
        "stop": In(1),
        "at_boundary": In(1),
        "stopped": Out(1),
        "addr": In(addr_width),
        "seek": In(1),
        "rdata": Out(word_width),
        "next": In(1),
        "write": In(1),
        "wdata": In(word_width),
        "trapped": Out(1),
    })


STATE_MODES = ("full", "boundary")


def state_map_of(component, word_width=32, state="boundary"):
    """The state map ``Yieldable(component, state=state)`` will have (elaborates
    ``component`` once)."""
    return _inventory(component, state, word_width)[0].state_map(word_width)


def _inventory(component, state, word_width, plan=None, platform=None):
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
        inv.find_counters(component, word_width)
    return inv, frag, plan


class _Elaborated(Elaboratable):
    """An already elaborated (and transformed) fragment, to add as a submodule."""

    def __init__(self, fragment):
        self.fragment = fragment

    def elaborate(self, platform):
        return self.fragment


def _split(stmts, frozen):
    """``(frozen part, free part)`` of a statement list: the assignments to signals in
    ``frozen`` (ids) and the others, each under the same conditions."""
    def walk(stmts, keep):
        out = []
        for st in stmts:
            if isinstance(st, Switch):
                cases = [(patterns, walk(body, keep), loc) for patterns, body, loc in st.cases]
                if any(body for _p, body, _l in cases):
                    out.append(Switch(st.test, cases, src_loc=st.src_loc))
            elif isinstance(st, Assign):
                if keep(any(id(s) in frozen for s in st.lhs._lhs_signals())):
                    out.append(st)
            elif keep(True):        # anything else (a property) runs only while running
                out.append(st)
        return _StatementList(out)
    return walk(stmts, lambda f: f), walk(stmts, lambda f: not f)


def _frozen_set(fragments, live):
    """The ids of the flip-flops to freeze: ``live``, plus every signal an assignment writes
    together with one of them (a ``Cat`` on the left), until nothing more joins."""
    frozen = set(live)
    while True:
        more = set()
        for _path, f in fragments:
            stmts = f.statements.get("sync")
            if stmts is None:
                continue
            for st in assigns(stmts):
                ids = {id(s) for s in st.lhs._lhs_signals()}
                if ids & frozen and not ids <= frozen:
                    more |= ids - frozen
        if not more:
            return frozen
        frozen |= more


def _increment(stmts, sig):
    """A signal for what the counter ``sig`` adds this cycle, as wide as its widest
    increment in ``stmts``."""
    width = max(len(increment(st, sig)) for st in assigns(stmts) if st.lhs is sig)
    return Signal(width, name=f"{sig.name}_inc")


def _as_increments(stmts, sig, inc):
    """``stmts`` (sync) with every ``sig.eq(sig + e)`` turned into ``inc.eq(e)`` and
    everything else dropped, under the same conditions: comb statements that make ``inc``
    what the counter would add (0 where it would keep its value)."""
    out = []
    for st in stmts:
        if isinstance(st, Switch):
            cases = [(patterns, _as_increments(body, sig, inc), loc)
                     for patterns, body, loc in st.cases]
            if any(body for _p, body, _l in cases):
                out.append(Switch(st.test, cases, src_loc=st.src_loc))
        elif isinstance(st, Assign) and st.lhs is sig:
            out.append(inc.eq(increment(st, sig)))
    return _StatementList(out)


class Yieldable(wiring.Component):
    """``component``, transformed. Attributes of the component stay reachable through it."""

    def __init__(self, component, *, word_width=32, state="boundary"):
        if not isinstance(component, wiring.Component):
            raise TransformError(f"{component!r} is not an amaranth.lib.wiring.Component")
        if "yld" in component.signature.members:
            raise TransformError("the component already has a port named 'yld'")
        self.component = component
        self.word_width = word_width
        self.state = state
        # The liveness analysis runs once; each elaboration reuses its plan (the inventory's
        # order is repeatable, which elaborate() checks).
        inv, _frag, self._plan = _inventory(component, state, word_width)
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
        inv, frag, _plan = _inventory(self.component, self.state, W, self._plan, platform)
        smap = inv.state_map(W)
        if not smap.same_layout(self.state_map):
            raise TransformError(f"{type(self.component).__name__} elaborated to different "
                                 f"state twice; its elaborate() must be repeatable")
        self.inventory = inv
        self.read_port_signals = []
        traps = inv.traps
        y = self.yld
        S = smap.scan_words
        aw = len(y.addr)

        stopped = Signal()          # stopped by request or trap (the component is frozen)
        trapped = Signal()
        m.d.comb += trapped.eq(Cat(t.fired for t in traps).any() if traps else 0)
        pos = Signal(range(max(2, S)))      # the chain word now at the tail
        cur = Signal(aw)                    # the state port's current address
        home = Signal()
        run = Signal()
        m.d.comb += [home.eq(pos == 0), run.eq(~stopped & home & ~trapped)]

        # Freeze: the map's flip-flops (everything in full mode, or with traps, which stop
        # mid-packet) run only while `run`; flip-flops left out run on (liveness.py). The
        # configuration's run too while stopped with the chain home and still, so rewriting
        # the configuration registers restores it then (the values its logic reads are the
        # real ones only there).
        shift = Signal()
        config_run = Signal()
        m.d.comb += config_run.eq(run | (stopped & home & ~shift & ~trapped))
        # Counters (inventory.py, find_counters): their assignments leave the design's
        # statements; what each would add this cycle becomes a comb signal under the same
        # conditions, added below by one statement that also restores the counter.
        increments = {}     # id(counter) -> its increment this cycle
        counted = {id(sig) for _p, _f, sig, _port in inv.counters}
        for _path, f in inv.fragments:
            if "sync" not in f.statements or not counted:
                continue
            mine, rest = _split(f.statements["sync"], counted)
            if not mine:
                continue
            f.statements["sync"] = rest
            for _p, owner, sig, _port in inv.counters:
                if owner is f:
                    inc = _increment(mine, sig)
                    f.add_statements("comb", *_as_increments(mine, sig, inc))
                    increments[id(sig)] = inc
        if inv.mode == "full" or traps:
            freeze = None
        else:
            commands = {id(s) for _p, _f, s in inv.commands}
            freeze = _frozen_set(inv.fragments,
                                 {id(s) for _p, _f, s in inv.flip_flops} - commands)
            config = _frozen_set(inv.fragments,
                                 {id(s) for _p, _f, s in [*inv.config, *inv.commands]}) - freeze
        for _path, f in inv.fragments:
            if "sync" not in f.statements:
                continue
            stmts = f.statements["sync"]
            if freeze is None:
                f.statements["sync"] = _StatementList([Switch(run, [(1, stmts, None)])])
                continue
            kept, rest = _split(stmts, freeze)
            configured, free = _split(rest, config)
            f.statements["sync"] = _StatementList(
                ([Switch(run, [(1, kept, None)])] if kept else [])
                + ([Switch(config_run, [(1, configured, None)])] if configured else [])
                + [*free])

        layout = inv.layout()
        items = dict(zip(map(id, layout), smap.items))

        # -- the read ports' data registers, shadowed at the stop --------------------------
        # (A read port whose data register is dead at a boundary needs no shadow: it is not
        # in the layout, and the state port may use it freely.)
        holds = {}      # id(layout entry) -> hold signal (a chain member)
        for entry in layout:
            if entry[0] != "rdport":
                continue
            _kind, _path, mem, k = entry
            port = mem._read_ports[k]
            seen = port._data
            if not isinstance(seen, Signal):
                raise TransformError(f"{items[id(entry)].name}: read data is not a plain "
                                     f"signal")
            raw = Signal(len(seen), name=f"{seen.name}_raw")
            hold = Signal(len(seen), name=f"{seen.name}_hold")
            held = Signal(name=f"{seen.name}_held")
            port._data = raw
            self.read_port_signals.append(seen)
            m.d.comb += seen.eq(Mux(held, hold, raw))
            with m.If(run):
                with m.If(port._en):
                    m.d.sync += held.eq(0)
            with m.Elif(~held):
                m.d.sync += [hold.eq(raw), held.eq(1)]
            holds[id(entry)] = hold

        # -- the scan chain --------------------------------------------------------------
        bits = []       # the chain, bit by bit from the tail: (signal, bit)
        for entry in layout:
            if entry[0] == "ff":
                bits += [(entry[2], b) for b in range(len(entry[2]))]
            elif entry[0] == "rdport":
                bits += [(holds[id(entry)], b) for b in range(len(holds[id(entry)]))]
        in_scan = Signal()
        shift_in = Signal()
        in_word = Signal(W)
        tail = Signal(W)
        if S:
            if len(bits) < S * W:
                pad = Signal(S * W - len(bits), name="scan_pad")
                bits += [(pad, b) for b in range(len(pad))]
            m.d.comb += tail.eq(Cat(s[b] for s, b in bits[:W]))
            # A flip-flop takes, while shifting, the bits one word closer to the head.
            sources = [s[b] for s, b in bits[W:]] + [in_word[b] for b in range(W)]
            by_signal = {}
            for n, (sig, b) in enumerate(bits):
                by_signal.setdefault(id(sig), (sig, {}))[1][b] = sources[n]
            owner = {id(sig): f for _path, f, sig in inv.flip_flops}
            for sig, srcs in by_signal.values():
                value = Cat(srcs[b] for b in range(len(sig)))
                if id(sig) in owner:
                    scratch = Module()
                    with scratch.If(shift):
                        scratch.d.sync += sig.eq(value)
                    owner[id(sig)].add_statements(
                        "sync", *Fragment.get(scratch, None).statements["sync"])
                else:
                    with m.If(shift):
                        m.d.sync += sig.eq(value)
            # The tail sits where the current address wants it while stopped; home (word 0
            # at the tail) otherwise, which the component needs to run.
            target = Signal.like(pos)
            # A write shifts wdata in as the tail word leaves; `next` rotates the tail word
            # to the head at once; a seek rotates a word a cycle until the tail is there.
            m.d.comb += [
                in_scan.eq(cur < S),
                target.eq(Mux(stopped & in_scan, cur, 0)),
                shift_in.eq(y.write & ~y.seek & stopped & in_scan & (pos == cur)),
                shift.eq(shift_in | (pos != target)
                         | (y.next & ~y.seek & stopped & in_scan & (pos == cur))),
                in_word.eq(Mux(shift_in, y.wdata, tail)),
            ]
            with m.If(shift):
                m.d.sync += pos.eq(Mux(pos == S - 1, 0, pos + 1))
        ready = Signal()
        m.d.comb += ready.eq(pos == Mux(stopped & in_scan, cur, 0) if S else 1)

        # -- the address ---------------------------------------------------------------------
        # Regions in map order: the chain, the traps' words, each memory; the address moves
        # from the end of one to the start of the next, and from the last back to 0.
        # The traps' words and the reloaded read ports' words are one region, in that order.
        reload_entries = [e for e in layout if e[0] == "reload"]
        counter_entries = [e for e in layout if e[0] == "counter"]
        addressed = [items[id(e)] for e in layout if e[0] == "trap"] + \
            [items[id(e)] for e in reload_entries] + [items[id(e)] for e in counter_entries]
        mem_entries = [e for e in layout if e[0] == "mem"]
        starts = ([0] if S else []) + ([addressed[0].addr] if addressed else []) + \
            [items[id(e)].addr for e in mem_entries]
        succ = Signal(aw)
        m.d.comb += succ.eq(cur + 1)
        region_ends = []
        if S:
            region_ends.append(S - 1)
        if addressed:
            region_ends.append(addressed[-1].addr + addressed[-1].words - 1)
        for n, end in enumerate(region_ends):
            with m.If(cur == end):
                m.d.comb += succ.eq(starts[n + 1] if n + 1 < len(starts) else 0)
        mem_hits = {}
        for n, entry in enumerate(mem_entries):
            item = items[id(entry)]
            row_bits = (item.stride - 1).bit_length()
            size_bits = (item.size - 1).bit_length()
            hit = Signal(name=f"state_mem{n}_hit")
            m.d.comb += hit.eq((cur[size_bits:] == (item.addr >> size_bits))
                               if aw > size_bits else 1)
            row, sel = cur[row_bits:size_bits], cur[:row_bits]
            mem_hits[id(entry)] = (hit, row, sel, row_bits)
            after = starts[len(starts) - len(mem_entries) + n + 1] \
                if n + 1 < len(mem_entries) else 0
            with m.If(hit & (sel == item.words - 1)):
                with m.If(row == item.depth - 1):
                    m.d.comb += succ.eq(after)
                with m.Else():
                    m.d.comb += succ.eq(item.addr + ((row + 1) << row_bits))
        with m.If(stopped):
            with m.If(y.seek):
                m.d.sync += cur.eq(y.addr)
            with m.Elif((y.write | y.next) & ready):
                m.d.sync += cur.eq(succ)

        # -- the traps' words, by address -----------------------------------------------------
        wr = Signal()
        m.d.comb += wr.eq(y.write & stopped & ready)
        word = Signal(W)
        m.d.comb += word.eq(tail)
        addressed_words = []
        for entry in layout:
            if entry[0] != "trap":
                continue
            item, sig = items[id(entry)], entry[2]
            scratch = Module()
            for w in range(item.words):
                lo, hi = w * W, min(len(sig), (w + 1) * W)
                addressed_words.append((item.addr + w, sig[lo:hi]))
                with scratch.If(wr & (cur == item.addr + w)):
                    scratch.d.sync += sig[lo:hi].eq(y.wdata[:hi - lo])
            owner = next(f for _p, f, s in inv.flip_flops if s is sig)
            owner.add_statements("sync", *Fragment.get(scratch, None).statements["sync"])
        # -- read ports restored through their memory (inventory.py, ``_reloadable``) -------
        # Read: the port's data register, which nothing disturbs while frozen (the memory is
        # read through another port). Write: the words before the last go to the row buffer;
        # the last writes the whole value into the memory's row 0 and, the next cycle, the
        # port reads it back. The memory's own rows come later in the pass: row 0 gets its
        # captured value again. This replaces a shadow register in the scan chain and a
        # multiplexer in front of everything the design reads from the port.
        max_row_words = max((items[id(e)].words for e in [*mem_entries, *counter_entries]),
                            default=1)
        rowbuf = Signal(max(1, (max_row_words - 1) * W))
        reload_commit = {}      # id(memory) -> this cycle's commits into its row 0
        reload_read = {}        # id(port) -> the cycle after its commit
        for entry in reload_entries:
            _kind, _path, mem, k = entry
            item, data = items[id(entry)], mem._read_ports[k]._data
            last = item.words - 1
            for w in range(item.words):
                lo, hi = w * W, min(len(data), (w + 1) * W)
                addressed_words.append((item.addr + w, data[lo:hi]))
                if w < last:
                    with m.If(wr & (cur == item.addr + w)):
                        m.d.sync += rowbuf[w * W:(w + 1) * W].eq(y.wdata)
            commit = Signal(name=f"reload_commit_{item.addr}")
            again = Signal(name=f"reload_read_{item.addr}")
            m.d.comb += commit.eq(wr & (cur == item.addr + last))
            m.d.sync += again.eq(commit)
            reload_commit.setdefault(id(mem), []).append(commit)
            reload_read[id(mem._read_ports[k])] = again
        # -- counters, read through their ports, restored by adding (find_counters) ---------
        # The first word's write clears the counter (a synchronous reset) and, like every
        # word before the last, goes to the row buffer; the last word's write adds the whole
        # value the cycle after, from a register shared by every counter of as many words:
        # 0 but in that cycle (a flip-flop's synchronous reset, where a multiplexer gating
        # the value cost a LUT a bit; measured on the load balancer, 68 LUTs for 66 FFs).
        # A counter's own increment is 0 while frozen. Its words read through the state port
        # as nothing in particular (the port shows it).
        adds = {}           # words -> [this cycle's add strobes of counters of as many]
        strobes = {}        # id(counter) -> (clear, add, its words)
        for entry in counter_entries:
            sig, item = entry[2], items[id(entry)]
            for w in range(item.words - 1):
                with m.If(wr & (cur == item.addr + w)):
                    m.d.sync += rowbuf[w * W:(w + 1) * W].eq(y.wdata)
            clear = Signal(name=f"counter_clear_{item.addr}")
            add = Signal(name=f"counter_add_{item.addr}")
            m.d.comb += [clear.eq(wr & (cur == item.addr)),
                         add.eq(wr & (cur == item.addr + item.words - 1))]
            adds.setdefault(item.words, []).append(add)
            strobes[id(sig)] = clear, add, item.words
        operands = {}       # a register, so every counter shares one; 0 but after an add
        for n, a in adds.items():
            operands[n] = Signal(n * W, name=f"counter_operand{n}")
            m.d.sync += operands[n].eq(Mux(Cat(*a).any(), Cat(rowbuf[:(n - 1) * W], y.wdata), 0))
        adding = []         # the adds of this cycle (written the cycle before)
        for _path, owner, sig, _port in inv.counters:
            clear, add, words = strobes[id(sig)]
            add_q = Signal(name=f"{add.name}_q")
            m.d.sync += add_q.eq(add)
            adding.append(add_q)
            scratch = Module()
            with scratch.If(clear):
                scratch.d.sync += sig.eq(0)
            with scratch.Elif(run | add_q):
                scratch.d.sync += sig.eq(sig + (Mux(run, increments[id(sig)], 0)
                                                 | operands[words]))
            owner.add_statements("sync", *Fragment.get(scratch, None).statements["sync"])
        if addressed_words:
            with m.Switch(cur):
                for addr, value in addressed_words:
                    with m.Case(addr):
                        m.d.comb += word.eq(value)

        # -- memories, through their own ports -----------------------------------------------
        rdata = Signal(W)
        m.d.sync += rdata.eq(word)
        out = rdata
        for entry in mem_entries:
            _kind, _path, mem = entry
            item = items[id(entry)]
            hit, row, sel, row_bits = mem_hits[id(entry)]
            sync_ports = [p for p in mem._read_ports if p._domain != "comb"]
            comb_ports = [p for p in mem._read_ports if p._domain == "comb"]
            free_ports = [p for p in sync_ports if id(p) not in reload_read]
            if free_ports:
                chosen = free_ports[0]
                row_data = chosen._data            # the raw port data, one cycle after
            elif comb_ports:
                chosen = comb_ports[0]
                row_data = Signal(item.width, name=f"mem{item.addr}_q")
                m.d.sync += row_data.eq(chosen._data)
            else:
                raise TransformError(f"memory {item.name} has no read port")
            for port in sync_ports:
                if id(port) in reload_read:
                    port._en = Mux(run, port._en, reload_read[id(port)])
                    port._addr = Mux(run, port._addr, 0)
                    continue
                mine = (stopped & hit) if port is chosen else Const(0)
                port._en = Mux(run, port._en, mine)
            chosen._addr = Mux(run, chosen._addr, row)
            hit_q, sel_q = Signal(name=f"hit_q_{item.addr}"), Signal(max(1, row_bits))
            m.d.sync += [hit_q.eq(hit), sel_q.eq(sel)]
            selected = Signal(W, name=f"mem_word_{item.addr}")
            with m.Switch(sel_q):
                for w in range(item.words):
                    lo, hi = w * W, min(item.width, (w + 1) * W)
                    with m.Case(w):
                        m.d.comb += selected.eq(row_data[lo:hi])
            out = Mux(hit_q, selected, out)
            # Write: words before the last go to the row buffer, the last commits the row.
            if mem._write_ports:
                port = mem._write_ports[0]
                last = item.words - 1
                reloads = reload_commit.get(id(mem), [])
                reloading = Cat(*reloads).any() if reloads else Const(0)
                commit = (wr & hit & (sel == last)) | reloading
                with m.If(wr & hit & (sel < last)):
                    with m.Switch(sel):
                        for w in range(last):
                            with m.Case(w):
                                m.d.sync += rowbuf[w * W:(w + 1) * W].eq(y.wdata)
                value = Cat(rowbuf[:last * W], y.wdata)[:item.width] if last else \
                    y.wdata[:item.width]
                port._addr = Mux(run, port._addr, Mux(reloading, 0, row) if reloads else row)
                port._data = Mux(run, port._data, value)
                port._en = Mux(run, port._en, commit.replicate(len(port._en)))
                for other in mem._write_ports[1:]:
                    other._en = Mux(run, other._en, Const(0, len(other._en)))
        m.d.comb += [y.rdata.eq(out), y.stopped.eq(stopped & ready), y.trapped.eq(trapped)]

        self._connect_ports(m, run, stopped, trapped, inv.stop_conditions(), adding)
        m.submodules.inner = _Elaborated(frag)
        return m

    def _connect_ports(self, m, run, stopped, trapped, guards=(), busy=()):
        """Pass every port through; mask the streams' handshakes while frozen and track
        packets for the boundary stop. With the boundary state port (``guards``: the live
        flip-flops, valid bits and FSM states, that liveness.py proved guard every flip-flop
        left out of the map,
        and the non-emptiness of each FIFO whose storage is left out), every stop drains to
        a packet boundary and waits for every guard to be 0: only there is the map the whole
        state. ``busy``: restores that finish the cycle after their write (a counter's add),
        which hold a resume for that cycle."""
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
        with m.Elif(~y.stop & ~trapped & ~Cat(*busy).any()):
            m.d.sync += stopped.eq(0)
