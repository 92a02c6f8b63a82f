"""A region's input buffer in the packet store, and the side FIFO of the packets it holds.

Contract of :class:`RegionInput`:

* ``beats`` takes the beats the store sends the region (data, keep, last, tail flags) and
  ``packets`` one entry per packet, on its first beat: the packet's metadata (with its
  tenant) and its side entry (the tag as dispatched, whether a payload waits in the store,
  and its first slot). Both are streams; a beat or an entry is taken when valid and ready.
* ``o`` gives the region its packets beat by beat: each beat's data, keep and last, and the
  packet's metadata on every beat with that beat's tail flags (``length_error``,
  ``keep_error``). The metadata entry is released with the packet's last beat, so the wide
  metadata is stored once per packet, not per beat (``meta_depth`` packets at most).
* ``sides`` gives the side entries back in dispatch order, for the store's output side,
  which takes one when the region's packet has left the store; ``in_flight`` counts them.
  A chain gives one packet out per packet in, in order (NT contract rule 1), so the head entry
  is always the packet the region gives back next.
* ``free`` is the room in the beat buffer and ``empty`` tells it is empty; both read 0 while
  the region is closed: its side FIFO or metadata FIFO is full, or ``stalled`` is set.
* ``head_tenant`` is the tenant of the packet at the region's input (for region time).
"""

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ...desc.nic.shape import BEATS_BITS, NicShape
from ..parser.meta import meta_layout
from ..stream import PacketSignature

__all__ = ["RegionInput", "region_beat_layout", "region_packet_layout"]


def region_beat_layout(shape: NicShape):
    return data.StructLayout({"data": shape.data_width, "keep": shape.beat_bytes, "last": 1,
                              "tail": 2})


def region_packet_layout(shape: NicShape, side_layout):
    return data.StructLayout({"hdr": meta_layout(shape.header_bytes),
                              "tenant": shape.tenant_bits, "side": side_layout})


class RegionInput(wiring.Component):
    """One region's input buffer; see the module docstring for the contract.

    Parameters
    ----------
    shape : NicShape
    side_layout : shape-castable
        The store's side entry.
    fifo_beats : int
        Beats of the input buffer.
    in_flight : int
        Side entries (packets the region may hold).
    """

    def __init__(self, shape: NicShape, side_layout, fifo_beats: int, in_flight: int):
        self.shape = shape
        self.side_layout = side_layout
        self.fifo_beats = fifo_beats
        self.in_flight_depth = in_flight
        self.meta_depth = min(in_flight, fifo_beats)
        super().__init__({
            "beats": In(stream.Signature(region_beat_layout(shape))),
            "packets": In(stream.Signature(region_packet_layout(shape, side_layout))),
            "o": Out(PacketSignature(shape.data_width, meta_layout(shape.header_bytes))),
            "sides": Out(stream.Signature(side_layout)),
            "stalled": In(1),
            "free": Out(BEATS_BITS),
            "empty": Out(1),
            "in_flight": Out(range(in_flight + 1)),
            "head_tenant": Out(shape.tenant_bits),
        })

    def elaborate(self, platform):
        m = Module()
        shape = self.shape
        hdr_layout = meta_layout(shape.header_bytes)
        beat_layout = region_beat_layout(shape)
        meta_entry = data.StructLayout({"hdr": hdr_layout, "tenant": shape.tenant_bits})
        m.submodules.beats = bq = SyncFIFOBuffered(width=beat_layout.size,
                                                   depth=self.fifo_beats)
        m.submodules.meta = mq = SyncFIFOBuffered(width=meta_entry.size, depth=self.meta_depth)
        m.submodules.side = sq = SyncFIFOBuffered(width=Shape.cast(self.side_layout).width,
                                                  depth=self.in_flight_depth)
        packet = self.packets.payload
        m.d.comb += [
            bq.w_data.eq(self.beats.payload),
            bq.w_en.eq(self.beats.valid),
            self.beats.ready.eq(bq.w_rdy),
        ]
        entry_in = Signal(meta_entry)
        take_packet = self.packets.valid & self.packets.ready
        m.d.comb += [
            entry_in.hdr.eq(packet.hdr),
            entry_in.tenant.eq(packet.tenant),
            mq.w_data.eq(entry_in),
            sq.w_data.eq(packet.side),
            # An entry goes into both FIFOs at once, so it waits for room in both.
            self.packets.ready.eq(mq.w_rdy & sq.w_rdy),
            mq.w_en.eq(take_packet),
            sq.w_en.eq(take_packet),
        ]

        port = self.o
        beat = beat_layout(bq.r_data)
        entry = meta_entry(mq.r_data)
        meta = Signal(hdr_layout)
        m.d.comb += [
            meta.eq(entry.hdr),
            meta.flags.length_error.eq(beat.tail[0]),
            meta.flags.keep_error.eq(beat.tail[1]),
            port.valid.eq(bq.r_rdy & mq.r_rdy),
            port.p.data.eq(beat.data),
            port.p.keep.eq(beat.keep),
            port.p.last.eq(beat.last),
            port.p.meta.eq(meta),
            bq.r_en.eq(port.valid & port.ready),
            mq.r_en.eq(port.valid & port.ready & beat.last),
            self.head_tenant.eq(entry.tenant),
        ]

        m.d.comb += [
            self.sides.payload.eq(sq.r_data),
            self.sides.valid.eq(sq.r_rdy),
            sq.r_en.eq(self.sides.ready),
            self.in_flight.eq(sq.level),
        ]
        open_ = Signal()
        m.d.comb += [
            open_.eq(sq.w_rdy & mq.w_rdy & ~self.stalled),
            self.free.eq(Mux(open_, self.fifo_beats - bq.level, 0)),
            self.empty.eq(open_ & (bq.level == 0)),
        ]
        return m
