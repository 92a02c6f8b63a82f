"""Every register block type the generator makes, found from the blocks themselves: what a
driver discovering a design (:mod:`supernic.driver.discovery`) recognises."""

from .blocks import chain_block, id_block, parser_block
from .nic.blocks import egress_block, nic_block, store_block
from .nic.classifier import classifier_block
from .nic.rack import rack_block
from .nic.region import region_block
from .nic.scheduler import scheduler_block
from .nic.shape import NicShape
from .nt.base import task_descriptions

__all__ = ["block_types"]


def block_types():
    """``{type ID: (name, (major version,))}`` of the design blocks and every NT's block. Each
    block is built for a small shape: its type and version do not depend on the shape."""
    shape = NicShape(tenants=1, ports=1, regions=1)
    blocks = {
        "id": id_block(), "parser": parser_block(), "nic": nic_block(shape),
        "classifier": classifier_block("classifier", shape),
        "scheduler": scheduler_block("scheduler", shape), "store": store_block(shape),
        "egress": egress_block(shape), "rack": rack_block(shape), "region": region_block(0, []), "chain": chain_block(),
    }
    for kind, task in task_descriptions().items():
        blocks[kind] = task.register_block(kind, task.check_params({}))
    found = {}
    for name, block in blocks.items():
        if block.type_id in found:
            raise RuntimeError(f"blocks {found[block.type_id][0]!r} and {name!r} share type "
                               f"{block.type_id:#010x}")
        found[block.type_id] = (name, (block.version >> 16,))
    return found
