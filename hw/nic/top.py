"""The multi-tenant SuperNIC: the default top level of ``snic build``.

Data path (SuperNIC, arXiv 2109.07744 §3-4)::

    s_axis<p> -> parser<p> -> classifier<p> --+
                                              +-> per-tenant queues -> scheduler -> store
    ...          ...          ...           --+                                      |
                                  region[0..R-1] (chain personalities) <-------------+
                                          |
                    store (payload reattach) -> egress (drops per tenant) -> m_axis

Every port has its own parser and classifier, so tenants are known before anything is shared;
from there each tenant has its own queues (a flood fills only its own), the scheduler shares the
dispatch path, the regions and the egress among the tenants by weighted dominant resource
fairness (or a baseline policy), and the packet store keeps payloads of header-only chains
while their headers are in a region. ``m_axis`` carries the packet with the parser metadata and
the NIC tag (tenant, ingress port, sequence number, region) on ``tuser``.

A design with a rack port (``nic.rack``, :mod:`supernic.desc.nic.rack`) has one more ingress
port, the last: its rack frames lose their header (:mod:`.rack_ingress`) before its parser.
Behind each endpoint port's classifier a redirected tenant's packets turn off
(:mod:`.redirect`) to the rack egress (:mod:`.rack_egress`), which shares ``m_axis`` between
them, as rack frames, and the egress stage's packets.

A design may pair regions (``links``, :mod:`.link`): with the link on, the pair runs the two
parts of a DAG split across them as one region.

Every ingress packet is delivered or counted once, by reason: ``classifier<p>.dropped``
(unmatched), ``scheduler`` queue-full and disabled-tenant drops, ``store.drops`` (the packet
store was full), ``store.stall_drops`` (its region stopped taking beats with the packet
holding the store's shared input, or was stalled: :mod:`.store`), ``egress`` per-tenant
``dropped`` (an NT dropped it).

Register blocks, in order: ``id``, ``nic`` (shape), per port ``parser<p>`` and
``classifier<p>``, ``scheduler``, ``store``, ``egress``, then per region ``region<r>`` followed
by the blocks of its personalities' NTs (``r<r>_<chain>_<node>``).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from ...desc.config import DesignConfig
from ..csr.axil import AxiLiteSignature
from ..csr.regfile import RegisterFile
from ..parser.parser import HeaderParser
from ..separate import separate
from ..shell import SHELL_MEMBERS, connect_port, registered_reset
from ..top import drive_id
from ...desc.blocks import CSR_ADDR_WIDTH
from ...desc.nic.blocks import load_personalities, nic_register_map, nic_shape
from .classifier import TenantClassifier
from .egress import EgressStage
from .layout import nic_layout
from .link import RegionLink
from .rack_egress import RackEgress
from .rack_ingress import RackIngress
from .redirect import RedirectSplit
from .region import Region
from .scheduler import TenantScheduler
from .store import PacketStore

__all__ = ["MultiTenantNic"]

class MultiTenantNic(wiring.Component):
    def __init__(self, config: DesignConfig, personalities=None):
        if not config.is_nic:
            raise ValueError("MultiTenantNic needs a configuration with nic.regions")
        self.config = config
        self.shape = shape = nic_shape(config)
        self.personalities = personalities or load_personalities(config)
        self.regmap = nic_register_map(config, self.personalities)
        self.user_layout = nic_layout(shape)
        members = {**SHELL_MEMBERS}
        members.update({f"s_axis{p}": In(AxiStreamSignature(config.data_width))
                        for p in range(shape.ports)})
        members["m_axis"] = Out(AxiStreamSignature(config.data_width, self.user_layout.size))
        members["s_axil"] = In(AxiLiteSignature(CSR_ADDR_WIDTH))
        super().__init__(members)

    def elaborate(self, platform):
        cfg, shape = self.config, self.shape
        m = Module()
        in_reset = registered_reset(m, self)
        m.submodules.csr = csr = RegisterFile(self.regmap, CSR_ADDR_WIDTH)
        connect_port(m, self.s_axil, csr.s_axil, in_reset)
        drive_id(m, csr, cfg.build_id, cfg.data_width, cfg.header_bytes)
        m.d.comb += [
            csr.field("nic", "tenants").eq(shape.tenants),
            csr.field("nic", "ports").eq(shape.ports),
            csr.field("nic", "regions").eq(shape.regions),
            csr.field("nic", "header_beats").eq(shape.header_beats),
        ]

        m.submodules.scheduler = sched = TenantScheduler(
            shape, cfg.queue_beats, cfg.table_size, cfg.policies)
        wiring.connect(m, csr.fields.scheduler, sched.csr)
        if shape.rack:
            # The rack port and the redirect action (sw/desc/nic/rack.py).
            m.submodules.rack_egress = rack = RackEgress(shape)
            wiring.connect(m, csr.fields.rack, rack.csr)
        for p in range(shape.ports):
            rx = AxiStreamToPacket(cfg.data_width)
            parser = HeaderParser(*cfg.parser_args())
            classifier = TenantClassifier(shape, p, cfg.classifier_entries)
            m.submodules[f"rx{p}"] = rx
            m.submodules[f"parser{p}"] = separate(
                parser, ("parser", *cfg.parser_args()), "parser")
            m.submodules[f"classifier{p}"] = classifier
            connect_port(m, getattr(self, f"s_axis{p}"), rx.s_axis, in_reset)
            if p == shape.rack_port:
                m.submodules.rack_ingress = ingress = RackIngress(cfg.data_width)
                wiring.connect(m, rx.o, ingress.i)
                wiring.connect(m, ingress.o, parser.i)
                m.d.comb += [ingress.nic_id.eq(rack.nic_id), rack.rx_took.eq(ingress.took),
                             rack.rx_bad.eq(ingress.bad)]
            else:
                wiring.connect(m, rx.o, parser.i)
            wiring.connect(m, parser.o, classifier.i)
            if shape.rack and p != shape.rack_port:
                m.submodules[f"redirect{p}"] = split = RedirectSplit(shape)
                wiring.connect(m, classifier.o, split.i)
                wiring.connect(m, split.o, sched.i[p])
                wiring.connect(m, split.r, getattr(rack, f"r{p}"))
                m.d.comb += [split.enable.eq(rack.enable), split.buckets.eq(rack.buckets)]
            else:
                wiring.connect(m, classifier.o, sched.i[p])
            wiring.connect(m, getattr(csr.fields, f"classifier{p}"), classifier.csr)
            wiring.connect(m, getattr(csr.fields, f"parser{p}"), parser.csr)

        m.submodules.store = store = PacketStore(shape, cfg.store_beats, cfg.region_fifo_beats,
                                                  stall_cycles=cfg.stall_cycles)
        wiring.connect(m, sched.o, store.i)
        m.d.comb += [sched.region_free.eq(store.region_free),
                     sched.region_empty.eq(store.region_empty)]
        online = Signal(shape.regions)
        header_only = Signal(shape.regions)
        branch_of = dict(cfg.links)
        linked = {r for pair in cfg.links for r in pair}
        regions = []
        for r, specs in enumerate(self.personalities):
            region = Region(shape, r, specs,
                            cfg.yieldable_state if r in cfg.yieldable_regions else False,
                            branch_of.get(r))
            m.submodules[f"region{r}"] = region
            regions.append(region)
            wiring.connect(m, getattr(csr.fields, f"region{r}"), region.csr)
            for block, port in region.task_ports():
                wiring.connect(m, getattr(csr.fields, block), port)
            m.d.comb += header_only[r].eq(region.header_only)
            if r not in linked:
                m.d.comb += online[r].eq(region.taking)
                wiring.connect(m, store.to_region[r], region.i)
                wiring.connect(m, region.o, store.from_region[r])
        for k, (a, b) in enumerate(cfg.links):
            # A DAG's branches in region b beside region a (hw/nic/link.py).
            m.submodules[f"link{k}"] = link = RegionLink(shape)
            ra, rb = regions[a], regions[b]
            wiring.connect(m, store.to_region[a], link.store_a_in)
            wiring.connect(m, link.store_a_out, store.from_region[a])
            wiring.connect(m, store.to_region[b], link.store_b_in)
            wiring.connect(m, link.store_b_out, store.from_region[b])
            wiring.connect(m, link.region_a_i, ra.i)
            wiring.connect(m, ra.o, link.region_a_o)
            wiring.connect(m, link.region_b_i, rb.i)
            wiring.connect(m, rb.o, link.region_b_o)
            m.d.comb += [
                link.request.eq(ra.link_request),
                ra.linked.eq(link.linked),
                link.idle.eq((store.region_in_flight[a] == 0)
                             & (store.region_in_flight[b] == 0)),
                link.b_online_in.eq(rb.taking),
                # Linked, the pair takes packets only when both regions do.
                online[a].eq(ra.taking & (rb.taking | ~link.linked)),
                online[b].eq(link.b_online),
            ]
        m.d.comb += [sched.region_online.eq(online), sched.header_only.eq(header_only),
                     store.header_only.eq(header_only)]
        wiring.connect(m, csr.fields.store, store.csr)

        m.submodules.egress = egress = EgressStage(shape)
        wiring.connect(m, store.o, egress.i)
        wiring.connect(m, csr.fields.egress, egress.csr)
        self._connect_done(m, sched, store, egress)

        m.submodules.tx = tx = PacketToAxiStream(cfg.data_width, self.user_layout)
        if shape.rack:
            wiring.connect(m, egress.o, rack.i)
            wiring.connect(m, rack.o, tx.i)
        else:
            wiring.connect(m, egress.o, tx.i)
        connect_port(m, self.m_axis, tx.m_axis, in_reset)
        return m

    def _connect_done(self, m, sched, store, egress):
        """Completions for the scheduler's in-flight counts: a packet reached the egress, or
        the store refused it after dispatch."""
        m.d.comb += [sched.done_valid.eq(egress.done_valid),
                     sched.done_tenant.eq(egress.done_tenant),
                     sched.drop_valid.eq(store.drop_valid),
                     sched.drop_tenant.eq(store.drop_tenant)]
