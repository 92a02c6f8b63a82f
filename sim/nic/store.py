"""Python model of :class:`~supernic.hw.nic.store.PacketStore`.

Deliberately naive: a packet is bytes plus its metadata and tag; the model says what region it
reaches and what leaves ``o`` for it, by slicing bytes the way the contract describes, without
the memory, the free list or the linked lists. Whether a header-only packet is admitted depends
on how full the store is when its first beat arrives, which depends on timing, so the model
does not decide it: :meth:`PacketStoreModel.dispatch` gives the outcome if admitted and
whether the packet may be dropped (``droppable``) or must be (``must_drop``); the bench takes
the drop decisions from what the hardware delivers and checks them against these.
"""

import copy
from dataclasses import dataclass

from ...desc.nic.shape import NicShape
from ...desc.meta import TAIL_FLAGS

__all__ = ["StoreOutcome", "PacketStoreModel", "beats_of", "last_beat_bytes"]


def beats_of(length, beat_bytes):
    """Beats a frame of ``length`` bytes takes (an empty frame still takes one)."""
    return max(1, -(-length // beat_bytes))


def last_beat_bytes(length, beat_bytes):
    return length - (beats_of(length, beat_bytes) - 1) * beat_bytes


@dataclass
class StoreOutcome:
    """What the store does with one dispatched packet."""
    region: int | None        # None: misrouted (dropped whole, counted in ``misrouted``)
    region_frame: bytes       # what the region receives
    out_frame: bytes          # what leaves ``o`` (if not dropped)
    out_hdr: dict             # metadata on the last output beat (tail flags included)
    tag: dict                 # the tag on every output beat (as dispatched)
    droppable: bool           # a header-only packet with a payload: the store may refuse it
    must_drop: bool           # its payload is larger than the whole store
    header_error: bool        # the region changed the header length by a part of a beat


class PacketStoreModel:
    """``region_fn(region, frame) -> frame`` is the regions' behaviour (in order, one out per
    in); ``header_only[r]`` says which regions take header beats only."""

    def __init__(self, shape: NicShape, store_beats, header_only, region_fn):
        if len(header_only) != shape.regions:
            raise ValueError(f"Store model header_only must have {shape.regions} entries, "
                             f"not {len(header_only)}")
        self.shape = shape
        self.store_beats = store_beats
        self.header_only = [bool(h) for h in header_only]
        self.region_fn = region_fn

    def dispatch(self, frame, hdr, tag):
        """``hdr`` is the metadata of the packet's last beat (tail flags included), ``tag``
        the NIC tag (``tag["beats"]`` may disagree with the frame: malformed input)."""
        bb, hbeats = self.shape.beat_bytes, self.shape.header_beats
        tail = {f: hdr["flags"][f] for f in TAIL_FLAGS}
        region = tag["region"]
        if region >= self.shape.regions:
            return StoreOutcome(None, b"", b"", hdr, tag, False, True, False)
        actual = beats_of(len(frame), bb)
        declared = tag["beats"]
        header_only = self.header_only[region]
        payload = header_only and declared > hbeats
        flag_keep = False
        if not header_only:
            region_frame = frame
            region_tail = dict(tail)
        elif actual <= hbeats:
            region_frame = frame
            region_tail = dict(tail)
        else:
            region_frame = frame[:hbeats * bb]
            # The H-th beat is not the frame's last: tail flags read 0 there; a frame longer
            # than its tag's beats (nothing declared past the header) is cut and flagged.
            region_tail = {f: 0 for f in TAIL_FLAGS}
            if not payload:
                region_tail["keep_error"] = 1
        back = self.region_fn(region, region_frame)
        header_error = False
        out_tail = region_tail
        out_frame = back
        if payload:
            room = declared - hbeats
            stored = frame[hbeats * bb:(hbeats + room) * bb] if actual > hbeats else b""
            if actual <= hbeats or actual > hbeats + room:
                # Ended inside the header part (an empty end beat is stored) or longer than
                # declared (the rest is cut): the end beat says so.
                flag_keep = True
            out_tail = dict(tail) if actual <= hbeats + room else {f: 0 for f in TAIL_FLAGS}
            if len(back) == 0 or last_beat_bytes(len(back), bb) != bb:
                header_error = True
                out_frame = back
                out_tail = {**region_tail, "keep_error": 1}
            else:
                out_frame = back + stored
                if flag_keep:
                    out_tail["keep_error"] = 1
        out_hdr = copy.deepcopy(hdr)
        out_hdr["flags"].update(out_tail)
        return StoreOutcome(region, region_frame, out_frame, out_hdr, tag, payload,
                            payload and declared - hbeats > self.store_beats, header_error)
