"""The intermediate pool's peer-to-peer control plane (SuperNIC, arXiv 2109.07744,
"Distributed SuperNIC"): every sNIC reports its free regions and its tenants' load; an
overloaded sNIC redirects part of a tenant's flows to a peer that runs the tenant's chain, or
launches the chain on the closest peer with room; when it has a free region again it moves the
chain back, with its state, and removes the rule.

:class:`PoolControl` holds the three moves, each safe under traffic; :class:`PoolPolicy`
decides when to make them from the reports (:meth:`PoolPolicy.tick`, every ``interval``
cycles; :meth:`~.rack.Rack.run` calls it when a policy is set).

Every change of where a tenant's flows go is made with the tenant paused at its endpoint (the
packets wait on the endpoint's link, as under IEEE 802.3 PAUSE): its packets in the home sNIC
and on their way to peers drain first, then the rule changes, then the held packets go on in
order. So a flow never has packets on two paths at once, and per-flow order holds.
"""

import collections

from ...desc.nic.rack import BUCKETS
from .rack import RackRunError

__all__ = ["PoolControl", "PoolPolicy"]

ALL = (1 << BUCKETS) - 1


class PoolControl:
    """The pool's moves on ``rack`` (a :class:`~.rack.Rack` with ``topology = "pool"``)."""

    def __init__(self, rack):
        if not rack.pool:
            raise RackRunError(f"rack {rack.config.name} is not an intermediate pool "
                               f"(rack.topology = \"pool\")")
        self.rack = rack

    def home(self, tenant):
        t = self.rack.tenants[tenant]
        return self.rack.attach[t.entry.endpoint][0]

    def slot(self, tenant, nic):
        slot = dict(self.rack.tenants[tenant].instances).get(nic)
        if slot is None:
            raise RackRunError(f"tenant {tenant} does not run on {nic}")
        return slot

    def local_buckets(self, tenant):
        taken = 0
        for _, buckets in self.rack.tenants[tenant].redirects:
            taken |= buckets
        return ALL & ~taken

    # --- pausing ------------------------------------------------------------------------------
    def _pause(self, tenant):
        t = self.rack.tenants[tenant]
        if t.held is None:
            t.held = collections.deque()

    def _resume(self, tenant):
        t = self.rack.tenants[tenant]
        held, t.held = t.held, None
        self.rack._release(t, held or ())

    def _quiesce(self, tenant):
        """With ``tenant`` paused: wait until all of its packets have left the home sNIC and
        every one redirected has settled in its peer, then until each instance has none queued
        or in flight."""
        rack, home = self.rack, self.home(tenant)
        slot = self.slot(tenant, home)
        while rack._in_transit(tenant, home):
            rack.step()
        rack.call(home, "drain", tenant=slot)
        # Redirected packets bypass the queues: the home's count of them says when all left.
        while True:
            sent = rack.call(home, "read", registers=[("rack", f"t{slot}_redirected")])
            if sum(sent.values()) - self._redirected_before(tenant, home) \
                    <= rack.redirected_seen[(home, tenant)]:
                break
            rack.step()
        for peer, _ in self.rack.tenants[tenant].redirects:
            while rack._in_transit(tenant, peer) or rack.busy_toward(tenant, peer):
                rack.step()
            rack.call(peer, "drain", tenant=self.slot(tenant, peer))

    def _redirected_before(self, tenant, home):
        """Rack frames of ``tenant``'s slot counted before this tenant had it (a slot's
        counter runs from reset)."""
        return self.rack.tenants[tenant].redirect_base.get(home, 0)

    def _apply(self, tenant, redirects):
        home = self.home(tenant)
        ids = [(self.rack.nic_ids[peer], buckets) for peer, buckets in redirects if buckets]
        self.rack.call(home, "redirect", tenant=self.slot(tenant, home), peers=ids)
        self.rack.tenants[tenant].redirects = [(p, b) for p, b in redirects if b]

    # --- the moves ----------------------------------------------------------------------------
    def redirect(self, tenant, peer, buckets):
        """Send the flows of ``buckets`` of ``tenant`` to ``peer`` (launching the chain there
        if it does not run it). Returns ``{"launched": bool, ...}``."""
        rack = self.rack
        t = rack.tenants[tenant]
        launched = not any(n == peer for n, _ in t.instances)
        if launched:
            if not rack.free_regions(peer, t.spec.name):
                raise RackRunError(f"{peer} has no free region for chain {t.spec.name!r}: "
                                   f"no redirect of tenant {tenant} there")
            rack.deploy(tenant, peer, instances=1)
        if peer == self.home(tenant):
            raise RackRunError(f"{peer} is tenant {tenant}'s home: a redirect goes to a peer")
        if peer not in rack.nics or peer in rack.dead:
            raise RackRunError(f"{peer!r} is not a live sNIC of rack {rack.config.name}")
        redirects = t.redirects
        current = [(p, b & ~buckets) for p, b in redirects if p != peer]
        mine = buckets | dict(redirects).get(peer, 0)
        new = [(p, b) for p, b in current if b] + [(peer, mine)]
        if len(new) > 2:
            raise RackRunError(f"tenant {tenant} is already redirected to two peers")
        self._pause(tenant)
        try:
            self._quiesce(tenant)
            self._apply(tenant, new)
        finally:
            self._resume(tenant)
        return {"tenant": tenant, "peer": peer, "buckets": mine, "launched": launched,
                "at": rack.now}

    def move_back(self, tenant, peer):
        """Bring ``tenant``'s instance on ``peer`` home, with its state, into a free region of
        the home sNIC: its flows stop being redirected there. Returns a report."""
        rack = self.rack
        home = self.home(tenant)
        t = rack.tenants[tenant]
        if peer not in dict(self.rack.tenants[tenant].redirects):
            raise RackRunError(f"tenant {tenant} is not redirected to {peer}")
        if not rack.free_regions(home, t.spec.name):
            raise RackRunError(f"{home} has no free region for chain {t.spec.name!r}")
        start = rack.now
        self._pause(tenant)
        try:
            self._quiesce(tenant)
            moved = rack.call(peer, "capture", tenant=self.slot(tenant, peer))
            self._apply(tenant, [(p, b) for p, b in self.rack.tenants[tenant].redirects
                                 if p != peer])
            restored = rack.call(home, "scale_out_restore", tenant=self.slot(tenant, home),
                                 moved=moved)
        finally:
            self._resume(tenant)
        t.regions = [(n, r) for n, r in t.regions if n != home] + [
            (home, r) for r in restored["regions"]]
        rack.undeploy(tenant, peer)
        return {"tenant": tenant, "from": peer, "to": home, "region": restored["region"],
                "words": restored["words"], "cycles": rack.now - start}


