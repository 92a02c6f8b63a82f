"""Temporal multiplexing of a region: several tenants' instances of one chain share it by
context switches that the control plane drives (the state-yielding transform, hw/transform,
and the scheduler's ``tenant_hold``).

    share = TimeShare(bus, description, region=3, wait=...)
    await share.add(0, writes_of_0)     # the first context: it runs
    await share.add(1, writes_of_1)     # a fresh context for tenant 1 (tenant 0 runs on)
    await share.switch(1)               # tenant 0's context out, tenant 1's in

Every sharing tenant's flow buckets point at the region; only the tenant whose context is
loaded is dispatched there, the others are held (their packets queue in the packet store).

A switch: hold the running tenant and wait until its packets in flight have left (the region
is then empty of it); stop the region at a packet boundary (immediate); save its context: the
state words (the state map: with the boundary state port, only the state live at a boundary)
and the chain's read-write registers; load the next tenant's context: its configuration writes
first (while stopped: they restore the configuration state the map leaves out, such as an
ACL's rules, and whatever else they touch is overwritten next), then its state words and
registers; resume; release the next tenant's hold.

A new tenant's context starts from the state map's reset values: the region is loaded with
them and runs, with every sharing tenant held, while the tenant's configuration is written
(strobed table writes reach the NTs' memories only while they run); then it is saved, and the
running tenant's context comes back.
"""

import time

from .discovery import read_register, write_register
from .migration import configuration_registers
from .state import RegionState, StateError

__all__ = ["TimeShare"]

#: Waits between the last configuration write of a new context and its capture: strobed
#: writes pass an NT's pipeline (the rate limiter's bucket INIT takes 6 stages).
SETTLE_WAITS = 4


class TimeShare:
    def __init__(self, bus, description, region, wait=None, timeout=30.0):
        self.state = RegionState(bus, description, region, wait, timeout)
        self.bus, self.regmap = bus, description["registers"]
        self.description = description
        self.region = region
        self.timeout = timeout
        self.contexts = {}      # tenant -> saved context (not loaded)
        self.active = None      # tenant whose context is loaded
        self.writes = {}        # tenant -> its configuration writes

    async def _reg(self, block, reg, value=None):
        if value is None:
            return await read_register(self.bus, self.regmap, block, reg)
        await write_register(self.bus, self.regmap, block, reg, value)

    async def _hold(self, tenant, on):
        mask = await self._reg("scheduler", "tenant_hold")
        mask = mask | 1 << tenant if on else mask & ~(1 << tenant)
        await self._reg("scheduler", "tenant_hold", mask)

    async def _drain(self, tenant):
        deadline = time.monotonic() + self.timeout
        while await self._reg("scheduler", f"t{tenant}_in_flight"):
            if time.monotonic() > deadline:
                raise StateError(f"tenant {tenant}'s packets in region {self.region} did not "
                                 f"leave in {self.timeout:g} s")
            await self.state.wait()

    async def _save(self, name, tenant):
        snapshot = await self.state.capture()
        registers = {(b, r): await self._reg(b, r)
                     for b, r in configuration_registers(self.description, self.region, name)}
        return {"snapshot": snapshot, "registers": registers,
                "writes": self.writes.get(tenant, [])}

    async def _load(self, context):
        for block, reg, value in context["writes"]:
            await self._reg(block, reg, value)
        await self.state.restore(context["snapshot"])
        for (block, reg), value in context["registers"].items():
            await self._reg(block, reg, value)

    async def _stop_active(self):
        """Hold the running tenant, let its packets leave, stop the region; its name."""
        await self._hold(self.active, True)
        await self._drain(self.active)
        return await self.state.suspend(at_boundary=True)

    async def add(self, tenant, writes):
        """A fresh context for ``tenant`` (held meanwhile): reset state, then its configuration
        ``writes`` (``[(block, register, value)]``, the chain's NT registers in this region).
        The first tenant added runs at once; later ones wait for :meth:`switch`."""
        if tenant in self.contexts or tenant == self.active:
            raise StateError(f"tenant {tenant} already has a context in region {self.region}")
        await self._hold(tenant, True)
        self.writes[tenant] = [tuple(w) for w in writes]
        if self.active is not None:
            name = await self._stop_active()
            running = await self._save(name, self.active)
        else:
            name = await self.state.suspend(at_boundary=True)
            running = None
        smap = self.state.maps[name]
        try:
            await self.state.restore({"personality": name, "build_id": self.state.build_id,
                                      "words": smap.reset_words()})
            await self.state.resume()
            for block, reg, value in writes:
                await self._reg(block, reg, value)
            for _ in range(SETTLE_WAITS):
                await self.state.wait()
            if running is None:
                self.active = tenant
                await self._hold(tenant, False)
                return
            await self.state.suspend(at_boundary=True)
            self.contexts[tenant] = await self._save(name, tenant)
        except BaseException:
            self.contexts.pop(tenant, None)
            self.writes.pop(tenant, None)
            if running is not None:     # the running tenant's context back, best effort
                try:
                    await self.state.suspend(at_boundary=False)
                    await self._load(running)
                    await self.state.resume()
                    await self._hold(self.active, False)
                except Exception:  # noqa: BLE001: the first error is the one to report
                    pass
            raise
        await self._load(running)
        await self.state.resume()
        await self._hold(self.active, False)

    async def leave(self, tenant):
        """``tenant`` stops sharing the region. Its context is forgotten; if it is the one
        loaded (its packets already gone: the control plane disabled and drained it), the
        first other sharer's context is loaded and released."""
        self.writes.pop(tenant, None)
        if tenant != self.active:
            self.contexts.pop(tenant, None)
            await self._hold(tenant, False)
            return
        self.active = None
        if not self.contexts:
            return
        await self.state.suspend(at_boundary=True)
        nxt = min(self.contexts)
        await self._load(self.contexts.pop(nxt))
        await self.state.resume()
        await self._hold(nxt, False)
        self.active = nxt

    def to_json(self):
        """The contexts (not loaded) and the loaded tenant, for the control plane's state
        file: the driver runs again in another process."""
        return {"active": self.active,
                "contexts": {str(t): {"snapshot": c["snapshot"],
                                      "registers": [[b, r, v] for (b, r), v in
                                                    c["registers"].items()],
                                      "writes": [list(w) for w in c["writes"]]}
                             for t, c in self.contexts.items()},
                "writes": {str(t): [list(w) for w in ws] for t, ws in self.writes.items()}}

    def load_json(self, raw):
        self.active = raw.get("active")
        self.contexts = {int(t): {"snapshot": c["snapshot"],
                                  "registers": {(b, r): v for b, r, v in c["registers"]},
                                  "writes": [tuple(w) for w in c.get("writes", [])]}
                         for t, c in raw.get("contexts", {}).items()}
        self.writes = {int(t): [tuple(w) for w in ws]
                       for t, ws in raw.get("writes", {}).items()}
        return self

    async def switch(self, tenant):
        """Load ``tenant``'s context in place of the running one's."""
        if tenant == self.active:
            return
        if tenant not in self.contexts:
            raise StateError(f"tenant {tenant} has no context in region {self.region} (add "
                             f"it first; contexts: {sorted(self.contexts)})")
        name = await self._stop_active()
        self.contexts[self.active] = await self._save(name, self.active)
        await self._load(self.contexts.pop(tenant))
        await self.state.resume()
        await self._hold(tenant, False)
        self.active = tenant
