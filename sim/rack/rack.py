"""A rack of SuperNICs simulated in lockstep windows, each NIC a Ray actor (SuperNIC, arXiv
2109.07744, "Distributed SuperNIC"; the rack's description is :mod:`supernic.desc.rack`).

    with Rack(load_rack("chains/racks/three.toml")) as rack:   # a local Ray by default
        rack.deploy_all()                      # the tenants of rack.toml, placed
        rack.send("alice", [parse_flow("tenant=0,rate=0.5,size=256")], cycles=20_000)
        rack.run_until_drained()
        rack.account()                         # in = delivered + counted drops, per tenant

**Lockstep windows.** All NICs run the same window of cycles ``[g, g + W)`` in parallel, one
Ray call each; between two windows the driver moves packets through the switch model
(:mod:`.switch`). ``W`` is the rack's lookahead (:attr:`RackConfig.lookahead`): a packet that
leaves a NIC in a window reaches another NIC no sooner than ``W`` cycles later, so no NIC ever
receives a packet from its past. This is conservative synchronisation, as in FireSim's
token-based network. The switch takes its inputs in cycle order, and the same seed gives the
same packets at the same cycles wherever the actors run (the tests compare with NICs in
process, :class:`LocalNic`).

**Packets.** An endpoint's packets go up its link to the switch, which sends each to a NIC that
runs its tenant (a flow hash picks among several: the switch-attached pool balances flows
across sNICs), down the NIC's link to its ingress port. What leaves the NIC goes up the NIC's
link and back to the tenant's endpoint. Every packet the rack sends has an id; the NIC tag of
an output (ingress port and sequence number, :mod:`supernic.desc.nic.shape`) names the input
it came from.

**Control.** Deploys, undeploys and the steps of a migration are operations a NIC runs inside
its windows (:mod:`.node`): their register accesses take cycles of rack time while the NIC's
other packets flow. A migration between devices (:meth:`Rack.migrate`) holds the tenant's new
packets in the switch, lets the source empty, captures the region's state there, restores it
into a region of the target (deployed the same way), then sends the held packets to the target
in order: per-flow order holds and nothing is lost.

**Where it runs.** ``Rack(config)`` starts a Ray of its own on this machine (``ray.init()``
with no address); ``Rack(config, address="ray://head:10001")`` or ``address="auto"`` joins a
running cluster, where every node needs this package installed. ``Rack(config, ray=False)``
keeps the NICs in this process.
"""

import collections
import dataclasses
import heapq
import itertools
import os

from ...desc.chain import load_chain
from ...desc.errors import SnicError
from ...desc.rack import RackConfig
from ...driver.traffic import delivered_tags
from ..flows import make_schedule
from ..parser_model import ParserModel
from .node import NicNode
from .switch import Link, Switch

__all__ = ["Rack", "RackRunError", "LocalNic", "RayNic", "start_ray"]


#: Cycles after a packet's last beat went in by which the parser and classifier have put it in
#: its tenant's queue: the parser holds up to its header window (256 bytes, 32 beats at 64
#: bits) and each stage adds a few cycles; this bound is generous.
SETTLE_CYCLES = 512


class RackRunError(SnicError, RuntimeError):
    """A rack operation that failed (one line)."""
    exit_code = 1


def start_ray(address=None, progress=None):
    """Join the Ray at ``address``, or start one on this machine (``None``). Idempotent."""
    import ray
    if ray.is_initialized():
        return ray
    env = {k: v for k, v in os.environ.items() if k in ("SNIC_CACHE", "YOWASP_CACHE_DIR")}
    options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False,
                   runtime_env={"env_vars": env} if env else None)
    if progress:
        progress(f"ray: {'joining ' + address if address else 'starting a local Ray'}")
    if address:
        ray.init(address=address, **options)
    else:
        ray.init(num_cpus=os.cpu_count(), **options)
    return ray


def prebuild(design, progress):
    """Generate and compile the virtual device of the design at ``design`` (a path), or find
    both in the cache."""
    from ...desc.config import load_config
    from ..build import generated_design
    from ..vdev.build import build_library
    paths = generated_design(load_config(design), progress=progress)
    build_library(paths["verilog"], progress=progress)


