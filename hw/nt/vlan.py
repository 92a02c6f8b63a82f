"""IEEE 802.1Q tag push and pop.

``vlan_push`` inserts one tag (configured TPID 0x8100 C-tag or 0x88a8 S-tag, PCP, DEI, VID)
right after the MAC addresses, where IEEE 802.1Q puts the outermost tag. It skips packets that
already carry two or more tags (the parser records at most two VIDs), and packets whose parsed
headers end within 4 bytes of the parser window (``payload_off + 4 > header_bytes``): shifted by
the tag, their last header would cross the window and the parser would describe the new frame
differently from the shifted metadata.

``vlan_pop`` removes the outermost tag and skips untagged packets. The new second VID of a frame
with three or more tags is read from the frame (its third tag, bytes 22-23), and whether four
or more remain from where the tags end (``l3_off[0]``, or ``payload_off`` when no IP follows). A
frame left shorter than 60 bytes is padded with zero bytes to 60, as IEEE 802.1Q bridges do when
they remove a tag (IEEE 802.3 minimum frame of 64 bytes, FCS not carried here).

Metadata of a changed packet describes the frame that leaves (contract rule 4): every offset the
parser set (non-zero) moves by 4 bytes, ``payload_off`` and a non-zero ``min_len`` too; the tag
count and VIDs shift; the tenant key follows the new outer VID unless the packet is VXLAN (whose
VNI stays the key). ``flow``, ``flow_hash``, ``ts`` and ``mark`` are kept. The tail flags pass
through from the input's last beat to the output's last beat.

Both take one beat a cycle at any data width: push emits one extra beat only when the tag spills
a packet's last beat into a new one (the output then runs at one beat a cycle), pop takes one
input beat a cycle. At 64 bits a short look-ahead (:class:`~.realign.HeadWindow`) gives the
control logic the MAC addresses (and, for pop, the third tag) beside the first beat.
"""

import ipaddress

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring

from ..csr.registers import RW, Register
from ..parser.meta import RUNT_BYTES, TenantKind
from .realign import HeadWindow, Realigner, skip_rule
from .task import ConfigError, NetworkTask, Scope, TaskConfig

__all__ = [
    "VlanPush", "VlanPop", "VlanPushConfig", "VlanPopConfig", "TPIDS", "MAC_BYTES", "TAG_BYTES",
    "check_settings", "as_int", "mac_setting", "ipv4_setting", "int_setting", "type_id",
]

MAC_BYTES = 12  # destination and source MAC addresses
TAG_BYTES = 4   # IEEE 802.1Q: TPID, then TCI (PCP 3 bits, DEI 1 bit, VID 12 bits)
TPIDS = (0x8100, 0x88A8)  # IEEE 802.1Q C-tag, S-tag (802.1ad)
VID_MAX = 4094  # IEEE 802.1Q Table 9-2: VID 0xFFF is reserved; 0 is a priority tag


def type_id(name):
    """A register block type ID from four ASCII letters."""
    return int.from_bytes(name.encode("ascii"), "big")


# ---- configuration helpers (shared with hw/nt/vxlan.py) -------------------------------------

REQUIRED = object()


def as_int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def int_setting(low, high):
    def check(value):
        v = as_int(value)
        return v if v is not None and low <= v <= high else None
    check.kind = f"an integer from {low} to {high}"
    return check


def choice_setting(choices, shown):
    def check(value):
        return value if as_int(value) is not None and value in choices else None
    check.kind = f"one of {shown}"
    return check


def mac_setting(value):
    """A MAC address: ``"02:00:00:00:00:01"`` or a 48-bit integer."""
    if as_int(value) is not None:
        return value if 0 <= value < 2 ** 48 else None
    if isinstance(value, str):
        parts = value.replace("-", ":").split(":")
        if len(parts) == 6 and all(len(p) == 2 for p in parts):
            try:
                return int("".join(parts), 16)
            except ValueError:
                return None
    return None


mac_setting.kind = "a MAC address like \"02:00:00:00:00:01\""


def ipv4_setting(value):
    """An IPv4 address: ``"192.0.2.1"`` or a 32-bit integer."""
    if as_int(value) is not None:
        return value if 0 <= value < 2 ** 32 else None
    if isinstance(value, str):
        try:
            return int(ipaddress.IPv4Address(value))
        except ValueError:
            return None
    return None


ipv4_setting.kind = "an IPv4 address like \"192.0.2.1\""


