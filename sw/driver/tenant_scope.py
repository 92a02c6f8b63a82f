"""Register access scoped to one tenant.

The NIC has one register space for every tenant; the top level names each region's NT blocks
``r{region}_{chain}_{node}`` (``r2_web_firewall``). A tenant's control software gets a
:class:`TenantView` (by block and register name) or a :class:`TenantScopedBus` (by address)
that reaches only the blocks whose names start with one of its allowed prefixes, usually the
prefixes of the regions the allocation gave it (:func:`region_prefixes`). Shared blocks (by
default ``id``, which identifies the design) may be read but not written; every other access,
including one to an address in no block, raises :class:`PermissionError` naming the tenant and
the address or block, and never reaches the bus.

A prefix matches a block name that equals it or continues it with ``_``, so ``r1`` grants
``r1_web_acl`` but not ``r10_web_acl``; a prefix that ends in ``_`` matches any continuation.

The walk of :func:`supernic.driver.discovery.discover` reads every block's header, so it is
refused through a scoped bus: discovery belongs to the host driver, which hands the resulting
register map to each tenant's view.
"""

import bisect

from .discovery import read_register, write_register
from .transport import RegisterBus

__all__ = ["RegisterScope", "TenantScopedBus", "TenantView", "region_prefixes",
           "SHARED_READABLE"]

#: Blocks every tenant may read: the design's identity, which holds no tenant's state.
SHARED_READABLE = ("id",)


def region_prefixes(regions):
    """Block-name prefixes of the given region numbers (``[2, 3]`` -> ``("r2", "r3")``)."""
    regions = tuple(regions)
    for region in regions:
        if not isinstance(region, int) or isinstance(region, bool) or region < 0:
            raise ValueError(f"Region must be a non-negative integer, not {region!r}")
    return tuple(f"r{region}" for region in regions)


def _names(thing, names):
    if isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise ValueError(f"{thing} must be a sequence of strings, not {names!r}")
    names = tuple(names)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{thing} must be a sequence of non-empty strings, not {names!r}")
    return names


def _matches(prefix, name):
    if prefix.endswith("_"):
        return name.startswith(prefix)
    return name == prefix or name.startswith(prefix + "_")


class RegisterScope:
    """Which register addresses ``tenant`` may read and write.

    ``regmap_json`` is the design's register map (``RegisterMap.to_json``); ``allowed_prefixes``
    selects the tenant's blocks (read and write); ``shared_readable`` names blocks it may only
    read; ``readable_registers`` names single registers of other blocks it may read, as
    ``(block, register)`` pairs (its own counters in a block all tenants share). The same scope
    guards a tenant's bus in the client library (:class:`TenantScopedBus`) and every request of
    a tenant's connection in the device server (:mod:`supernic.driver.access`)."""

    def __init__(self, regmap_json, tenant, allowed_prefixes, shared_readable=SHARED_READABLE,
                 readable_registers=()):
        if not isinstance(regmap_json, dict) or "blocks" not in regmap_json:
            raise TypeError(f"Register map must be the JSON of a RegisterMap, not {regmap_json!r}")
        if isinstance(tenant, bool) or not isinstance(tenant, (int, str)):
            raise ValueError(f"Tenant must be an integer or a name, not {tenant!r}")
        self.regmap_json = regmap_json
        self.tenant = tenant
        self.allowed_prefixes = _names("Allowed prefixes", allowed_prefixes)
        self.shared_readable = frozenset(_names("Shared readable blocks", shared_readable))
        spans = sorted((block["base"], block["base"] + block["size"], block["name"])
                       for block in regmap_json["blocks"])
        self._bases = [base for base, _, _ in spans]
        self._spans = spans
        #: Names of the blocks the tenant may read and write, in address order.
        self.blocks = tuple(name for _, _, name in spans
                            if any(_matches(prefix, name) for prefix in self.allowed_prefixes))
        wanted = set(readable_registers)
        self._readable_words = {
            register["address"] + 4 * word
            for block in regmap_json["blocks"] for register in block["registers"]
            if (block["name"], register["name"]) in wanted
            for word in range(register.get("words", 1))}

    def block_at(self, address):
        """Name of the block that holds byte ``address``, or ``None``."""
        index = bisect.bisect_right(self._bases, address) - 1
        if index >= 0:
            base, end, name = self._spans[index]
            if base <= address < end:
                return name
        return None

    def may_read_block(self, name):
        return name in self.blocks or name in self.shared_readable

    def may_write_block(self, name):
        return name in self.blocks

    def may_read(self, address):
        name = self.block_at(address)
        return name is not None and (self.may_read_block(name)
                                     or address in self._readable_words)

    def may_write(self, address):
        name = self.block_at(address)
        return name is not None and self.may_write_block(name)

    def refusal(self, operation, address):
        """The one-line reason ``operation`` ("read", "write") of ``address`` is refused."""
        name = self.block_at(address)
        if name is None:
            where = "no register block"
        elif name in self.shared_readable:
            where = f"block {name!r}, shared read-only"
        elif address in self._readable_words:
            where = f"block {name!r}, a register it may only read"
        else:
            where = f"block {name!r}, not one of its blocks"
        return f"Tenant {self.tenant!r} may not {operation} {address:#010x} ({where})"


