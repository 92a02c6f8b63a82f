"""One sNIC of a rack: a virtual device, and the control plane that runs on it, advanced one
lockstep window at a time. In a rack on Ray each :class:`NicNode` lives in an actor of its own
(:mod:`.rack`); the class itself knows nothing of Ray, so a test or a one-NIC rack can use it
in process.

Each call of :meth:`NicNode.window` brings the packets that reach the NIC in the window (ingress
port, frame, the cycle its first beat may go in), starts the control operations asked for, runs
the device to the window's end with the operations taking their register accesses out of the
window (:mod:`.windowed_bus`), and returns what left the NIC, each port's accept cycles, and the
operations that finished. Operations run one after another, in the order they were asked for.
"""

import asyncio
import concurrent.futures
import traceback

from ...desc.config import load_config
from ...desc.meta import field_offsets
from ...desc.nic.rack import BUCKETS
from ...desc.nic.shape import NicShape
from ...driver.control import ControlPlane
from ...driver.migration import configuration_registers
from ...driver.state import RegionState
from ...driver.status import read_status
from ..build import generated_design
from ..vdev.device import VirtualDevice
from .windowed_bus import WindowedBus

__all__ = ["NicNode", "OPERATIONS"]

#: Seconds a handshake may poll. Rack time is not wall time (a poll waits for windows of all
#: the NICs), so this only guards against a design that never answers.
POLL_TIMEOUT = 3600.0

#: The operations a node runs (``NicNode.op_<name>``).
OPERATIONS = ("deploy", "undeploy", "capture", "prepare", "restore", "status", "read", "write",
              "report", "drain", "redirect", "scale_out_restore")


