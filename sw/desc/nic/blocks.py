"""The multi-tenant NIC's register map: ``id``, ``nic`` (its shape), per port a parser and a
classifier, the scheduler, the packet store, egress, then each region and its NTs' blocks."""

from ..blocks import id_block, parser_block
from ..chain import load_chain
from ..config import DesignConfig
from ..registers import R, Register, RegisterBlock, RegisterMap
from .classifier import classifier_block
from .rack import rack_block
from .region import region_register_blocks
from .scheduler import scheduler_block
from .shape import NicShape

__all__ = ["nic_register_map", "nic_shape", "load_personalities", "nic_block", "store_block",
           "egress_block", "NIC_TYPE", "STORE_TYPE", "EGRESS_TYPE"]

NIC_TYPE = 0x4E494353     # 'NICS'
STORE_TYPE = 0x53544F52   # 'STOR'
EGRESS_TYPE = 0x45475253  # 'EGRS'


def nic_shape(config: DesignConfig):
    return NicShape(config.data_width, config.header_bytes, config.tenants,
                    config.ports + config.rack, len(config.regions), config.rack)


def load_personalities(config: DesignConfig):
    """Per region, the :class:`~supernic.desc.chain.ChainSpec` of each personality."""
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
    # 1.2: header_errors and misrouted (last, so the registers of 1.1 keep their addresses).
    regs += [Register("header_errors", 64, R,
                      doc="Header-only packets whose region changed the header by part of a "
                          "beat: sent with keep_error, their stored payload freed unsent"),
             Register("misrouted", 64, R,
                      doc="Packets dispatched to a region the NIC does not have (a flow-table "
                          "entry naming one), dropped whole")]
    return RegisterBlock("store", STORE_TYPE, 0x0001_0002, regs,
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
    if shape.rack:
        blocks.append(rack_block(shape))
    branch_of = dict(config.links)
    for r, specs in enumerate(personalities):
        blocks += region_register_blocks(r, specs, r in config.yieldable_regions,
                                         branch_of.get(r))
    return RegisterMap(blocks)
