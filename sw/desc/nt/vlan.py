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

Configuration: ``vlan_push`` takes ``vid`` (required, 0 to 4094), ``pcp`` (0), ``dei`` (0) and
``tpid`` (0x8100 or 0x88a8; 0x8100), held in RW registers of the same names; ``vlan_pop`` takes
none. The helpers that check such tables (:func:`check_settings` and the ``*_setting`` checks)
serve the VXLAN NTs too.
"""

import ipaddress

from .base import ConfigError, Scope, TaskConfig, TaskDescription, block_type_name
from ..registers import RW, Register

__all__ = [
    "VlanPushDescription", "VlanPopDescription", "VlanPushConfig", "VlanPopConfig", "TPIDS",
    "MAC_BYTES", "TAG_BYTES", "VID_MAX", "REQUIRED", "check_settings", "as_int", "int_setting",
    "choice_setting", "mac_setting", "ipv4_setting",
]

MAC_BYTES = 12  # destination and source MAC addresses
TAG_BYTES = 4   # IEEE 802.1Q: TPID, then TCI (PCP 3 bits, DEI 1 bit, VID 12 bits)
TPIDS = (0x8100, 0x88A8)  # IEEE 802.1Q C-tag, S-tag (802.1ad)
VID_MAX = 4094  # IEEE 802.1Q Table 9-2: VID 0xFFF is reserved; 0 is a priority tag


# ---- configuration helpers (shared with vxlan.py) -------------------------------------------

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


# ---- descriptions -------------------------------------------------------------------------


class _VlanTaskDescription(TaskDescription):
    # The tag sits inside the parser window and no length field changes. Pop's padding only
    # touches frames shorter than 64 bytes, which lie wholly inside the window.
    scope = Scope.HEADER
    needs_frame = True  # the bytes behind the tag move by four
    modifies = True
    drops = False


class VlanPushDescription(_VlanTaskDescription):
    kind = "vlan_push"
    doc = "Push an IEEE 802.1Q tag after the MAC addresses"
    type_id = block_type_name("VPSH")
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


class VlanPopDescription(_VlanTaskDescription):
    kind = "vlan_pop"
    doc = "Pop the outermost IEEE 802.1Q tag"
    type_id = block_type_name("VPOP")
    config = VlanPopConfig
    model = "vlan:VlanPopModel"
