"""The Ethernet MAC the board tops put in front of the NIC: GMII on one side, the NIC's beats
on the other.

Receive: :class:`~.mac_rx.GmiiReceiver` and a :class:`~.frame_fifo.FrameFifo` in the PHY's
receive clock domain (``rx``; the PHY's clock, not ours), whole good frames through an
``AsyncFIFO`` into ``sync``, packed into beats (``o``). Transmit: beats (``i``) unpacked into
bytes, a ``FrameFifo`` so a frame starts only when it is all there, and
:class:`~.mac_tx.GmiiTransmitter`, all in ``sync``: on a board ``sync`` is the 125 MHz
transmit clock. With ``rx_domain="sync"`` there is no crossing (one clock for both).

Counters: the receiver's (:data:`~.mac_rx.RX_COUNTERS`, in the ``rx`` domain), ``rx_overflows``
(a good frame the receive FIFO had no room for), ``tx_frames``, ``tx_underruns`` and
``tx_overflows`` (a frame larger than the transmit FIFO, dropped)."""

from amaranth.hdl import DomainRenamer, Module
from amaranth.lib import wiring
from amaranth.lib.fifo import AsyncFIFO
from amaranth.lib.wiring import In, Out

from ..stream import PacketSignature
from .frame_fifo import FrameFifo
from .gmii import GmiiSignature
from .mac_rx import RX_COUNTERS, GmiiReceiver
from .mac_tx import GmiiTransmitter
from .widen import BeatsToBytes, BytesToBeats

__all__ = ["EthernetMac", "MAC_COUNTERS"]

MAC_COUNTERS = tuple(f"rx_{name}" for name in RX_COUNTERS) + (
    "rx_overflows", "tx_frames", "tx_underruns", "tx_overflows")


class EthernetMac(wiring.Component):
    def __init__(self, data_width=64, max_frame=1522, rx_fifo_bytes=4096, tx_fifo_bytes=4096,
                 rx_domain="rx"):
        for name, size in (("rx_fifo_bytes", rx_fifo_bytes), ("tx_fifo_bytes", tx_fifo_bytes)):
            if not isinstance(size, int) or size < max_frame:
                raise ValueError(f"{name} ({size!r}) must hold a frame of max_frame "
                                 f"({max_frame}) bytes")
        self.data_width = data_width
        self.max_frame = max_frame
        self.rx_fifo_bytes = 1 << (rx_fifo_bytes - 1).bit_length()
        self.tx_fifo_bytes = 1 << (tx_fifo_bytes - 1).bit_length()
        self.rx_domain = rx_domain
        super().__init__({
            "gmii": Out(GmiiSignature()),
            "o": Out(PacketSignature(data_width)),      # received frames, to the NIC
            "i": In(PacketSignature(data_width)),       # frames to send, from the NIC
            **{name: Out(32) for name in MAC_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        in_rx = DomainRenamer({"sync": self.rx_domain}) if self.rx_domain != "sync" else (
            lambda x: x)
        m.submodules.receiver = receiver = in_rx(GmiiReceiver(self.max_frame))
        m.submodules.rx_fifo = rx_fifo = in_rx(FrameFifo(self.rx_fifo_bytes))
        m.submodules.rx_pack = pack = BytesToBeats(self.data_width)
        m.d.comb += [receiver.rxd.eq(self.gmii.rxd), receiver.rx_dv.eq(self.gmii.rx_dv),
                     receiver.rx_er.eq(self.gmii.rx_er)]
        wiring.connect(m, receiver.o, rx_fifo.i)
        if self.rx_domain != "sync":
            # Whole good frames only cross: the crossing's FIFO needs no rollback.
            m.submodules.rx_cdc = cdc = AsyncFIFO(width=9, depth=16, r_domain="sync",
                                                  w_domain=self.rx_domain)
            m.d.comb += [cdc.w_data.eq(rx_fifo.o.p.as_value()), cdc.w_en.eq(rx_fifo.o.valid),
                         rx_fifo.o.ready.eq(cdc.w_rdy),
                         pack.i.p.eq(cdc.r_data), pack.i.valid.eq(cdc.r_rdy),
                         cdc.r_en.eq(pack.i.ready)]
        else:
            wiring.connect(m, rx_fifo.o, pack.i)
        wiring.connect(m, pack.o, wiring.flipped(self.o))
        for name in RX_COUNTERS:
            m.d.comb += getattr(self, f"rx_{name}").eq(getattr(receiver, name))
        m.d.comb += self.rx_overflows.eq(rx_fifo.overflows)

        m.submodules.tx_unpack = unpack = BeatsToBytes(self.data_width)
        m.submodules.tx_fifo = tx_fifo = FrameFifo(self.tx_fifo_bytes, sender_waits=True)
        m.submodules.transmitter = transmitter = GmiiTransmitter()
        wiring.connect(m, wiring.flipped(self.i), unpack.i)
        m.d.comb += [tx_fifo.i.p.data.eq(unpack.o.p.data), tx_fifo.i.p.last.eq(unpack.o.p.last),
                     tx_fifo.i.valid.eq(unpack.o.valid), unpack.o.ready.eq(tx_fifo.i.ready)]
        wiring.connect(m, tx_fifo.o, transmitter.i)
        m.d.comb += [self.gmii.txd.eq(transmitter.txd), self.gmii.tx_en.eq(transmitter.tx_en),
                     self.gmii.tx_er.eq(transmitter.tx_er),
                     self.tx_frames.eq(transmitter.frames),
                     self.tx_underruns.eq(transmitter.underruns),
                     self.tx_overflows.eq(tx_fifo.overflows)]
        return m