class LocalNic:
    """A NIC in this process (the same interface as :class:`RayNic`)."""

    def __init__(self, name, design):
        self.node = NicNode(name, design)

    def call(self, method, *args):
        return getattr(self.node, method)(*args)

    def gather(self, pending):
        return pending

    def kill(self):
        self.node.close()


class RayNic:
    """A NIC in a Ray actor of its own."""

    def __init__(self, name, design):
        import ray
        self.ray = ray
        self.actor = ray.remote(NicNode).options(name=None, max_restarts=0).remote(
            name, str(design))

    def call(self, method, *args):
        return getattr(self.actor, method).remote(*args)

    def gather(self, pending):
        return self.ray.get(pending)

    def kill(self):
        self.ray.kill(self.actor)


class _Tenant:
    """A rack tenant: its chain, its endpoint, and where it runs."""

    def __init__(self, index, entry):
        self.index, self.entry = index, entry
        self.name = entry.name
        self.spec = load_chain(entry.chain)
        self.instances = []         # [(nic name, local tenant slot)]
        self.regions = []           # [(nic name, region)]
        self.held = None            # a deque of packets held in the switch, during a move
        self.pause = None           # the Link paced packets leave the hold by
        self.redirect_base = {}     # nic -> its slot's redirected count when deployed there
        self.redirects = []         # in a pool: [(peer, flow buckets)] its home sends there
        self.lost = False


