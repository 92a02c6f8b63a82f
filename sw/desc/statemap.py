"""The state map of a transformed component: what every word of its state port means.

The state port is word-addressed (``word_width`` bits a word, 32 by default, the register bus
width). The map lists three kinds of items, in address order:

* ``ff``: a flip-flop register (an Amaranth ``Signal`` assigned in the ``sync`` domain). A
  counter that an output port shows (``port``) is reached by address, after the traps and
  the reloaded read ports: a capture reads it through the port (an NT's register), writing
  its words restores it;
* ``rdport``: the data register of a synchronous memory read port (what the design sees on the
  port's ``data`` until its next read), so a restored design sees the same read data. It is
  in the scan chain (a shadow register), or, where another port of its memory serves the
  state port, reached by address and restored through the memory: writing its last word
  puts the value in the memory's row 0 and has the port read it back; the memory's rows,
  later in the pass, put row 0 back;
* ``mem``: a memory, ``depth`` rows of ``width`` bits; row ``r`` occupies ``words`` words from
  ``addr + r * stride`` (``stride`` a power of two). A row is written by writing its words in
  order; the last word commits the row.

The first ``scan_words`` words are the *scan chain*: flip-flops and read-port registers packed
bit after bit, an item's bits from bit ``bit`` of the chain (word ``bit // word_width``), least
significant first. The chain is reached in order only: a pass reads (or writes) its words from
address 0 up, each one bus transaction. The traps' flip-flops follow, ``words`` words each from
``addr``, reached by address, then the read ports restored through their memories. Software
walks the whole map in :meth:`StateMap.addresses` order, which is the order the port's
address moves on by itself.

Names are hierarchical (``submodule.submodule.signal``, relative to the transformed component).
``rtl`` is the same item's name in the generated Verilog where it is known (a path of module
instance names, then the wire or memory name), so software and tests can find it.
"""

import json
from dataclasses import asdict, dataclass, field

__all__ = ["StateItem", "StateMap"]


@dataclass(frozen=True)
class StateItem:
    name: str
    kind: str            # "ff", "rdport" or "mem"
    width: int
    addr: int
    words: int           # words per value (per row for memories)
    depth: int = 1       # rows (memories)
    stride: int = 1      # address step between rows (memories)
    writable: bool = True
    rtl: tuple = field(default=(), compare=False)
    #: The value at reset: an int (a flip-flop, a read port's register), or a tuple of rows
    #: (a memory; ``()``: all rows 0).
    init: object = field(default=0, compare=False)
    #: The first bit in the scan chain (-1: reached by address).
    bit: int = -1
    #: A counter read through this output port of the component (a dotted member path,
    #: ``"csr.packets"``), not through the state port, whose words for it read as nothing
    #: in particular; writing them restores it (hw/transform/inventory.py,
    #: ``find_counters``). Empty: read through the state port.
    port: str = ""

    @property
    def in_chain(self):
        return self.bit >= 0

    @property
    def size(self):
        """Words of address space the item takes (its words, for one in the chain)."""
        return self.stride * self.depth if self.kind == "mem" else self.words

    @property
    def bits(self):
        return self.width * self.depth


