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
from ..config import DesignConfig
from ..csr.axil import AxiLiteSignature
from ..csr.regfile import RegisterFile
from ..csr.registers import R, Register, RegisterBlock, RegisterMap
from ..parser.parser import HeaderParser
from ..separate import separate
from ..shell import SHELL_MEMBERS, connect_port, registered_reset
from ..top import CSR_ADDR_WIDTH, drive_id, id_block
from .classifier import TenantClassifier, classifier_block
from .egress import EgressStage
from .layout import NicShape, nic_layout
from .link import RegionLink
from .region import Region, region_register_blocks
from .scheduler import TenantScheduler, scheduler_block
from .store import PacketStore

__all__ = ["MultiTenantNic", "nic_register_map", "nic_shape", "load_personalities",
           "NIC_TYPE", "STORE_TYPE", "EGRESS_TYPE"]

NIC_TYPE = 0x4E494353     # 'NICS'
STORE_TYPE = 0x53544F52   # 'STOR'
EGRESS_TYPE = 0x45475253  # 'EGRS'


def nic_shape(config: DesignConfig):
    return NicShape(config.data_width, config.header_bytes, config.tenants, config.ports,
                    len(config.regions))


def load_personalities(config: DesignConfig):
    """Per region, the :class:`~supernic.hw.chain.spec.ChainSpec` of each personality."""
    from ..chain.spec import load_chain
    cache = {}
    out = []
    for paths in config.region_paths():
        out.append([cache.setdefault(str(p), load_chain(p)) for p in paths])
    return out


def nic_block(shape):
    return RegisterBlock("nic", NIC_TYPE, 0x0001_0000, [
        Register("tenants", 8, R, doc="Tenants served"),
        Register("ports", 8, R, doc="Ingress ports"),
        Register("regions", 8, R, doc="Regions"),
        Register("header_beats", 16, R, doc="Beats a header-only chain receives"),
    ], doc="Shape of the multi-tenant NIC")


def parser_block(port):
    return RegisterBlock(f"parser{port}", 0x50415253, 0x0001_0000, [
        Register("packets", 64, R, doc="Packets that left the parser"),
        Register("bytes", 64, R, doc="Bytes that left the parser"),
        Register("malformed", 64, R, doc="Packets with any error flag set"),
    ], doc=f"Header parser counters, port {port}")


def store_block(shape):
    regs = [
        Register("drops", 64, R, doc="Packets dropped whole: the packet store was full"),
        Register("drop_bytes", 64, R, doc="Bytes of those packets"),
        Register("stall_drops", 64, R,
                 doc="Packets dropped because their region stopped taking beats (cut, or "
                     "sent to it while it was stalled)"),
        Register("stall_cuts", 64, R,
                 doc="Packets that left cut short (last beat flagged length_error): their "
                     "region stopped giving beats half-way through them"),
        Register("used", 32, R, doc="Payload beats held now"),
        Register("peak", 32, R, doc="Most payload beats ever held"),
    ]
    for t in range(shape.tenants):
        regs.append(Register(f"t{t}_region_cycles", 64, R,
                             doc=f"Cycles tenant {t}'s packets occupied a region's input"))
    for r in range(shape.regions):
        regs += [Register(f"r{r}_busy", 64, R, doc=f"Cycles region {r}'s input was busy"),
                 Register(f"r{r}_in_flight", 16, R, doc=f"Packets inside region {r} now"),
                 Register(f"r{r}_stalled", 1, R,
                          doc=f"Region {r} stopped taking beats and is cut off until it has "
                              f"given back every packet it holds")]
    return RegisterBlock("store", STORE_TYPE, 0x0001_0001, regs,
                         doc="Packet store and region occupancy")


def egress_block(shape):
    regs = []
    for t in range(shape.tenants):
        regs += [Register(f"t{t}_delivered", 64, R, doc=f"Tenant {t}: packets delivered"),
                 Register(f"t{t}_delivered_bytes", 64, R, doc=f"Tenant {t}: bytes delivered"),
                 Register(f"t{t}_dropped", 64, R, doc=f"Tenant {t}: packets an NT dropped"),
                 Register(f"t{t}_dropped_bytes", 64, R, doc=f"Tenant {t}: their bytes")]
    return RegisterBlock("egress", EGRESS_TYPE, 0x0001_0000, regs,
                         doc="Egress counters per tenant")


def nic_register_map(config: DesignConfig, personalities=None):
    shape = nic_shape(config)
    personalities = personalities or load_personalities(config)
    blocks = [id_block(), nic_block(shape)]
    for p in range(shape.ports):
        blocks += [parser_block(p),
                   classifier_block(f"classifier{p}", shape, config.classifier_entries)]
    blocks += [scheduler_block("scheduler", shape, config.table_size), store_block(shape),
               egress_block(shape)]
    branch_of = dict(config.links)
    for r, specs in enumerate(personalities):
        blocks += region_register_blocks(r, specs, r in config.yieldable_regions,
                                         branch_of.get(r))
    return RegisterMap(blocks)


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
        for p in range(shape.ports):
            rx = AxiStreamToPacket(cfg.data_width)
            parser = HeaderParser(*cfg.parser_args())
            classifier = TenantClassifier(shape, p, cfg.classifier_entries)
            m.submodules[f"rx{p}"] = rx
            m.submodules[f"parser{p}"] = separate(
                parser, ("parser", *cfg.parser_args()), "parser")
            m.submodules[f"classifier{p}"] = classifier
            connect_port(m, getattr(self, f"s_axis{p}"), rx.s_axis, in_reset)
            wiring.connect(m, rx.o, parser.i)
            wiring.connect(m, parser.o, classifier.i)
            wiring.connect(m, classifier.o, sched.i[p])
            wiring.connect(m, getattr(csr.fields, f"classifier{p}"), classifier.csr)
            m.d.comb += [
                csr.field(f"parser{p}", "packets").eq(parser.packets),
                csr.field(f"parser{p}", "bytes").eq(parser.bytes),
                csr.field(f"parser{p}", "malformed").eq(parser.errors),
            ]

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
        m.d.comb += [
            csr.field("store", "drops").eq(store.store_drops),
            csr.field("store", "drop_bytes").eq(store.store_drop_bytes),
            csr.field("store", "stall_drops").eq(store.stall_drops),
            csr.field("store", "stall_cuts").eq(store.stall_cuts),
            csr.field("store", "used").eq(store.store_used),
            csr.field("store", "peak").eq(store.store_peak),
        ]
        for t in range(shape.tenants):
            m.d.comb += csr.field("store", f"t{t}_region_cycles").eq(store.region_cycles[t])
        for r in range(shape.regions):
            m.d.comb += [csr.field("store", f"r{r}_busy").eq(store.region_busy[r]),
                         csr.field("store", f"r{r}_in_flight").eq(store.region_in_flight[r]),
                         csr.field("store", f"r{r}_stalled").eq(store.region_stalled[r])]

        m.submodules.egress = egress = EgressStage(shape)
        wiring.connect(m, store.o, egress.i)
        for t in range(shape.tenants):
            for name in ("delivered", "delivered_bytes", "dropped", "dropped_bytes"):
                m.d.comb += csr.field("egress", f"t{t}_{name}").eq(getattr(egress, name)[t])
        self._connect_done(m, sched, store, egress)

        m.submodules.tx = tx = PacketToAxiStream(cfg.data_width, self.user_layout)
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