class TenantScopedBus(RegisterBus):
    """A :class:`~supernic.driver.transport.RegisterBus` that passes to ``bus`` only the
    accesses ``tenant`` may make (a :class:`RegisterScope` of the other arguments)."""

    def __init__(self, bus, regmap_json, tenant, allowed_prefixes,
                 shared_readable=SHARED_READABLE):
        if not isinstance(bus, RegisterBus):
            raise TypeError(f"Scoped bus must wrap a RegisterBus, not {bus!r}")
        self.bus = bus
        self.scope = RegisterScope(regmap_json, tenant, allowed_prefixes, shared_readable)
        self.regmap_json = regmap_json
        self.tenant = tenant
        self.allowed_prefixes = self.scope.allowed_prefixes
        self.shared_readable = self.scope.shared_readable
        self.blocks = self.scope.blocks

    def block_at(self, address):
        return self.scope.block_at(address)

    def may_read_block(self, name):
        return self.scope.may_read_block(name)

    def may_write_block(self, name):
        return self.scope.may_write_block(name)

    async def read_word(self, address):
        if not self.scope.may_read(address):
            raise PermissionError(self.scope.refusal("read", address))
        return await self.bus.read_word(address)

    async def write_word(self, address, value, strobe=0b1111):
        if not self.scope.may_write(address):
            raise PermissionError(self.scope.refusal("write", address))
        return await self.bus.write_word(address, value, strobe)


class TenantView:
    """Registers of one tenant by block and register name, over a :class:`TenantScopedBus`
    (same arguments)."""

    def __init__(self, bus, regmap_json, tenant, allowed_prefixes,
                 shared_readable=SHARED_READABLE):
        self.bus = TenantScopedBus(bus, regmap_json, tenant, allowed_prefixes, shared_readable)

    @property
    def tenant(self):
        return self.bus.tenant

    @property
    def blocks(self):
        return self.bus.blocks

    def _check(self, operation, block, allowed):
        if not allowed:
            kind = ("shared read-only" if block in self.bus.shared_readable
                    else "not one of its blocks")
            raise PermissionError(
                f"Tenant {self.tenant!r} may not {operation} block {block!r} ({kind})")

    async def read(self, block, register):
        """Read ``register`` of ``block`` (two-word registers lo word first)."""
        self._check("read", block, self.bus.may_read_block(block))
        return await read_register(self.bus, self.bus.regmap_json, block, register)

    async def write(self, block, register, value):
        """Write ``register`` of ``block``."""
        self._check("write", block, self.bus.may_write_block(block))
        await write_register(self.bus, self.bus.regmap_json, block, register, value)