class PoolPolicy:
    """When to redirect, launch and move back, from the sNICs' reports.

    * An sNIC is **overloaded** with a tenant when the tenant's queue dropped packets there in
      the last interval.
    * A tenant overloaded at home whose home has no free region for another instance gets a
      quarter of its flow buckets redirected: to the peer that already runs its chain for it,
      else to the closest peer with a free region (fewest hops, then the lowest link latency,
      then the most free regions), where the chain is launched. Overloaded again, it gets a
      second peer (the hardware spreads a tenant over two).
    * A tenant redirected to a peer whose home has a free region again (and no drops) comes
      back: the peer's instance, with its state, moves into that region.

    One move per tick; after a move the next tick only reads the reports (their counters
    then start after the move).
    """

    def __init__(self, control, interval=20_000, share=4):
        self.control = control
        self.interval = interval
        self.share = share          # redirect 1/share of the tenant's buckets per move
        self.last = {}              # (nic, slot) -> queue_drops at the last report
        self.log = []
        self.next_tick = interval
        self._settle = False

    def due(self, now):
        return now >= self.next_tick

    def tick(self):
        rack = self.control.rack
        self.next_tick = rack.now + self.interval
        reports = {n: rack.call(n, "report") for n in rack.nics if n not in rack.dead}
        drops = {}
        for nic, report in reports.items():
            for slot, row in report["tenants"].items():
                key = (nic, int(slot))
                drops[key] = row["queue_drops"] - self.last.get(key, row["queue_drops"])
                self.last[key] = row["queue_drops"]
        if self._settle:
            self._settle = False
            return None
        move = self._decide(reports, drops)
        if move is not None:
            self._settle = True
            self.log.append(move)
        return move

    def _tenant_drops(self, tenant, nic, drops):
        slot = dict(self.control.rack.tenants[tenant].instances).get(nic)
        return drops.get((nic, slot), 0) if slot is not None else 0

    def _decide(self, reports, drops):
        control, rack = self.control, self.control.rack
        for name, t in sorted(rack.tenants.items()):
            if not t.instances or t.lost:
                continue
            home = control.home(name)
            redirected = t.redirects
            overloaded = self._tenant_drops(name, home, drops) > 0 or any(
                self._tenant_drops(name, p, drops) > 0 for p, _ in redirected)
            free_home = reports.get(home, {}).get("free", {}).get(t.spec.name, 0)
            if overloaded and not free_home and len(redirected) < 2:
                peer = self._peer_for(name, reports, exclude={home, *dict(redirected)})
                if peer is None:
                    continue
                local = control.local_buckets(name)
                want = max(1, BUCKETS // self.share)
                chosen = 0
                for b in range(BUCKETS):
                    if local >> b & 1 and bin(chosen).count("1") < want:
                        chosen |= 1 << b
                if not chosen or chosen == local:
                    continue        # the home keeps some of its flows
                result = control.redirect(name, peer, chosen)
                return {"move": "launch+redirect" if result["launched"] else "redirect",
                        **result}
            if redirected and free_home and not overloaded:
                peer = redirected[0][0]
                result = control.move_back(name, peer)
                return {"move": "move_back", **result, "at": rack.now}
        return None

    def _peer_for(self, tenant, reports, exclude):
        rack = self.control.rack
        t = rack.tenants[tenant]
        running = [n for n, _ in t.instances if n not in exclude and n not in rack.dead]
        if running:
            return running[0]
        links = {n.name: n.link_cycles for n in rack.config.nics}
        room = [(links[n], -r.get("free", {}).get(t.spec.name, 0), n)
                for n, r in reports.items()
                if n not in exclude and r.get("free", {}).get(t.spec.name, 0) > 0]
        return min(room)[2] if room else None