class Rack:
    def __init__(self, config: RackConfig, address=None, ray=True, progress=None):
        self.config = config
        self.progress = progress or (lambda message: None)
        self.window_cycles = config.lookahead
        self.now = 0
        self.nics = {}
        if not address:
            # On one machine every sNIC shares this cache: each design is built here first,
            # where the user sees the progress (an actor's output goes nowhere), and the
            # actors find it built. On a cluster each node builds its own.
            for design in dict.fromkeys(entry.design for entry in config.nics):
                prebuild(design, self.progress)
        if ray:
            start_ray(address, self.progress)
        make = RayNic if ray else LocalNic
        for entry in config.nics:
            self.progress(f"{entry.name}: {entry.design.name}")
            self.nics[entry.name] = make(entry.name, entry.design)
        names = list(self.nics)
        infos = self._gather({n: self.nics[n].call("info") for n in names})
        self.info = infos
        self.dead = {}              # nic -> the cycle it was found dead
        self.switch = Switch(config.switch_cycles, config.buffer_bytes)
        self.up = {}                # links into the switch: endpoints' and NICs'
        for e in config.endpoints:
            self.switch.add_port(e.name, e.link_bytes_per_cycle, e.link_cycles)
            self.up[e.name] = Link(e.name, e.link_bytes_per_cycle, e.link_cycles)
        for n in config.nics:
            for p in range(infos[n.name]["ports"]):
                self.switch.add_port(f"{n.name}.{p}", n.link_bytes_per_cycle, n.link_cycles)
            self.up[n.name] = Link(n.name, n.link_bytes_per_cycle, n.link_cycles)
        self.tenants = {t.name: _Tenant(i, t) for i, t in enumerate(config.tenants)}
        keys = collections.Counter(k for t in self.tenants.values() for k in t.spec.keys)
        shared = sorted(k for k, c in keys.items() if c > 1)
        if shared:
            raise SnicError(f"rack {config.name}: tenant keys {shared} are used by more than "
                            f"one tenant; every tenant needs keys of its own")
        self._ids = itertools.count()
        self.packets = {}           # id -> [tenant, frame, offer cycle, nic, port] (its last NIC)
        self._offers = []           # heap: (offer cycle, order, id)
        self._events = []           # heap: (cycle at the switch, order, kind, id, nic)
        self._order = itertools.count()
        self._pending = {n: [] for n in self.nics}          # arrivals to push next window
        self._pushed = {n: [[] for _ in range(infos[n]["ports"])] for n in self.nics}
        self._seq_index = {n: [dict() for _ in range(infos[n]["ports"])] for n in self.nics}
        self._accepted_count = {n: [0] * infos[n]["ports"] for n in self.nics}
        self.outputs = {}           # id -> the bytes its NIC delivered
        self._accepts = {}          # id -> its NIC's accept cycle
        self._ops = {n: [] for n in self.nics}
        self._results = {}
        self._op_ids = itertools.count()
        self.delivered = []         # (id, endpoint, arrival cycle, nic)
        self.nic_outputs = 0
        self.late = 0               # packets that reached a NIC after their cycle (must stay 0)
        self.policy = None          # a PoolPolicy (sim/rack/pool.py), ticked by run()
        self._in_policy = False
        self.lost_packets = 0       # sent to a dead NIC, or to a tenant that runs nowhere
        self.lost_ids = set()
        self._flow_hash = {}
        self._parser = ParserModel(max(i["header_bytes"] for i in infos.values()))
        # The intermediate pool (module docstring): endpoints hang off their home sNIC, the
        # sNICs off the switch, and redirected packets cross it as rack frames.
        self.pool = config.topology == "pool"
        self.nic_ids = {n.name: i for i, n in enumerate(config.nics)}
        self.nic_by_id = {i: n for n, i in self.nic_ids.items()}
        self._carry = {}            # id -> the rack frame it crosses the switch in
        self.redirected_seen = collections.Counter()    # (nic, tenant) -> rack frames out
        self.unroutable = 0         # rack frames to an sNIC the rack does not have
        self.attach, self.down = {}, {}
        if self.pool:
            bare = [n for n in names if infos[n]["rack_port"] is None]
            if bare:
                raise RackRunError(f"rack {config.name} is an intermediate pool, but "
                                   f"{', '.join(bare)} ha{'s' if len(bare) == 1 else 've'} no "
                                   f"rack port (build it with nic.rack = true)")
            taken = collections.Counter()
            for e in config.endpoints:
                ports = infos[e.nic]["endpoint_ports"]
                self.attach[e.name] = (e.nic, taken[e.nic] % ports)
                taken[e.nic] += 1
                self.down[e.name] = Link(f"{e.name}.down", e.link_bytes_per_cycle,
                                         e.link_cycles)
        for name in names:
            if infos[name]["rack_port"] is not None:
                self.call(name, "write", values={"rack.nic_id": self.nic_ids[name]})

    # --- Ray ------------------------------------------------------------------------------------
    def _gather(self, calls):
        """``{nic: result}`` of pending calls; a NIC whose actor died is marked dead."""
        out = {}
        for name, pending in calls.items():
            try:
                out[name] = self.nics[name].gather(pending)
            except Exception as e:  # noqa: BLE001: Ray's RayActorError, or an actor's bug
                if type(e).__name__ not in ("RayActorError", "ActorDiedError",
                                            "ActorUnavailableError"):
                    raise
                self._died(name)
        return out

    def _died(self, name):
        """``name``'s actor is gone: its tenants that run nowhere else are lost, and so is
        every packet it held (counted in ``lost``, never hidden)."""
        if name in self.dead:
            return
        self.dead[name] = self.now
        inside = [pid for port in self._pushed[name] for pid in port
                  if pid not in self.outputs]
        inside += [entry[0] for entry in self._pending[name]]
        self._pending[name] = []
        self.lost_packets += len(inside)
        self.lost_ids.update(inside)
        lost = [t for t in self.tenants.values() if any(n == name for n, _ in t.instances)]
        for t in lost:
            t.instances = [(n, s) for n, s in t.instances if n != name]
            t.regions = [(n, r) for n, r in t.regions if n != name]
            t.lost = not t.instances
        self.progress(f"{name} died at cycle {self.now}: {len(inside)} packets in it lost; "
                      f"tenants lost: {', '.join(t.name for t in lost if t.lost) or 'none'}")

    def lost_tenants(self):
        return sorted(t.name for t in self.tenants.values() if t.lost)

    def close(self):
        for nic in self.nics.values():
            try:
                nic.kill()
            except Exception:  # noqa: BLE001: closing what may already be gone
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- control --------------------------------------------------------------------------------
    def _operate(self, nic, name, **kwargs):
        """Ask ``nic`` for operation ``name``; returns its id (:meth:`wait_for` its result)."""
        if nic in self.dead:
            raise RackRunError(f"{nic} is dead (since cycle {self.dead[nic]})")
        op_id = next(self._op_ids)
        self._ops[nic].append((op_id, name, kwargs))
        return op_id

    def wait_for(self, op_id, max_windows=100_000):
        """Run windows until operation ``op_id`` finished; its result. Raises
        :class:`RackRunError` with the NIC's one line if it failed."""
        for _ in range(max_windows):
            if op_id in self._results:
                ok, result = self._results.pop(op_id)
                if not ok:
                    raise RackRunError(result["error"])
                return result
            self.step()
        raise RackRunError(f"operation {op_id} did not finish in {max_windows} windows")

    def call(self, nic, name, **kwargs):
        return self.wait_for(self._operate(nic, name, **kwargs))

    def free_slot(self, nic):
        used = {s for t in self.tenants.values() for n, s in t.instances if n == nic}
        for slot in range(self.info[nic]["tenants"]):
            if slot not in used:
                return slot
        raise RackRunError(f"{nic} has no free tenant slot (it has "
                           f"{self.info[nic]['tenants']})")

    def free_regions(self, nic, chain):
        """Regions of ``nic`` not running a rack tenant that can load ``chain``."""
        used = {r for t in self.tenants.values() for n, r in t.regions if n == nic}
        return [r for r, names in enumerate(self.info[nic]["regions"])
                if chain in names and r not in used]

    def place(self, tenant):
        """Where ``tenant`` goes: its ``nic`` in rack.toml, else its endpoint's home sNIC if
        it has a free region for the chain, else the sNIC with the most such regions."""
        t = self.tenants[tenant]
        home = self.config.endpoint(t.entry.endpoint).nic
        if self.pool:
            return home     # its endpoint's packets come in there; overload goes to peers
        if t.entry.nic:
            return t.entry.nic
        alive = [n for n in self.nics if n not in self.dead]
        if home in alive and len(self.free_regions(home, t.spec.name)) >= t.entry.instances:
            return home
        best = max(alive, key=lambda n: len(self.free_regions(n, t.spec.name)))
        if len(self.free_regions(best, t.spec.name)) < t.entry.instances:
            raise RackRunError(f"no sNIC of rack {self.config.name} has "
                               f"{t.entry.instances} free region(s) for chain {t.spec.name!r}")
        return best

    def deploy(self, tenant, nic=None, instances=None):
        """Deploy rack tenant ``tenant`` on ``nic`` (default: :meth:`place`); another NIC
        than the ones it runs on adds instances there, and the switch balances its flows."""
        t = self._tenant(tenant)
        nic = nic or self.place(tenant)
        if nic not in self.nics:
            raise RackRunError(f"rack {self.config.name} has no NIC {nic!r}")
        if any(n == nic for n, _ in t.instances):
            raise RackRunError(f"tenant {tenant} already runs on {nic}")
        slot = self.free_slot(nic)
        result = self.call(nic, "deploy", chain=str(t.entry.chain), tenant=slot,
                           instances=instances or t.entry.instances, weight=t.entry.weight)
        t.instances.append((nic, slot))
        t.regions += [(nic, r) for r in result["regions"]]
        if self.info[nic]["rack_port"] is not None:
            base = self.call(nic, "read", registers=[("rack", f"t{slot}_redirected")])
            t.redirect_base[nic] = sum(base.values())
        return {"tenant": tenant, "nic": nic, "slot": slot, "regions": result["regions"]}

    def deploy_all(self):
        return [self.deploy(t) for t in self.tenants if not self.tenants[t].instances]

    def undeploy(self, tenant, nic):
        """Remove ``tenant``'s instance on ``nic``. In a pool, removing it from its home
        removes it from the rack: its redirect is cleared, then every instance goes (packets
        still on their way are dropped by the classifiers and counted)."""
        t = self._tenant(tenant)
        slot = dict(t.instances).get(nic)
        if slot is None:
            raise RackRunError(f"tenant {tenant} does not run on {nic}")
        nics = [nic]
        if self.pool and nic == self.attach[t.entry.endpoint][0]:
            if t.redirects:
                self.call(nic, "redirect", tenant=slot, peers=[])
                t.redirects = []
            nics += [n for n, _ in t.instances if n != nic]
        elif any(n == nic for n, _ in t.redirects):
            raise RackRunError(f"tenant {tenant}'s home redirects flows to {nic}: move them "
                               f"back first")
        for n in nics:
            self.call(n, "undeploy", tenant=dict(t.instances)[n])
            t.instances = [(m, s) for m, s in t.instances if m != n]
            t.regions = [(m, r) for m, r in t.regions if m != n]

    def migrate(self, tenant, target):
        """Move ``tenant``'s one instance to sNIC ``target`` with its state, traffic flowing
        (module docstring). Returns a report: the cycles the move took and the packets held."""
        t = self._tenant(tenant)
        if len(t.instances) != 1:
            raise RackRunError(f"tenant {tenant} runs on {len(t.instances)} sNICs; a move "
                               f"takes a tenant on one")
        source, slot = t.instances[0]
        if target == source:
            raise RackRunError(f"tenant {tenant} already runs on {target}")
        if target not in self.nics or target in self.dead:
            raise RackRunError(f"{target!r} is not a live sNIC of rack {self.config.name}")
        if self.info[target]["description"].get("build_id") != \
                self.info[source]["description"].get("build_id"):
            raise RackRunError(f"{source} and {target} run different designs; the state of "
                               f"one does not fit the other")
        if not self.free_regions(target, t.spec.name):
            raise RackRunError(f"{target} has no free region for chain {t.spec.name!r}")
        new_slot = self.free_slot(target)
        start = self.now
        # The target first, stopped, while the tenant's packets still go to the source: the
        # switch then holds them only while the state moves.
        prepared = self.call(target, "prepare", chain=str(t.entry.chain), tenant=new_slot,
                             weight=t.entry.weight)
        region = prepared["regions"][0]
        t.held = collections.deque()
        held_at = self.now
        try:
            # Everything already sent to the source goes in before its state is taken.
            while self._in_transit(tenant, source):
                self.step()
            moved = self.call(source, "capture", tenant=slot)
            restored = self.call(target, "restore", region=region, moved=moved)
        except Exception:
            # Back as it was: the held packets go to the source, the target is freed.
            released, t.held = t.held, None
            self._release(t, released)
            self.call(target, "undeploy", tenant=new_slot)
            raise
        t.instances = [(target, new_slot)]
        t.regions = [(n, r) for n, r in t.regions if n != source] + [(target, region)]
        released, t.held = t.held, None
        held, held_cycles = len(released), self.now - held_at
        self._release(t, released)
        self.call(source, "undeploy", tenant=slot)
        return {"tenant": tenant, "from": source, "to": target, "region": region,
                "words": restored["words"], "held": held, "held_cycles": held_cycles,
                "cycles": self.now - start}

    def _release(self, tenant, held):
        """Send ``held`` packets on after a hold, in order, no faster than its endpoint's link
        brought them: a burst at the NIC's line rate would overrun its queue for the tenant
        where the dispatch path is shared. Packets that come meanwhile queue behind them."""
        endpoint = self.config.endpoint(tenant.entry.endpoint)
        tenant.pause = Link(f"{tenant.name}.release", endpoint.link_bytes_per_cycle, 0)
        for packet_id, t in held:
            self._paced(tenant, packet_id, max(t, self.now))

    def _paced(self, tenant, packet_id, t):
        first, _ = tenant.pause.send(t, len(self.packets[packet_id][1]))
        if self.pool:
            self._at_home(packet_id, first)
        else:
            self._to_switch(first, "release", packet_id)

    def _at_home(self, packet_id, t):
        """In a pool: a packet reaches its endpoint's home sNIC at cycle ``t``."""
        tenant = self.tenants[self.packets[packet_id][0]]
        home, port = self.attach[tenant.entry.endpoint]
        if home in self.dead or not tenant.instances:
            self.lost_packets += 1
            self.lost_ids.add(packet_id)
            return
        self._arrive(packet_id, t, home, port, self.packets[packet_id][1])

    def _tenant(self, name):
        if name not in self.tenants:
            raise RackRunError(f"rack {self.config.name} has no tenant {name!r}")
        return self.tenants[name]

    def _in_transit(self, tenant, nic):
        """Whether a packet of ``tenant`` sent to ``nic`` may not have reached its queues
        yet: on its way, waiting at its port, or accepted less than the cycles its beats and
        the parser and classifier take (a bound: :data:`SETTLE_CYCLES` after its last beat)."""
        if any(self.packets[entry[0]][0] == tenant for entry in self._pending[nic]):
            return True
        beat = self.info[nic]["data_width"] // 8
        for port in self._pushed[nic]:
            for pid in reversed(port):
                if self.packets[pid][0] != tenant:
                    continue
                accepted = self._accepts.get(pid)
                if accepted is None:
                    return True
                beats = -(-len(self.packets[pid][1]) // beat)
                return accepted + beats + SETTLE_CYCLES > self.now
        return False

    # --- traffic --------------------------------------------------------------------------------
    def send(self, tenant, flows, cycles=None, packets=1000, seed=1, start=None):
        """Offer ``tenant``'s ``flows`` (:class:`~supernic.driver.traffic.Flow`, their rate a
        fraction of its endpoint's link) from ``start`` (default: now); returns the ids."""
        t = self._tenant(tenant)
        endpoint = self.config.endpoint(t.entry.endpoint)
        some = next(iter(self.info.values()))
        flows = [dataclasses.replace(f, tenant=0, port=0) for f in flows]
        schedule = make_schedule(flows, {0: {"keys": list(t.spec.keys), "spec": t.spec}},
                                 some["data_width"], 1, packets, cycles, seed,
                                 some["header_bytes"])
        # The schedule paces at one beat a cycle of the NIC; the endpoint's link paces at its
        # own rate: offer times scale by the ratio, the link then serialises.
        scale = (some["data_width"] / 8) / endpoint.link_bytes_per_cycle
        base = self.now if start is None else start
        ids = []
        for frame, at in zip(schedule.frames, schedule.at):
            packet_id = next(self._ids)
            self.packets[packet_id] = [tenant, frame, base + int(at * scale), None, None]
            heapq.heappush(self._offers, (base + int(at * scale), packet_id))
            ids.append(packet_id)
        return ids

    def _hash(self, frame):
        h = self._flow_hash.get(frame)
        if h is None:
            h = self._flow_hash[frame] = self._parser.parse(frame)["flow_hash"]
        return h

    def _to_switch(self, t, kind, packet_id, nic=None):
        heapq.heappush(self._events, (t, next(self._order), kind, packet_id, nic))

    def _to_nic(self, packet_id, t, nic):
        """The switch sends packet ``packet_id`` (at the switch at ``t``) to ``nic``."""
        tenant = self.tenants[self.packets[packet_id][0]]
        port = tenant.index % self.info[nic]["endpoint_ports"]
        frame = self.packets[packet_id][1]
        arrival = self.switch.forward(t, f"{nic}.{port}", len(frame))
        if arrival is None:
            return              # dropped at the switch, counted on its port
        self._arrive(packet_id, arrival[0], nic, port, frame)

    def _arrive(self, packet_id, at, nic, port, frame):
        self.packets[packet_id][3:5] = [nic, port]
        self._pending[nic].append((packet_id, at, port, frame))

    def _switch_until(self, horizon):
        """Forward every packet that reaches the switch before ``horizon``."""
        while self._events and self._events[0][0] < horizon:
            t, _, kind, packet_id, nic = heapq.heappop(self._events)
            record = self.packets[packet_id]
            tenant = self.tenants[record[0]]
            if kind == "offer" and tenant.held is not None:
                tenant.held.append((packet_id, t))
            elif kind == "offer" and tenant.pause is not None and tenant.pause.free > t:
                self._paced(tenant, packet_id, t)   # behind the packets a hold released
            elif kind in ("offer", "release"):
                if not tenant.instances:
                    self.lost_packets += 1          # no sNIC runs it (never deployed, or lost)
                    self.lost_ids.add(packet_id)
                else:
                    nics = sorted(n for n, _ in tenant.instances)
                    self._to_nic(packet_id, t, nics[self._hash(record[1]) % len(nics)])
            elif kind == "rack":    # a redirected packet, to the peer the frame names
                peer = self.nic_by_id.get(self._carry[packet_id][5])
                if peer is None or peer in self.dead:
                    self.unroutable += 1
                    self.lost_packets += 1
                    self.lost_ids.add(packet_id)
                    continue
                port = self.info[peer]["rack_port"]
                frame = self._carry.pop(packet_id)
                arrival = self.switch.forward(t, f"{peer}.{port}", len(frame))
                if arrival is not None:
                    self._arrive(packet_id, arrival[0], peer, port, frame)
            else:   # a NIC's output, back to the tenant's endpoint
                arrival = self.switch.forward(t, tenant.entry.endpoint,
                                               len(self.outputs[packet_id]))
                if arrival is not None:
                    self.delivered.append((packet_id, tenant.entry.endpoint, arrival[1],
                                           nic))

    def step(self):
        """One lockstep window: the switch, then every NIC to the window's end."""
        start, end = self.now, self.now + self.window_cycles
        while self._offers and self._offers[0][0] < end:
            at, packet_id = heapq.heappop(self._offers)
            tenant = self.tenants[self.packets[packet_id][0]]
            link = self.up[tenant.entry.endpoint]
            first, _ = link.send(at, len(self.packets[packet_id][1]))
            if not self.pool:
                self._to_switch(first, "offer", packet_id)
            elif tenant.held is not None:
                tenant.held.append((packet_id, first))      # paused at its endpoint
            elif tenant.pause is not None and tenant.pause.free > first:
                self._paced(tenant, packet_id, first)
            else:
                self._at_home(packet_id, first)
        # NIC outputs are known up to ``start``; they reach the switch no sooner than a NIC
        # link's latency later. Endpoints' offers are known up to ``end``.
        nic_horizon = start + min(n.link_cycles for n in self.config.nics)
        self._switch_until(nic_horizon)
        calls = {}
        for name, nic in self.nics.items():
            if name in self.dead:
                continue
            arrivals = []
            for packet_id, at, port, frame in self._pending[name]:
                if at < start:
                    self.late += 1      # would arrive in the NIC's past: the window is too long
                arrivals.append((port, frame, at))
                self._pushed[name][port].append(packet_id)
            self._pending[name] = []
            ops, self._ops[name] = self._ops[name], []
            calls[name] = nic.call("window", end, arrivals, ops)
        results = self._gather(calls)
        self.now = end
        for name, (outputs, accepted, finished) in results.items():
            self._collect(name, outputs, accepted)
            for op_id, ok, result in finished:
                self._results[op_id] = (ok, result)

    def _collect(self, nic, outputs, accepted):
        # The classifier numbers each port's packets in accept order, 16 bits wrapping
        # (hw/nic/classifier.py, ``seq``): the k-th accepted is the k-th pushed.
        pushed, by_seq = self._pushed[nic], self._seq_index[nic]
        for port, cycles in enumerate(accepted):
            first = self._accepted_count[nic][port]
            for k, cycle in enumerate(cycles):
                packet_id = pushed[port][first + k]
                self._accepts[packet_id] = cycle
                by_seq[port][(first + k) % 65536] = packet_id
            self._accepted_count[nic][port] = first + len(cycles)
        if not outputs:
            return
        tags = delivered_tags(outputs, self.info[nic]["description"])
        link = self.up[nic]
        for k, packet in enumerate(outputs):
            port, seq = int(tags["port"][k]), int(tags["seq"][k])
            packet_id = by_seq[port].pop(seq, None)
            if packet_id is None:
                raise RackRunError(f"{nic} delivered a packet (port {port}, seq {seq}) the "
                                   f"rack never sent it")
            self.nic_outputs += 1
            offset = self.info[nic]["redirect_offset"]
            if offset is not None and packet.first_user >> offset & 1:
                self._carry[packet_id] = packet.data
                self.redirected_seen[(nic, self.packets[packet_id][0])] += 1
                _, last = link.send(packet.last_cycle, len(packet.data))
                self._to_switch(last, "rack", packet_id, nic)
                continue
            self.outputs[packet_id] = packet.data
            endpoint = self.tenants[self.packets[packet_id][0]].entry.endpoint
            if self.pool and self.attach[endpoint][0] == nic:
                # From its home sNIC an output goes straight down the endpoint's link.
                _, last = self.down[endpoint].send(packet.last_cycle, len(packet.data))
                self.delivered.append((packet_id, endpoint, last, nic))
                continue
            _, last = link.send(packet.last_cycle, len(packet.data))
            self._to_switch(last, "output", packet_id, nic)

    def busy_toward(self, tenant, nic):
        """Whether a rack frame of ``tenant`` is still on its way across the switch."""
        return any(kind == "rack" and self.packets[pid][0] == tenant
                   for _, _, kind, pid, _ in self._events)

    def _policy_tick(self):
        policy = self.policy
        if policy is not None and not self._in_policy and policy.due(self.now):
            self._in_policy = True
            try:
                policy.tick()
            finally:
                self._in_policy = False

    def run(self, cycles):
        """Run ``cycles`` more cycles (whole windows), letting the policy act when due."""
        end = self.now + cycles
        while self.now < end:
            self.step()
            self._policy_tick()

    def busy(self):
        """Packets offered, at the switch or on their way to an endpoint."""
        if self._offers or self._events or any(self._pending.values()):
            return True
        return any(t.held for t in self.tenants.values())

    def run_until_drained(self, quiet=2_000, max_cycles=50_000_000):
        """Run until no packet is left in the rack: nothing offered or at the switch, and no
        NIC has sent anything for ``quiet`` cycles."""
        last, start = self.now, self.now
        seen = (len(self.delivered), self.nic_outputs)
        while self.now - start < max_cycles:
            self.step()
            self._policy_tick()
            now = (len(self.delivered), self.nic_outputs)
            if now != seen or self.busy():
                seen, last = now, self.now
            elif self.now - last >= quiet:
                return self.now - start
        raise RackRunError(f"rack {self.config.name} did not drain in {max_cycles} cycles")

    # --- figures --------------------------------------------------------------------------------
    def status(self):
        """Per NIC: its regions (tenant, chain), its tenants and their counters."""
        calls = {n: self._operate(n, "status") for n in self.nics if n not in self.dead}
        out = {}
        for name, op_id in calls.items():
            try:
                out[name] = self.wait_for(op_id)
            except RackRunError as e:
                out[name] = {"error": str(e)}
        return out

    def account(self, status=None):
        """The rack-wide account: packets sent, delivered to endpoints, dropped and where;
        ``balanced`` when every packet sent is delivered or counted."""
        status = status or self.status()
        nic_drops = {}
        for name, s in status.items():
            if "error" in s:
                continue
            drops = sum(p["classifier"]["dropped"] for p in s["ports"])
            drops += sum(t["queue_drops"] + t["disabled_drops"] + t["dropped"]
                         for t in s["tenants"])
            drops += s.get("store", {}).get("drops", 0) + s.get("store", {}).get(
                "stall_drops", 0)
            drops += s.get("rack", {}).get("rx_bad", 0)
            nic_drops[name] = drops
        sent = len(self.packets)
        delivered = len(self.delivered)
        counted = sum(nic_drops.values()) + self.switch.dropped() + self.lost_packets
        return {"sent": sent, "delivered": delivered, "switch_drops": self.switch.dropped(),
                "nic_drops": nic_drops, "lost": self.lost_packets,
                "dead": dict(self.dead), "lost_tenants": self.lost_tenants(),
                "balanced": sent == delivered + counted}
