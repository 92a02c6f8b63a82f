"""Suspend, resume, capture and restore the state of a region's chain personality, on a NIC
built with ``nic.yieldable = true`` (hw/transform; the ``state_*`` registers of each
``region<r>`` block).

    region = RegionState(bus, description, 3, wait=...)
    await region.suspend()                      # at the next packet boundary, drained
    snapshot = await region.capture()           # every word of the state map, decoded
    await region.restore(snapshot)              # here or in another region with the chain
    await region.resume()

Migration to the chain's Python model and back is :mod:`supernic.sim.model_migration`.

The same code runs over any :class:`~supernic.driver.transport.RegisterBus`: the virtual
device, a cocotb simulation, or a board. A snapshot is plain JSON: the personality, the build
it came from, the raw words and, by the state map's names, the values (flip-flops, read-port
registers, memory rows), so software can read what the hardware held.
"""

import asyncio
import time

from ..desc.errors import SnicError
from ..desc.nic.region import personality_block_name
from ..desc.statemap import StateMap
from .discovery import read_register, write_register

__all__ = ["RegionState", "StateError", "service_traps", "register_of_port"]


def register_of_port(port):
    """``(node, register)`` behind a state item's ``port`` (sw/desc/statemap.py): the
    register an NT's ``R`` register port shows. An NT alone names it ``csr.<register>``
    (node None: its block is the design's ``nt``); a region's personality
    ``csr_<node>.<register>`` (hw/nic/region.py, ``Personality``)."""
    head, _, reg = port.partition(".")
    if head == "csr" and reg:
        return None, reg
    if head.startswith("csr_") and reg:
        return head[4:], reg
    raise StateError(f"state item port {port!r} is not an NT's register port")


class StateError(SnicError, RuntimeError):
    pass