@dataclass
class StateMap:
    word_width: int
    items: list
    #: ``Print`` statements turned into traps: ``{"format", "args": [[width, signed]],
    #: "fired", "values"}`` (the last two name ``ff`` items).
    traps: list = field(default_factory=list)
    #: ``"full"``: every flip-flop is an item; ``"boundary"``: only the flip-flops live at a
    #: drained packet boundary (hw/transform/liveness.py), a capture is only complete there.
    mode: str = "full"
    #: Bits of all the component's flip-flops (live or not; read-port registers not counted).
    all_flip_flop_bits: int = None
    #: The flip-flops left out (boundary mode): ``{"name", "width", "guards", "rtl"}``, the
    #: guards live flip-flops (a stage's valid bit, an FSM's state) that are 0 at every
    #: boundary stop.
    dead: list = field(default_factory=list)
    #: Words of the scan chain, from address 0.
    scan_words: int = 0
    #: Configuration state left out (boundary mode): ``{"name", "kind", "width"[, "depth"]}``.
    #: It holds what the configuration registers last wrote: rewrite them (while stopped, or
    #: before stopping) to restore it; a snapshot does not carry it.
    config: list = field(default_factory=list)

    @property
    def addr_width(self):
        end = max((i.addr + i.size for i in self.items), default=1)
        return max(1, (max(end, self.scan_words) - 1).bit_length())

    @property
    def chain_bits(self):
        return sum(i.width for i in self.items if i.in_chain)

    @property
    def bits(self):
        """Bits of state: flip-flops, read-port registers and memory rows."""
        return sum(i.bits for i in self.items)

    @property
    def flip_flop_bits(self):
        return sum(i.width for i in self.items if i.kind != "mem")

    @property
    def live_bits(self):
        """Bits of flip-flops in the map (all of them in full mode)."""
        return sum(i.width for i in self.items if i.kind == "ff")

    def addresses(self):
        """Every address that holds state, in the order a capture reads them (the order the
        port's address moves on in by itself)."""
        out = list(range(self.scan_words))
        for item in self.items:
            if item.in_chain:
                continue
            if item.kind == "mem":
                for row in range(item.depth):
                    base = item.addr + row * item.stride
                    out.extend(range(base, base + item.words))
            else:
                out.extend(range(item.addr, item.addr + item.words))
        return out

    @property
    def words(self):
        return self.scan_words + sum(i.words * i.depth for i in self.items if not i.in_chain)

    def shown(self):
        """The items read through a port of the component (``port``), not the state port."""
        return [i for i in self.items if i.port]

    def fill_shown(self, words, values):
        """``words`` (a capture in :meth:`addresses` order, or its start) with each
        :meth:`shown` item's words taken from ``values`` (``{port: value}``, the ports read
        while stopped)."""
        where = {a: k for k, a in enumerate(self.addresses())}
        mask = (1 << self.word_width) - 1
        out = list(words)
        for item in self.shown():
            value = values[item.port]
            for w in range(item.words):
                k = where[item.addr + w]
                if k < len(out):
                    out[k] = (value >> (w * self.word_width)) & mask
        return out

    def decode(self, words):
        """``{name: value}`` (a list of row values for memories) from a capture in
        :meth:`addresses` order."""
        it = iter(words)
        chain = 0
        for w in range(self.scan_words):
            chain |= next(it) << (w * self.word_width)
        out = {}
        for item in self.items:
            if item.in_chain:
                out[item.name] = (chain >> item.bit) & ((1 << item.width) - 1)
                continue
            rows = []
            for _ in range(item.depth):
                value = 0
                for w in range(item.words):
                    value |= next(it) << (w * self.word_width)
                rows.append(value & ((1 << item.width) - 1))
            out[item.name] = rows if item.kind == "mem" else rows[0]
        return out

    def encode(self, values):
        """The inverse of :meth:`decode`: words in :meth:`addresses` order."""
        mask = (1 << self.word_width) - 1
        chain = 0
        for item in self.items:
            if item.in_chain:
                chain |= (values[item.name] & ((1 << item.width) - 1)) << item.bit
        out = [(chain >> (w * self.word_width)) & mask for w in range(self.scan_words)]
        for item in self.items:
            if item.in_chain:
                continue
            rows = values[item.name] if item.kind == "mem" else [values[item.name]]
            for value in rows:
                out.extend((value >> (w * self.word_width)) & mask for w in range(item.words))
        return out

    def reset_values(self):
        """``{name: value}`` of every item at reset (as :meth:`decode` gives a capture)."""
        out = {}
        for item in self.items:
            if item.kind == "mem":
                rows = list(item.init) or [0] * item.depth
                out[item.name] = rows + [0] * (item.depth - len(rows))
            else:
                out[item.name] = item.init
        return out

    def reset_words(self):
        """The words of the state at reset: restored, they give a fresh context (a tenant's
        own instance as if just reset) without reconfiguring the region."""
        return self.encode(self.reset_values())

    def find(self, name):
        for item in self.items:
            if item.name == name:
                return item
        raise KeyError(f"no state item {name!r}")

    def format_trap(self, trap, values):
        """The text a trap's ``Print`` would have printed, from ``values`` (``{name: value}``,
        as :meth:`decode` gives)."""
        packed, out = values[trap["values"]], []
        for width, signed in trap["args"]:
            v = packed & ((1 << width) - 1)
            packed >>= width
            if signed and v >> (width - 1):
                v -= 1 << width
            out.append(v)
        return trap["format"].format(*out)

    def to_json(self):
        return {"word_width": self.word_width, "addr_width": self.addr_width,
                "bits": self.bits, "words": self.words,
                "items": [{**asdict(i), "rtl": list(i.rtl),
                           "init": list(i.init) if i.kind == "mem" else i.init}
                          for i in self.items],
                "traps": self.traps, "mode": self.mode,
                "live_bits": self.live_bits,
                "all_flip_flop_bits": (self.all_flip_flop_bits
                                       if self.all_flip_flop_bits is not None
                                       else self.live_bits),
                "dead": [{**d, "rtl": list(d.get("rtl", ()))} for d in self.dead],
                "scan_words": self.scan_words,
                "config": [{**c, "rtl": list(c.get("rtl", ()))} for c in self.config]}

    @classmethod
    def from_json(cls, raw):
        if isinstance(raw, str):
            raw = json.loads(raw)
        return cls(raw["word_width"],
                   [StateItem(**{**i, "rtl": tuple(i.get("rtl", ())),
                                 "init": (tuple(i.get("init", ())) if i["kind"] == "mem"
                                          else i.get("init", 0))})
                    for i in raw["items"]],
                   raw.get("traps", []), mode=raw.get("mode", "full"),
                   all_flip_flop_bits=raw.get("all_flip_flop_bits"),
                   dead=[{**d, "rtl": tuple(d.get("rtl", ()))} for d in raw.get("dead", [])],
                   scan_words=raw.get("scan_words", 0),
                   config=[{**c, "rtl": tuple(c.get("rtl", ()))}
                           for c in raw.get("config", [])])

    def same_layout(self, other):
        return (self.word_width == other.word_width and self.items == other.items
                and self.traps == other.traps and self.mode == other.mode
                and self.scan_words == other.scan_words
                and [c["name"] for c in self.config] == [c["name"] for c in other.config])