def check_settings(kind, raw, spec):
    """Validate a configuration table against ``spec`` (name -> (default or REQUIRED, check));
    return name -> value."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"nt {kind}: configuration must be a table, not {raw!r}")
    for name in raw:
        if name not in spec:
            raise ConfigError(f"nt {kind}: unknown config key {name!r} "
                              f"(known: {', '.join(sorted(spec)) or 'none'})")
    out = {}
    for name, (default, check) in spec.items():
        if name not in raw:
            if default is REQUIRED:
                raise ConfigError(f"nt {kind}: setting {name} is required")
            out[name] = default
            continue
        value = check(raw[name])
        if value is None:
            raise ConfigError(f"nt {kind}: {name} must be {check.kind}, not {raw[name]!r}")
        out[name] = value
    return out


# ---- configurations -----------------------------------------------------------------------


class VlanPushConfig(TaskConfig):
    SPEC = {
        "vid": (REQUIRED, int_setting(0, VID_MAX)),
        "pcp": (0, int_setting(0, 7)),
        "dei": (0, int_setting(0, 1)),
        "tpid": (0x8100, choice_setting(TPIDS, "0x8100 or 0x88a8")),
    }

    def __init__(self, vid, pcp=0, dei=0, tpid=0x8100):
        self.vid, self.pcp, self.dei, self.tpid = vid, pcp, dei, tpid

    @property
    def tci(self):
        return self.pcp << 13 | self.dei << 12 | self.vid

    @classmethod
    def from_dict(cls, kind, params, raw):
        return cls(**check_settings(kind, raw, cls.SPEC))

    def register_writes(self, params):
        return [("tpid", self.tpid), ("pcp", self.pcp), ("dei", self.dei), ("vid", self.vid)]

    @classmethod
    def random(cls, rng, params):
        return cls(vid=rng.randint(0, VID_MAX), pcp=rng.randrange(8), dei=rng.randrange(2),
                   tpid=rng.choice(TPIDS))

    def __repr__(self):
        return (f"VlanPushConfig(vid={self.vid}, pcp={self.pcp}, dei={self.dei}, "
                f"tpid={self.tpid:#06x})")


class VlanPopConfig(TaskConfig):
    @classmethod
    def from_dict(cls, kind, params, raw):
        check_settings(kind, raw, {})
        return cls()

    def register_writes(self, params):
        return []

    @classmethod
    def random(cls, rng, params):
        return cls()

    def __repr__(self):
        return "VlanPopConfig()"


# ---- gateware -----------------------------------------------------------------------------


def moved(old, delta):
    """An offset the parser set (non-zero) moved by ``delta``; an unset one stays 0."""
    return Mux(old != 0, old + delta, 0)


def move_offsets(m, old, new, delta):
    """Every header offset, ``payload_off`` and ``min_len`` of ``old`` moved by ``delta`` into
    ``new`` (a frame that grows or shrinks in front of its headers)."""
    for layer in range(2):
        m.d.comb += [
            new.l3_off[layer].eq(moved(old.l3_off[layer], delta)),
            new.l4_off[layer].eq(moved(old.l4_off[layer], delta)),
        ]
    m.d.comb += [
        new.inner_l2_off.eq(moved(old.inner_l2_off, delta)),
        new.payload_off.eq(moved(old.payload_off, delta)),
        new.min_len.eq(moved(old.min_len, delta)),
    ]


def counter(m, event, name):
    """A 64-bit event counter."""
    value = Signal(64, name=name)
    with m.If(event):
        m.d.sync += value.eq(value + 1)
    return value


def be_bytes(value, nbytes):
    """``value`` as ``nbytes`` bytes in wire (big-endian) order, byte 0 in the low bits."""
    return Cat(*[value[8 * (nbytes - 1 - k):8 * (nbytes - k)] for k in range(nbytes)])


class _VlanTask(NetworkTask):
    # The tag sits inside the parser window and no length field changes. Pop's padding only
    # touches frames shorter than 64 bytes, which lie wholly inside the window.
    scope = Scope.HEADER
    needs_frame = True  # the bytes behind the tag move by four
    modifies = True
    window_bytes = MAC_BYTES

    def _plumb(self, m, max_head, max_drop, max_pad=0):
        m.submodules.window = win = HeadWindow(self.data_width, self.meta_layout,
                                               self.window_bytes)
        m.submodules.realign = ra = Realigner(self.data_width, self.meta_layout, max_head,
                                              max_drop, max_pad)
        wiring.connect(m, wiring.flipped(self.i), win.i)
        wiring.connect(m, win.o, ra.i)
        wiring.connect(m, ra.o, wiring.flipped(self.o))
        return win, ra

    def _counters(self, m, ra, applies):
        csr = self.csr
        decided = ra.i.valid & ra.i.ready & ra.first
        m.d.comb += [
            csr.packets.eq(counter(m, self.o.valid & self.o.ready & self.o.p.last, "packets")),
            csr.dropped.eq(0),  # never drops
            csr.skipped.eq(counter(m, decided & ~applies, "skipped")),
        ]


class VlanPush(_VlanTask):
    """Push an IEEE 802.1Q tag after the MAC addresses"""
    kind = "vlan_push"
    type_id = type_id("VPSH")
    config = VlanPushConfig
    model = "vlan:VlanPushModel"

    @classmethod
    def task_registers(cls, params):
        return [
            Register("tpid", 16, RW, reset=0x8100, doc="Tag protocol ID: 0x8100 or 0x88a8"),
            Register("pcp", 3, RW, doc="Priority code point of the pushed tag"),
            Register("dei", 1, RW, doc="Drop eligible indicator of the pushed tag"),
            Register("vid", 12, RW, doc="VLAN ID of the pushed tag"),
        ]

    def elaborate(self, platform):
        m = Module()
        win, ra = self._plumb(m, max_head=MAC_BYTES + TAG_BYTES, max_drop=MAC_BYTES)
        csr, meta = self.csr, win.o.p.meta
        applies = Signal()
        m.d.comb += applies.eq(~skip_rule(meta) & (meta.vlan_count < 2)
                               & (meta.payload_off + TAG_BYTES <= self.header_bytes))

        # Rewrites sit under m.If: a constant assigned to part of a signal outside any
        # condition becomes an `always @*` with nothing to wake it in Yosys's Verilog, and
        # simulators never run it.
        new = Signal(self.meta_layout)
        m.d.comb += new.eq(meta)
        with m.If(applies):
            move_offsets(m, meta, new, TAG_BYTES)
            m.d.comb += [
                new.vlan_count.eq(meta.vlan_count + 1),
                new.vid.eq(csr.vid),
                new.vid2.eq(meta.vid),
            ]
            with m.If(~meta.vxlan):  # a VNI outranks a VID as the tenant key
                m.d.comb += [new.tenant_kind.eq(TenantKind.VLAN), new.tenant_key.eq(csr.vid)]

        tci = Cat(csr.vid, csr.dei, csr.pcp)
        m.d.comb += [
            ra.ctl.head.eq(Cat(win.window[:8 * MAC_BYTES], be_bytes(csr.tpid, 2),
                               be_bytes(tci, 2))),
            ra.ctl.p.eq(Mux(applies, MAC_BYTES + TAG_BYTES, 0)),
            ra.ctl.d.eq(Mux(applies, MAC_BYTES, 0)),
            ra.ctl.meta.eq(new),
        ]
        self._counters(m, ra, applies)
        return m


class VlanPop(_VlanTask):
    """Pop the outermost IEEE 802.1Q tag"""
    kind = "vlan_pop"
    type_id = type_id("VPOP")
    config = VlanPopConfig
    model = "vlan:VlanPopModel"
    window_bytes = MAC_BYTES + 3 * TAG_BYTES  # through the third tag's TCI

    def elaborate(self, platform):
        m = Module()
        win, ra = self._plumb(m, max_head=MAC_BYTES, max_drop=MAC_BYTES + TAG_BYTES,
                              max_pad=RUNT_BYTES)
        meta = win.o.p.meta
        applies = Signal()
        m.d.comb += applies.eq(~skip_rule(meta) & (meta.vlan_count != 0))

        # Tags end where IP starts, or where the walk ended when no IP follows them.
        tags_end = Signal.like(meta.payload_off)
        tags = Signal.like(meta.payload_off)
        count = Signal(2)
        third_vid = Signal(12)
        m.d.comb += [
            tags_end.eq(Mux(meta.l3_kind[0] != 0, meta.l3_off[0], meta.payload_off)),
            tags.eq((tags_end - 14) >> 2),
            count.eq(Mux(meta.vlan_count == 3, Mux(tags >= 4, 3, 2), meta.vlan_count - 1)),
            third_vid.eq(Cat(win.window[8 * 23:8 * 24], win.window[8 * 22:8 * 22 + 4])),
        ]
        new = Signal(self.meta_layout)
        m.d.comb += new.eq(meta)
        with m.If(applies):
            move_offsets(m, meta, new, -TAG_BYTES)
            m.d.comb += [
                new.vlan_count.eq(count),
                new.vid.eq(Mux(count != 0, meta.vid2, 0)),
                new.vid2.eq(Mux(meta.vlan_count == 3, third_vid, 0)),
            ]
            with m.If(~meta.vxlan):
                m.d.comb += [
                    new.tenant_kind.eq(Mux(count != 0, TenantKind.VLAN, TenantKind.NONE)),
                    new.tenant_key.eq(Mux(count != 0, meta.vid2, 0)),
                ]
        m.d.comb += [
            ra.ctl.head.eq(win.window[:8 * MAC_BYTES]),
            ra.ctl.p.eq(Mux(applies, MAC_BYTES, 0)),
            ra.ctl.d.eq(Mux(applies, MAC_BYTES + TAG_BYTES, 0)),
            ra.ctl.pad.eq(Mux(applies, RUNT_BYTES, 0)),
            ra.ctl.meta.eq(new),
        ]
        self._counters(m, ra, applies)
        return m