class RegionState:
    def __init__(self, bus, description, region, wait=None, timeout=30.0):
        maps = description.get("state_maps")
        if not maps:
            raise StateError("this build has no state-yielding transform: build it with "
                             "nic.yieldable = true")
        block = f"region{region}"
        if block not in maps:
            raise StateError(f"region {region} is not under the state-yielding transform "
                             f"(nic.yieldable lists {sorted(int(b[6:]) for b in maps)})")
        self.bus, self.regmap, self.block = bus, description["registers"], block
        self.region = region
        self.build_id = description.get("build_id")
        self.personalities = description["regions"][region]
        self.names = [p["name"] for p in self.personalities]
        cfg = description.get("config", {})
        self.data_width, self.header_bytes = cfg.get("data_width"), cfg.get("header_bytes")
        self.maps = {name: StateMap.from_json(raw) for name, raw in maps[block].items()}
        self.wait = wait or (lambda: asyncio.sleep(0.001))
        self.timeout = timeout

    async def _read(self, reg):
        return await read_register(self.bus, self.regmap, self.block, reg)

    async def _write(self, reg, value):
        await write_register(self.bus, self.regmap, self.block, reg, value)

    async def active(self):
        """The personality loaded in the region."""
        return self.names[await self._read("active")]

    async def stopped(self):
        return bool(await self._read("state_stopped"))

    async def suspend(self, at_boundary=True):
        """Stop the active personality: at the next packet boundary, after every packet it
        holds has left (default), or at once. Packets for the region wait in its buffer in
        the packet store meanwhile. Returns the personality's name.

        A build with the boundary state port (``nic.yieldable = "boundary"``, state maps of
        mode "boundary") always drains to a packet boundary, ``at_boundary`` or not: its map
        holds only the state live there, so a stop anywhere else could not be captured."""
        name = await self.active()
        await self._write("state_select", self.names.index(name))
        await self._write("state_at_boundary", int(at_boundary))
        await self._write("state_stop", 1)
        deadline = time.monotonic() + self.timeout
        while not await self.stopped():
            if time.monotonic() > deadline:
                raise StateError(f"region {self.region} ({name}) did not stop in "
                                 f"{self.timeout:g} s (a packet it holds cannot leave?)")
            await self.wait()
        return name

    async def resume(self):
        await self._write("state_stop", 0)

    async def service_traps(self):
        """If the active personality trapped on a ``Print``: its messages (and it runs on).
        The region's ``state_select`` must name the active personality."""
        if not await self._read("state_trapped"):
            return []
        name = self.names[await self._read("state_select")]

        async def read_word(addr):
            await self._go(addr, "servicing its traps")
            return await self._read("state_rdata")

        async def write_word(addr, value):
            await self._go(addr, "servicing its traps")
            await self._write("state_wdata", value)
        return await service_traps(self.maps[name], read_word, write_word)

    async def _go(self, addr, what):
        """Move the state port to ``addr`` and wait until it is there (the scan chain turns
        a word a cycle to a word in its middle; from a pass's end to its start it is home)."""
        await self._write("state_addr", addr)
        deadline = time.monotonic() + self.timeout
        while not await self.stopped():
            if time.monotonic() > deadline:
                raise StateError(f"region {self.region} stopped being stopped while "
                                 f"{what} (was it resumed?)")
            await self.wait()

    async def _require_stopped(self, what):
        if not await self.stopped():
            raise StateError(f"region {self.region} is running: suspend it before {what}")

    async def capture(self):
        """Every state word of the stopped personality, as a JSON-able snapshot."""
        await self._require_stopped("capturing its state")
        name = self.names[await self._read("state_select")]
        smap = self.maps[name]
        if smap.mode == "boundary" and await self._read("state_trapped"):
            raise StateError(f"region {self.region} ({name}) stopped on a Print trap, not at "
                             f"a packet boundary: its boundary state map is not all its state "
                             f"there; service the trap and suspend again")
        # One move to the first address, then one read a word: the port moves on by itself
        # in the map's address order.
        addrs = smap.addresses()
        if addrs:
            await self._go(addrs[0], "capturing its state")
        words = [await self._read("state_rdata") for _ in addrs]
        # The counters a port shows are read where software reads them anyway, in their
        # NTs' register blocks (hw/transform/inventory.py, find_counters).
        shown = {}
        for item in smap.shown():
            node, reg = register_of_port(item.port)
            block = personality_block_name(self.region, name, node)
            shown[item.port] = await read_register(self.bus, self.regmap, block, reg)
        words = smap.fill_shown(words, shown)
        return {"region": self.region, "personality": name, "build_id": self.build_id,
                "words": words, "values": _jsonable(smap.decode(words))}

    async def restore(self, snapshot):
        """Write a snapshot into the stopped personality (of the same chain and build)."""
        await self._require_stopped("restoring state")
        name = self.names[await self._read("state_select")]
        if snapshot.get("personality") != name:
            raise StateError(f"the snapshot holds {snapshot.get('personality')!r}, region "
                             f"{self.region} has {name!r} selected")
        if snapshot.get("build_id") != self.build_id:
            raise StateError(f"the snapshot comes from build {snapshot.get('build_id')}, this "
                             f"device runs build {self.build_id}")
        smap = self.maps[name]
        addrs, words = smap.addresses(), snapshot["words"]
        if len(words) != len(addrs):
            raise StateError(f"the snapshot has {len(words)} words, the state map "
                             f"{len(addrs)}")
        if addrs:
            await self._go(addrs[0], "restoring its state")
        for word in words:
            await self._write("state_wdata", word)


async def service_traps(smap, read_word, write_word):
    """The messages of every trap that fired (``Print`` statements of a transformed component,
    in map order), formatted as the print would have; each trap's ``fired`` flag is cleared,
    so the component runs on once nothing else holds it. ``read_word(addr)`` and
    ``write_word(addr, value)`` are coroutines reaching the stopped component's state port."""
    items = {item.name: item for item in smap.items}
    messages, fired_addrs = [], []
    # Every trap's flag and values first: clearing the last flag set lets the component run.
    for trap in smap.traps:
        fired = items[trap["fired"]]
        if not await read_word(fired.addr):
            continue
        held = items[trap["values"]]
        value = 0
        for w in range(held.words):
            value |= await read_word(held.addr + w) << (w * smap.word_width)
        messages.append(smap.format_trap(trap, {trap["values"]: value}))
        fired_addrs.append(fired.addr)
    for addr in fired_addrs:
        await write_word(addr, 0)
    return messages


def _jsonable(values):
    """Hex strings for values wider than JSON's safe integers."""
    def one(v):
        return v if v < 2 ** 53 else hex(v)
    return {k: [one(x) for x in v] if isinstance(v, list) else one(v) for k, v in values.items()}