class NicNode:
    """The sNIC ``name`` built from the design configuration at ``design`` (a path)."""

    def __init__(self, name, design, progress=None):
        self.name = name
        quiet = progress or (lambda message: None)
        config = load_config(design)
        paths = generated_design(config, progress=quiet)
        self.device = VirtualDevice.build(paths["verilog"], paths["regmap"], progress=quiet)
        self.description = self.device.regmap
        self.bus = WindowedBus(self.device)
        self.plane = ControlPlane(self.bus, self.description, None, wait=self.bus.wait,
                                  timeout=POLL_TIMEOUT)
        self.loop = asyncio.new_event_loop()
        self._thread = concurrent.futures.ThreadPoolExecutor(1)
        self._queue = []                # operations asked for, not started
        self._task = None               # the operation running
        self._finished = []
        self._accepted = [0] * self.device.port_count

    def info(self):
        cfg = self.description["config"]
        rack = bool(cfg.get("rack"))
        redirect = None
        if rack:
            shape = NicShape.from_description(self.description)
            redirect = field_offsets(shape.nic_fields())["tag.redirect"][0]
        return {"name": self.name, "ports": self.device.port_count,
                "endpoint_ports": cfg["ports"], "rack_port": cfg["ports"] if rack else None,
                "redirect_offset": redirect, "tenants": cfg["tenants"],
                "data_width": cfg["data_width"], "header_bytes": cfg["header_bytes"],
                "regions": [[p["name"] for p in r] for r in self.description["regions"]],
                "description": self.description}

    @property
    def cycle(self):
        return self.device.cycle

    # --- the window ----------------------------------------------------------------------------
    def window(self, end, arrivals=(), operations=()):
        """Run to cycle ``end``. ``arrivals``: ``[(port, frame, at)]`` in each port's order;
        ``operations``: ``[(op_id, name, kwargs)]``. Returns ``(delivered, accepted,
        finished)``: the packets that left (``Delivered``), each port's accept cycles of the
        packets that went in since the last window, and ``[(op_id, ok, result)]``."""
        for port, frame, at in arrivals:
            self.device.push(port, frame, at)
        self._queue.extend(operations)
        self.bus.open_window(end)
        # Its own thread: a Ray actor's method may run where an event loop is running.
        self._thread.submit(self.loop.run_until_complete, self._operate()).result()
        left = end - self.device.cycle
        if left > 0:
            self.device.run(left)
        accepted = []
        for port in range(self.device.port_count):
            cycles = self.device.ingress_cycles(port, self._accepted[port])
            accepted.append(cycles)
            self._accepted[port] += len(cycles)
        finished, self._finished = self._finished, []
        return self.device.pop(), accepted, finished

    async def _operate(self):
        """Run operations until they are all done or the one running waits for the next
        window."""
        while True:
            if self._task is None:
                if not self._queue:
                    return
                op_id, name, kwargs = self._queue.pop(0)
                self._task = (op_id, self.loop.create_task(self._run(name, kwargs)))
            op_id, task = self._task
            while not task.done() and not self.bus.blocked:
                await asyncio.sleep(0)
            if not task.done():
                return              # it waits for the next window
            self._finished.append((op_id, *task.result()))
            self._task = None

    async def _run(self, name, kwargs):
        if name not in OPERATIONS:
            return False, f"unknown operation {name!r} (known: {', '.join(OPERATIONS)})"
        try:
            return True, await getattr(self, f"op_{name}")(**kwargs)
        except Exception as e:  # noqa: BLE001: an operation's failure is its result
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            return False, {"error": message, "type": type(e).__name__,
                           "trace": traceback.format_exc(limit=4)}

    # --- operations ------------------------------------------------------------------------------
    async def op_deploy(self, chain, tenant, instances=1, weight=1, regions=None):
        record = await self.plane.deploy(str(chain), tenant, instances, weight,
                                         regions=regions)
        return {"tenant": tenant, "regions": list(record.regions), "keys": list(record.keys)}

    async def op_undeploy(self, tenant):
        await self.plane.undeploy(tenant)
        return {"tenant": tenant}

    async def op_read(self, registers):
        """``[(block, register)]`` read in one go: ``{"block.register": value}``."""
        return {f"{b}.{r}": await self.plane.read(b, r) for b, r in registers}

    async def op_write(self, values):
        """``{"block.register": value}`` written in order."""
        for name, value in values.items():
            block, reg = name.rsplit(".", 1)
            await self.plane.regs.write(block, reg, value)
        return {}

    async def op_report(self):
        """What this sNIC tells its peers (SuperNIC's resource reports): free regions per
        chain, and per deployed tenant its queue drops, packets enqueued and backlog."""
        await self.plane.refresh()
        used = {r for rec in self.plane.deployed.values() for r, _ in rec.placements()}
        free = {}
        for r, personalities in enumerate(self.description["regions"]):
            if r not in used:
                for p in personalities:
                    free[p["name"]] = free.get(p["name"], 0) + 1
        tenants = {}
        for t in self.plane.deployed:
            tenants[t] = {k: await self.plane.read("scheduler", f"t{t}_{k}")
                          for k in ("queue_drops", "enqueued", "backlog_beats")}
        return {"free": free, "tenants": tenants}

    async def op_drain(self, tenant):
        """Wait until none of ``tenant``'s packets is queued or in flight here."""
        await self._drained(tenant)
        return {}

    async def op_redirect(self, tenant, peers):
        """Point ``tenant``'s redirect at ``peers``: ``[(peer id, buckets)]``, at most two
        (``[]``: no redirect). The buckets of the first peer are the tenant's redirected
        buckets not given to the second."""
        if len(peers) > 2:
            raise ValueError(f"a tenant is redirected to at most two peers, not {len(peers)}")
        regs = self.plane.regs
        enable = await regs.read("rack", "redirect_enable")
        everything = 0
        for _, buckets in peers:
            everything |= buckets
        writes = {f"t{tenant}_buckets": everything or (1 << BUCKETS) - 1,
                  f"t{tenant}_peer": peers[0][0] if peers else 0,
                  f"t{tenant}_peer2": peers[1][0] if len(peers) > 1 else 0,
                  f"t{tenant}_peer2_buckets": peers[1][1] if len(peers) > 1 else 0}
        # Off while the buckets change, so no packet sees half of it.
        await regs.write("rack", "redirect_enable", enable & ~(1 << tenant))
        for reg, value in writes.items():
            await regs.write("rack", reg, value)
        if peers:
            await regs.write("rack", "redirect_enable", enable | 1 << tenant)
        return {}

    async def op_scale_out_restore(self, tenant, moved):
        """Give ``tenant`` one more instance here, in a free region of its chain, holding
        ``moved`` (what :meth:`op_capture` returned on a peer): the state comes back with the
        chain. The tenant's packets must be held meanwhile (the rack pauses it)."""
        await self.plane.refresh()
        record = self.plane.deployed[tenant]
        chain = moved["snapshot"]["personality"]
        hosts = [r for r in self.plane.free_regions()
                 if any(p["name"] == chain for p in self.description["regions"][r])]
        if not hosts:
            raise ValueError(f"{self.name} has no free region for {chain!r}")
        region = hosts[0]
        await self.plane.scale_out(tenant, region)
        result = await self.op_restore(region, moved)
        return {**result, "regions": list(record.regions) + [region]}

    async def op_status(self):
        status = await read_status(self.bus, self.description)
        if ("rack", "rx") in self.plane.regs:
            status["rack"] = {name: await self.plane.read("rack", name)
                              for name in ("rx", "rx_bad")}
        return status

    async def _drained(self, tenant):
        async def empty():
            return (await self.plane.read("scheduler", f"t{tenant}_backlog_beats") == 0
                    and await self.plane.read("scheduler", f"t{tenant}_in_flight") == 0)
        await self.plane.regs.poll(f"tenant {tenant}'s packets to leave", empty)

    async def op_capture(self, tenant, region=None):
        """The state of deployed ``tenant``'s one region, for a move to another device: wait
        until none of its packets is queued or in flight (the rack holds its new ones), stop
        the region at a packet boundary, capture every state word and its NTs' configuration
        registers. The region stays stopped (:meth:`op_undeploy` frees it)."""
        await self.plane.refresh()
        record = self.plane.deployed.get(tenant)
        if record is None:
            raise ValueError(f"tenant {tenant} is not deployed on {self.name}")
        if region is None and len(record.regions) != 1:
            raise ValueError(f"tenant {tenant} runs {len(record.regions)} instances on "
                             f"{self.name}; a move between devices takes one")
        region = record.regions[0] if region is None else region
        await self._drained(tenant)
        state = RegionState(self.bus, self.description, region, self.bus.wait, POLL_TIMEOUT)
        await state.suspend(at_boundary=True)
        snapshot = await state.capture()
        chain = snapshot["personality"]
        config = {f"{b[len(f'r{region}_'):]}.{r}": await self.plane.read(b, r)
                  for b, r in configuration_registers(self.description, region, chain)}
        await state.resume()        # empty, and the tenant gets no more packets here
        return {"tenant": tenant, "region": region, "snapshot": snapshot, "config": config}

    async def op_prepare(self, chain, tenant, weight=1):
        """Deploy ``chain`` as ``tenant`` on one region and stop that region before its first
        packet, ready for :meth:`op_restore` (the first half of a move here)."""
        record = await self.plane.deploy(str(chain), tenant, 1, weight)
        region = record.regions[0]
        state = RegionState(self.bus, self.description, region, self.bus.wait, POLL_TIMEOUT)
        await state.suspend(at_boundary=False)     # it has had no packet yet
        return {"tenant": tenant, "regions": [region], "keys": list(record.keys)}

    async def op_restore(self, region, moved):
        """Load ``moved`` (what :meth:`op_capture` returned on another NIC of the same design)
        into stopped ``region``: the NTs' configuration registers, then the state; resume."""
        state = RegionState(self.bus, self.description, region, self.bus.wait, POLL_TIMEOUT)
        if not await state.stopped():
            await state.suspend(at_boundary=False)     # its tenant is held and drained
        for name, value in moved["config"].items():
            block, reg = name.rsplit(".", 1)
            await self.plane.regs.write(f"r{region}_{block}", reg, value)
        await state.restore({**moved["snapshot"], "region": region})
        await state.resume()
        return {"region": region, "words": len(moved["snapshot"]["words"])}

    def close(self):
        self._thread.shutdown()
        self.device.close()
        self.loop.close()

