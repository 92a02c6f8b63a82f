"""The control plane: deploying tenants' chains onto the multi-tenant NIC, and removing them.

    plane = ControlPlane(bus, description, state_path=..., wait=...)
    record = await plane.deploy("chains/web.toml", tenant=0, instances=2, weight=1)
    await plane.migrate(0, source=1, target=3)      # live, with its state (nic.yieldable)
    sample, counters = await plane.sample(0, counters)   # for the auto-scaler (autoscale.py)
    await plane.apply_rebalance(decision)           # its Rebalance: the table committed
    await plane.scale_out(0, region=4)              # its ScaleOut; scale_in gives one back
    await plane.undeploy(0)

``description`` is the design JSON (:func:`supernic.hw.generate.design_description`, which the
device server's ``hello`` returns); ``bus`` any :class:`~supernic.driver.transport.RegisterBus`.

Where the truth lives
---------------------
Every operation first reads the hardware again, so several CLI invocations, or a restarted
driver, see the same state: ``scheduler.tenant_enable`` (which tenants take packets) and, per
region, ``active`` (the personality loaded). The flow tables and classifier slots are write-only
(the hardware has no read-back path for them), so what the hardware cannot say, the tenant's
chain, regions, keys and weight (and its flow table, once a rebalance committed one), is kept
in a small JSON state file next to the device socket.
The hardware wins when the two disagree:

* a record whose tenant is disabled is stale (a deploy or undeploy was interrupted) and is
  dropped;
* a record whose regions do not all hold its chain's personality, or made for another build,
  is stale too (the device was reset or reloaded behind the driver's back);
* the classifier of port 0 with every staging register at its reset value has never been
  programmed since reset (a table write leaves ``entry_index`` at the last slot): the device
  is fresh from reset, every record is stale, and the enable bits are the reset default (every
  tenant enabled, the classifier empty, so no packet reaches any of them). These are not
  deployments: a deploy writes the enable mask whole and clears them;
* a tenant enabled on a programmed device without a valid record is *unmanaged*: its flow
  table cannot be read, so a region it may use cannot be given to anyone. Deploys are refused
  until it is undeployed (``snic undeploy --tenant T`` works without a record).

Invariant kept by :meth:`ControlPlane.undeploy` and by a deploy's rollback: a tenant that is not
deployed has its reset flow table (region ``t mod R``) and its reset weight, so a rollback can
put the table back without reading it.

Every operation is one plan of register steps run by one
:class:`~supernic.driver.transaction.Transaction`, which journals the read-write registers
and, when a step fails, undoes the steps that started backwards (see
:mod:`~supernic.driver.transaction`); then one :class:`DeployFailed` is raised. Undeploy and a
context switch recover forwards instead (run them again).

Deploy order (packets never meet a half-written configuration): loading the personality where
another one is active (``load_index``, the ``load`` strobe, then ``online`` and ``active`` are
polled; the region's ``reconfig_cycles`` is left as the board set it); the NT configurations of the
chosen regions' personality blocks, written to the personality that runs (on a
partial-reconfiguration board one that is not loaded is not there); the region costs
(``r<r>_cost``, 8.8 fixed point of the chain's cycles per beat); the tenant's weight; its flow
table over its regions, committed (``commit_pending`` polled); the classifier table, rewritten
whole on every port with every tenant's keys; the enable bit last. Undone backwards: the enable
bit first, the previous classifier table written again, the tenant's table reset, and every
read-write register written back to its previous value. A personality loaded for the deploy
stays loaded (the region is free, so nothing uses it; loading the old one back would cost
another reconfiguration), and strobed NT table writes in that free region are not undone.

Scale out and in (:meth:`ControlPlane.scale_out`, :meth:`ControlPlane.scale_in`) and migration
change a deployed tenant's regions the same way: a region is configured before the tenant's
table takes it in, and a table moves flows away from a region before it is freed.
"""

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..desc.chain import PARTS, ChainError, load_chain, split_chain
from ..desc.config import ConfigError
from ..desc.nic.classifier import ClassifierConfig, classifier_block
from ..desc.nic.shape import NicShape
from ..desc.nic.region import personality_block_name
from ..desc.nic.scheduler import SchedulerConfig
from .discovery import check_supported, discover
from .transaction import (Action, Commit, ControlError, ControlTimeout, DeployFailed,
                          DeployRefused, Linked, Load, Poll, Registers, Staged, Transaction,
                          Write)
from .transport import TransportLost

__all__ = ["ControlPlane", "TenantRecord", "ControlError", "DeployRefused", "DeployFailed",
           "ControlTimeout", "STATE_VERSION", "chain_writes"]

STATE_VERSION = 1


@dataclass(frozen=True)
class TenantRecord:
    """A deployed tenant: its chain (by name and spec file), the regions hosting it, its keys
    and weight, and its flow table when a rebalance committed one (``table``, one region per
    entry; empty: the entries dealt out over ``regions`` in turn, as a deploy writes them)."""
    tenant: int
    chain: str
    source: str
    regions: tuple
    keys: tuple
    weight: float = 1
    build_id: int = 0
    # A chain split over linked regions (hw/nic/link.py): regions[i] runs its primary part,
    # branches[i] its secondary branches.
    branches: tuple = ()
    table: tuple = ()

    def to_json(self):
        out = asdict(self)
        out["regions"], out["keys"] = list(self.regions), list(self.keys)
        out["branches"], out["table"] = list(self.branches), list(self.table)
        return out

    @classmethod
    def from_json(cls, raw):
        return cls(int(raw["tenant"]), str(raw["chain"]), str(raw["source"]),
                   tuple(int(r) for r in raw["regions"]), tuple(int(k) for k in raw["keys"]),
                   raw.get("weight", 1), int(raw.get("build_id", 0)),
                   tuple(int(r) for r in raw.get("branches", ())),
                   tuple(int(r) for r in raw.get("table", ())))

    def placements(self):
        """``[(region, personality name)]`` of every region the tenant holds."""
        if not self.branches:
            return [(r, self.chain) for r in self.regions]
        return ([(r, f"{self.chain}_{PARTS[0]}") for r in self.regions]
                + [(r, f"{self.chain}_{PARTS[1]}") for r in self.branches])


class ControlPlane:
    """Deploys and removes tenants on the NIC behind ``bus`` (see the module docstring).

    ``state_path``: the JSON state file (``None``: keep records in memory only); ``wait``: an
    async callable run between two polls of a handshake (a served virtual device only advances
    when asked: pass ``lambda: client.run(256)``); ``timeout``: seconds a handshake may take.
    """

    def __init__(self, bus, description, state_path=None, wait=None, timeout=10.0):
        if not isinstance(description, dict) or "registers" not in description:
            raise TypeError(f"Description must be a design JSON object with registers, "
                            f"not {description!r}")
        if not description.get("regions"):
            raise DeployRefused("the design is not a multi-tenant NIC (its description has no "
                                "regions)")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError(f"Timeout must be a positive number of seconds, not {timeout!r}")
        self.bus = bus
        self.description = description
        self.state_path = Path(state_path) if state_path is not None else None
        self.regs = Registers(bus, description, wait, timeout)
        self.wait = self.regs.wait
        self.timeout = timeout
        cfg = description["config"]
        self.regions = description["regions"]
        self.shape = NicShape.from_description(description)
        self.table_size = cfg["table_size"]
        self.classifier_entries = cfg["classifier_entries"]
        self.build_id = description.get("build_id", 0)
        self.links = {a: b for a, b in cfg.get("links", ())}   # primary -> branch region
        self._checked = False
        self._memory = {}           # records when there is no state file
        self._specs = {}            # tenant -> the chain spec deployed, when given in memory
        self.deployed = {}          # tenant -> TenantRecord, after refresh()
        self.unmanaged = ()         # enabled tenants without a valid record
        self.fresh = False          # the device has not been programmed since reset
        self.enable_mask = 0
        self.active = []            # per region: index of the active personality
        self.hold_mask = 0          # scheduler.tenant_hold (time-shared tenants not loaded)
        self.shares = {}            # region -> its TimeShare contexts (TimeShare.to_json)
        self._memory_shares = {}

    async def read(self, block, reg):
        return await self.regs.read(block, reg)

    def _reset(self, block, reg):
        return self.regs.reset(block, reg)

    # --- state ----------------------------------------------------------------------------------
    async def check_design(self):
        """Discover the blocks, refuse unsupported versions and a description of another
        design (raises :class:`~supernic.driver.discovery.UnsupportedDesignError` or
        :class:`DeployRefused`)."""
        if self._checked:
            return
        blocks = await discover(self.bus)
        check_supported(blocks)
        described = {b["base"]: b for b in self.description["registers"]["blocks"]}
        found = {b.base: b for b in blocks}
        for base, entry in described.items():
            block = found.get(base)
            if block is None or block.type_id != entry["type"]:
                raise DeployRefused(f"the design description does not match the device: block "
                                    f"{entry['name']} is not at {base:#010x}")
        build_id = await self.read("id", "build_id")
        if build_id != self.build_id:
            raise DeployRefused(f"the device runs build {build_id:#010x}, the description is "
                                f"of build {self.build_id:#010x}")
        self._checked = True

    def _load_records(self):
        """The records of the state file; also sets :attr:`shares`."""
        self.shares = dict(self._memory_shares)
        if self.state_path is None:
            return dict(self._memory)
        try:
            raw = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise ControlError(f"cannot read the state file {self.state_path}: {e}") from None
        try:
            if raw.get("version") != STATE_VERSION:
                return {}
            records = [TenantRecord.from_json(r) for r in raw.get("tenants", [])]
            self.shares = {int(r): v for r, v in raw.get("time_shares", {}).items()}
        except (AttributeError, KeyError, TypeError, ValueError):
            return {}               # unreadable bookkeeping: the hardware decides alone
        return {r.tenant: r for r in records}

    def _save_records(self, records):
        if self.state_path is None:
            self._memory = dict(records)
            self._memory_shares = dict(self.shares)
            return
        text = json.dumps({"version": STATE_VERSION, "build_id": self.build_id,
                           "tenants": [records[t].to_json() for t in sorted(records)],
                           "time_shares": {str(r): v for r, v in sorted(self.shares.items())}},
                          indent=2)
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(self.state_path.name + f".{os.getpid()}.tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, self.state_path)   # atomic: a reader sees the old or the new file

    def _personality(self, region, chain):
        for index, p in enumerate(self.regions[region]):
            if p["name"] == chain:
                return index
        return None

    async def _classifier_programmed(self):
        for (block, reg), info in self.regs.items():
            if block == "classifier0" and info["access"] == "RW" and reg.startswith("entry_"):
                if await self.read(block, reg) != info["reset"]:
                    return True
        return False

    async def refresh(self):
        """Read the hardware and reconcile the state file with it (module docstring); set
        ``deployed``, ``unmanaged``, ``enable_mask`` and ``active``."""
        await self.check_design()
        self.enable_mask = await self.read("scheduler", "tenant_enable")
        self.active = [await self.read(f"region{r}", "active") for r in range(len(self.regions))]
        self.hold_mask = (await self.read("scheduler", "tenant_hold")
                          if ("scheduler", "tenant_hold") in self.regs else 0)
        records = self._load_records()
        fresh = not await self._classifier_programmed()
        deployed, unmanaged = {}, []
        for t in range(self.shape.tenants):
            record = records.get(t)
            valid = (not fresh and record is not None and self.enable_mask >> t & 1
                     and record.build_id == self.build_id and record.regions
                     and all(0 <= r < len(self.regions)
                             and self._personality(r, name) == self.active[r]
                             for r, name in record.placements()))
            if valid:
                deployed[t] = record
            elif self.enable_mask >> t & 1 and not fresh:
                unmanaged.append(t)
        self.fresh = fresh
        self.deployed, self.unmanaged = deployed, tuple(unmanaged)
        # Contexts of a region that two or more deployed tenants no longer share are stale.
        shares = {r: raw for r, raw in self.shares.items() if len(self._sharers(r)) > 1}
        if deployed != records or shares != self.shares:
            self.shares = shares
            self._save_records(deployed)
        return deployed

    def free_regions(self):
        used = {r for record in self.deployed.values() for r, _ in record.placements()}
        return [r for r in range(len(self.regions)) if r not in used]

    @contextlib.contextmanager
    def _locked(self):
        """Hold an exclusive lock on ``<state file>.lock`` for one operation, so that two
        drivers sharing a device and its state file deploy one after the other."""
        if self.state_path is None:
            yield
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.state_path.with_name(self.state_path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # --- planning -------------------------------------------------------------------------------
    def _hosts(self):
        return "; ".join(f"region {r}: {', '.join(p['name'] for p in ps)}"
                         for r, ps in enumerate(self.regions))

    def _split_hosts(self, spec):
        """``(parts, [(primary region, branch region)])``: the linked pairs whose regions can
        host the two parts of ``spec`` split (sw/desc/chain.py, ``split_chain``); no pairs for
        a chain that cannot split."""
        try:
            parts = split_chain(spec)
        except ChainError:
            return None, []
        pairs = [(a, b) for a, b in sorted(self.links.items())
                 if self._personality(a, parts[0].name) is not None
                 and self._personality(b, parts[1].name) is not None]
        if pairs:
            self._check_spec(parts[0], [a for a, _ in pairs])
            self._check_spec(parts[1], [b for _, b in pairs])
        return parts, pairs

    def _check_spec(self, spec, hosts=None):
        """The spec's chain must be one the regions were built with, node for node."""
        hosts = hosts or [r for r in range(len(self.regions))
                          if self._personality(r, spec.name) is not None]
        if not hosts:
            raise DeployRefused(f"chain {spec.name!r} ({spec.source}) is not a personality of "
                                f"any region; the regions can host: {self._hosts()}")
        built = self.regions[hosts[0]][self._personality(hosts[0], spec.name)]
        mine = [(n.name, n.kind) for n in spec.node_list()]
        theirs = [(n["name"], n["nt"]) for n in built["nodes"]]
        if mine != theirs:
            raise DeployRefused(f"chain {spec.name!r} ({spec.source}) has nodes {mine}, but "
                                f"the regions were built with {theirs}")
        return hosts, built

    def _classifier_writes(self, records):
        """The writes programming every port's classifier with ``records``' keys."""
        config = ClassifierConfig.from_tenants(
            [(r.tenant, list(r.keys)) for r in sorted(records.values(), key=lambda r: r.tenant)],
            default=None)
        if len(config.entries) > self.classifier_entries:
            raise DeployRefused(f"the classifier has {self.classifier_entries} slots, the "
                                f"tenants' keys need {len(config.entries)}")
        writes = []
        for p in range(self.shape.ports):
            block = classifier_block(f"classifier{p}", self.shape, self.classifier_entries)
            writes += [Write(f"classifier{p}", reg, value)
                       for reg, value in config.register_writes(block)]
        return writes

    def _classifier(self, records, previous):
        """The classifier rewritten whole for ``records``; undone by rewriting ``previous``'s
        (the slots cannot be read back)."""
        return Staged("the classifier", tuple(self._classifier_writes(records)),
                      undo=lambda: self._classifier_writes(previous))

    def _table_entry_writes(self, tenant, table):
        writes = []
        for i, region in enumerate(table):
            writes += [Write("scheduler", "table_tenant", tenant),
                       Write("scheduler", "table_index", i),
                       Write("scheduler", "table_region", region),
                       Write("scheduler", "table_write", 1)]
        return writes + [Write("scheduler", "table_commit", 1 << tenant), Commit(tenant)]

    def _in_turn(self, regions):
        return [regions[i % len(regions)] for i in range(self.table_size)]

    def _flow_table(self, tenant, table, previous):
        """``tenant``'s flow table staged and committed (the scheduler holds the tenant until
        its packets in flight have left, so no flow reorders); undone by committing
        ``previous`` (a table cannot be read back)."""
        return Staged(f"tenant {tenant}'s flow table",
                      tuple(self._table_entry_writes(tenant, table)),
                      undo=lambda: self._table_entry_writes(tenant, previous))

    def _reset_table(self, tenant):
        """The reset table of ``tenant`` (region ``t mod R``), which every tenant not deployed
        has (module docstring)."""
        return self._in_turn([tenant % len(self.regions)])

    def _spec_of(self, record):
        """The chain spec ``record`` was deployed with: the one given in memory, else its
        file read again."""
        spec = self._specs.get(record.tenant)
        if spec is not None and spec.name == record.chain:
            return spec
        try:
            return load_chain(record.source)
        except ChainError as e:
            raise DeployRefused(f"tenant {record.tenant}'s chain specification is needed to "
                                f"configure a region: {e}") from None

    def _failed(self, what, error, tx, undone, gone=""):
        """The one-line :class:`DeployFailed` of an operation whose transaction failed with
        ``error`` and was undone (``tx.undo()``'s problems in ``tx``); ``undone`` says what
        holds when the undo completed, ``gone`` what to do when the device went away."""
        problems = tx.problems
        if isinstance(error, TransportLost) or tx.gone:
            return DeployFailed(f"{what} failed: {error}; the device is gone, so nothing could "
                                f"be rolled back" + (f". {gone}" if gone else ""))
        if problems:
            return DeployFailed(f"{what} failed: {error}; undo incomplete: "
                                f"{'; '.join(problems)}")
        return DeployFailed(f"{what} failed: {error}; {undone}")

    def _admit(self, spec, tenant, instances, weight, share=None, regions=None):
        """Checks before any write; returns ``(regions, record, plan)``. With ``share``, the
        tenant joins the region's running tenants by time sharing: its NTs are configured by
        its context (see :meth:`deploy`), not by the plan. ``regions``: the regions to run
        on (``instances`` is then their number), instead of the control plane's choice."""
        if regions is not None:
            if share is not None:
                raise DeployRefused("give either the regions or the region to share, not both")
            if not isinstance(regions, (list, tuple)) or not regions \
                    or len(set(regions)) != len(regions):
                raise DeployRefused(f"regions must be a list of distinct region numbers, not "
                                    f"{regions!r}")
            for r in regions:
                self._check_region(r)
            instances = len(regions)
        if not isinstance(tenant, int) or isinstance(tenant, bool) \
                or not 0 <= tenant < self.shape.tenants:
            raise DeployRefused(f"tenant must be an integer from 0 to {self.shape.tenants - 1} "
                                f"(nic.tenants), not {tenant!r}")
        if not isinstance(instances, int) or isinstance(instances, bool) or instances < 1:
            raise DeployRefused(f"instances must be a positive integer, not {instances!r}")
        try:
            sched = SchedulerConfig(self.shape.tenants, len(self.regions), self.table_size,
                                    weights=tuple(weight if t == tenant else 1
                                                  for t in range(self.shape.tenants)))
        except (ConfigError, TypeError) as e:
            raise DeployRefused(f"weight: {e}") from None
        parts, pairs = None, []
        if not any(self._personality(r, spec.name) is not None
                   for r in range(len(self.regions))):
            # Not built whole anywhere: split over linked regions, if the design has them.
            parts, pairs = self._split_hosts(spec)
        if pairs and share is not None:
            raise DeployRefused(f"chain {spec.name!r} runs split over linked regions, which "
                                f"cannot be time-shared")
        hosts, built = (([a for a, _ in pairs], None) if pairs else self._check_spec(spec))
        if self.unmanaged:
            raise DeployRefused(
                f"tenants {list(self.unmanaged)} are enabled but not recorded in the state file "
                f"(their flow tables cannot be read back); undeploy them first")
        if tenant in self.deployed:
            r = self.deployed[tenant]
            raise DeployRefused(f"tenant {tenant} is taken: it runs {r.chain} on regions "
                                f"{list(r.regions)}")
        owners = {k: r for r in self.deployed.values() for k in r.keys}
        for key in spec.keys:
            if key in owners:
                raise DeployRefused(f"key {key} of chain {spec.name!r} is claimed by tenant "
                                    f"{owners[key].tenant} ({owners[key].chain})")
        if share is not None:
            usable = [self._shared_region(spec, share, instances)]
        else:
            free = self.free_regions()
            usable = [r for r in hosts if r in free and (not pairs or self.links[r] in free)]
        if share is None and len(usable) < instances:
            taken = {r: rec.tenant for rec in self.deployed.values()
                     for r, _ in rec.placements()}
            held = ", ".join(f"region {r} by tenant {taken[r]}" for r in hosts if r in taken)
            raise DeployRefused(f"not enough free regions for {instances} instance(s) of "
                                f"{spec.name!r}: regions able to host it are {hosts}, free "
                                f"{usable}" + (f" (held: {held})" if held else ""))
        name = parts[0].name if pairs else spec.name
        if regions is not None:
            unfit = [r for r in regions if r not in usable]
            if unfit:
                raise DeployRefused(f"regions {unfit} cannot take {spec.name!r}: the free "
                                    f"regions able to host it are {sorted(usable)}")
            usable = list(regions)
        # Regions where the chain is already active first: no reconfiguration needed.
        usable.sort(key=lambda r: (self.active[r] != self._personality(r, name), r))
        chosen = sorted(usable[:instances])
        branches = tuple(self.links[r] for r in chosen) if pairs else ()
        record = TenantRecord(tenant, spec.name, str(spec.source), tuple(chosen),
                              tuple(spec.keys), weight, self.build_id, branches)

        plan = []
        by_name = {p.name: p for p in parts or ()}
        # A time-sharing tenant's NTs are configured in its own context (TimeShare.add).
        placed = record.placements() if share is None else []
        # Each personality is loaded before its NTs are written: on a partial-reconfiguration
        # board the personality not loaded is not there, and writes to it (strobed table
        # writes among them) would be lost. The region is free, so no packet meets it
        # half-configured: its tenant's table and enable bit come last.
        for r, part in placed:
            index = self._personality(r, part)
            if self.active[r] != index:
                plan.append(Load(r, index, part))
        for r, part in placed:
            plan += [Write(*w) for w in chain_writes(by_name.get(part, spec), r)]
        for a in (chosen if pairs else ()):
            # The pair runs as one once both regions are empty (hw/nic/link.py).
            plan += [Write(f"region{a}", "link", 1), Linked(a, 1)]
        if pairs:
            cost = _fixed_cost(max(self.regions[r][self._personality(r, part)]["cycles_per_beat"]
                                   for r, part in placed))
        else:
            cost = _fixed_cost(built["cycles_per_beat"])
        plan += [Write("scheduler", f"r{r}_cost", cost) for r in chosen]
        if share is not None:       # held before it is enabled: the region runs another
            plan.append(Write("scheduler", "tenant_hold", self.hold_mask | 1 << tenant))
        plan += [Write("scheduler", f"t{tenant}_inv_weight", sched.inv_weight(tenant)),
                 Write("scheduler", f"t{tenant}_quantum", sched.tenant_quantum(tenant))]
        # A tenant not deployed has its reset table (module docstring): the undo puts it back.
        plan.append(self._flow_table(tenant, self._in_turn(chosen), self._reset_table(tenant)))
        after = dict(self.deployed)
        after[tenant] = record
        plan.append(self._classifier(after, dict(self.deployed)))
        managed = sum(1 << t for t in self.deployed)
        plan.append(Write("scheduler", "tenant_enable", managed | 1 << tenant))
        Transaction(self.regs).check(plan)
        return chosen, record, plan

    def _check_region(self, region, what="region"):
        if not isinstance(region, int) or isinstance(region, bool) \
                or not 0 <= region < len(self.regions):
            raise DeployRefused(f"{what} must be an integer from 0 to {len(self.regions) - 1}, "
                                f"not {region!r}")

    def _check_yieldable(self, region, use):
        maps = self.description.get("state_maps") or {}
        if f"region{region}" not in maps:
            raise DeployRefused(
                f"region {region} is not under the state-yielding transform, so {use} "
                f"(nic.yieldable lists regions {sorted(int(b[6:]) for b in maps) or 'none'})")

    def _shared_region(self, spec, region, instances):
        """Checks for a deploy that time-shares ``region``; returns it."""
        self._check_region(region)
        if instances != 1:
            raise DeployRefused("a time-shared tenant runs in one region (instances 1)")
        self._check_yieldable(region, "it cannot be time-shared")
        sharers = self._sharers(region)
        if not sharers:
            raise DeployRefused(f"region {region} runs no tenant: deploy without --share")
        for t in sharers:
            rec = self.deployed[t]
            if rec.chain != spec.name or rec.regions != (region,):
                raise DeployRefused(
                    f"region {region} cannot be time-shared with tenant {t}: it runs "
                    f"{rec.chain!r} on regions {list(rec.regions)}; sharers must run "
                    f"{spec.name!r} in that region only")
        return region

    def _sharers(self, region):
        return sorted(t for t, rec in self.deployed.items() if region in rec.regions)

    def _time_share(self, region):
        """The region's :class:`~supernic.driver.timeshare.TimeShare`, with the contexts the
        state file keeps (none: the one tenant running there is loaded)."""
        from .timeshare import TimeShare
        share = TimeShare(self.bus, self.description, region, self.wait, self.timeout)
        raw = self.shares.get(region)
        if raw is not None:
            return share.load_json(raw)
        sharers = self._sharers(region)
        share.active = sharers[0] if sharers else None
        return share

    async def switch(self, region, tenant):
        """Load ``tenant``'s context in the time-shared ``region``: the tenant running there
        is held and its context saved. Returns the region's :class:`TimeShare`."""
        with self._locked():
            await self.refresh()
            if region not in self.shares:
                raise DeployRefused(f"region {region} is not time-shared (deploy a second "
                                    f"tenant there with --share {region})")
            if tenant not in self._sharers(region):
                raise DeployRefused(f"tenant {tenant} does not share region {region} "
                                    f"(its sharers: {self._sharers(region)})")
            share = self._time_share(region)
            # A switch recovers forwards (switch again): the contexts are kept whatever
            # happened, and a failed one leaves the region stopped with its tenants held.
            tx = Transaction(self.regs, undoable=False)
            try:
                await tx.run([Action(f"region {region}'s switch to tenant {tenant}",
                                     lambda: share.switch(tenant))])
            finally:
                self.shares[region] = share.to_json()
                self._save_records(self.deployed)
            return share

    # --- deploy ---------------------------------------------------------------------------------
    async def deploy(self, spec, tenant, instances=1, weight=1, share=None, regions=None):
        """Deploy the chain of ``spec`` (a spec file, or a
        :class:`~supernic.desc.chain.ChainSpec`) as ``tenant`` on ``instances`` free regions
        with ``weight``; return its :class:`TenantRecord`. Raises :class:`DeployRefused` (or
        :class:`~supernic.desc.chain.ChainError`, or an unsupported design) before any
        write, :class:`DeployFailed` after a rollback.

        ``regions``: the regions to use (all free and able to host the chain) instead of the
        control plane's choice. ``share``: a region whose tenant(s) run the same chain there
        alone; the new tenant time-shares it (:mod:`.timeshare`): it gets a fresh context
        with its own configuration and stays held until :meth:`switch` loads it."""
        if not hasattr(spec, "node_list"):
            spec = load_chain(spec)         # ChainError: a bad spec, before the device
        with self._locked():
            return await self._deploy(spec, tenant, instances, weight, share, regions)

    async def _deploy(self, spec, tenant, instances, weight, share=None, regions=None):
        await self.refresh()
        chosen, record, plan = self._admit(spec, tenant, instances, weight, share, regions)
        old_enable = self.enable_mask
        previous = dict(self.deployed)
        after = {**previous, tenant: record}
        if share is not None:
            plan.append(self._join_share(share, tenant, chain_writes(spec, share)))
        tx = Transaction(self.regs)
        try:
            await tx.run(plan)
            self._save_records(after)
        except Exception as e:  # noqa: BLE001: a bus, transport or file failure: roll back
            await tx.undo()
            raise self._failed(
                f"deploy of {spec.name!r} as tenant {tenant}", e, tx,
                f"rolled back, nothing of tenant {tenant} stays configured",
                gone=f"Once it is back, a device restarted from reset holds nothing of tenant "
                     f"{tenant}; otherwise `snic undeploy --tenant {tenant}` clears what was "
                     f"written") from e
        self.deployed = after
        self._specs[tenant] = spec
        self.enable_mask = (old_enable & sum(1 << t for t in previous)) | 1 << tenant
        return record

    def _join_share(self, region, tenant, writes):
        """The step giving ``tenant`` a fresh context in time-shared ``region``
        (:meth:`~.timeshare.TimeShare.add`). Undone by resuming the region: ``add`` puts the
        running tenant's context back itself, and the transaction's journal the hold bit."""
        from .state import RegionState
        ts = self._time_share(region)
        before = self.shares.get(region)
        if before is None and ts.active is not None:
            # The tenant running there alone was configured by its deploy, not by a context:
            # its configuration writes go into its context too, or a switch back to it would
            # not restore what its state map leaves out (strobed tables, a rate limiter's
            # buckets) and it would run on its sharer's.
            ts.writes[ts.active] = [tuple(w) for w in chain_writes(
                self._spec_of(self.deployed[ts.active]), region)]

        async def add():
            await ts.add(tenant, writes)
            self.shares[region] = ts.to_json()

        async def resume():
            if before is None:
                self.shares.pop(region, None)
            else:
                self.shares[region] = before
            await RegionState(self.bus, self.description, region, self.wait,
                              self.timeout).resume()
        return Action(f"tenant {tenant}'s context in region {region}", add, resume)

    async def undeploy(self, tenant):
        """Remove ``tenant``: its classifier entries go (the table is rewritten without them),
        its queued packets are let through its chain, then it is disabled, its packets in
        flight drain, and its regions are freed (flow table, weight and region costs back to
        their reset values). Returns the removed :class:`TenantRecord` (``None`` for an
        unmanaged tenant). Raises :class:`DeployRefused` for a tenant that is not deployed.

        The queued packets go first because the scheduler never dispatches a disabled
        tenant's queues: disabled first, they would wait there for the next tenant given the
        same id."""
        with self._locked():
            return await self._undeploy(tenant)

    async def _undeploy(self, tenant):
        await self.refresh()
        if not isinstance(tenant, int) or isinstance(tenant, bool) \
                or not 0 <= tenant < self.shape.tenants:
            raise DeployRefused(f"tenant must be an integer from 0 to {self.shape.tenants - 1} "
                                f"(nic.tenants), not {tenant!r}")
        if tenant not in self.deployed and tenant not in self.unmanaged:
            known = sorted(set(self.deployed) | set(self.unmanaged))
            raise DeployRefused(f"tenant {tenant} is not deployed (deployed tenants: "
                                f"{known or 'none'})")
        record = self.deployed.get(tenant)
        remaining = {t: r for t, r in self.deployed.items() if t != tenant}
        shared = [r for r in (record.regions if record else ()) if r in self.shares]
        share = self._time_share(shared[0]) if shared else None
        disable = Write("scheduler", "tenant_enable", self.enable_mask & ~(1 << tenant))
        plan = []
        if share is not None:
            # Its context in, so its queued packets leave as the undeploy lets them.
            plan.append(Action(f"tenant {tenant}'s context in", lambda: share.switch(tenant)))
        plan += self._removal(tenant, record, remaining, disable)
        if share is not None:
            async def leave():
                await share.leave(tenant)
                others = [t for t in self._sharers(shared[0]) if t != tenant]
                if len(others) > 1:
                    self.shares[shared[0]] = share.to_json()
                else:
                    self.shares.pop(shared[0], None)
            plan.append(Action(f"tenant {tenant} leaving region {shared[0]}", leave))
        # An undeploy recovers forwards: run again, it finishes what a failure left.
        tx = Transaction(self.regs, undoable=False)
        try:
            await tx.run(plan)
        except Exception as e:  # noqa: BLE001: one clear line, whatever failed
            if disable in tx.completed:
                self.enable_mask &= ~(1 << tenant)
            enabled = "still enabled" if self.enable_mask >> tenant & 1 else "disabled"
            raise ControlError(f"undeploy of tenant {tenant} failed: {e} (the tenant is "
                               f"{enabled}; run undeploy again)") from e
        self.enable_mask &= ~(1 << tenant)
        self._save_records(remaining)
        self.deployed = remaining
        self._specs.pop(tenant, None)
        self.unmanaged = tuple(t for t in self.unmanaged if t != tenant)
        return record

    def _removal(self, tenant, record, remaining, disable):
        """The undeploy's plan (:meth:`undeploy`): the classifier without the tenant, its
        queues emptied through its chain, ``disable``, its packets in flight drained, and its
        table, weight, region costs and links back to their reset values."""
        async def backlog_empty():
            return await self.read("scheduler", f"t{tenant}_backlog_beats") == 0

        async def drained():
            return await self.read("scheduler", f"t{tenant}_in_flight") == 0
        plan = [self._classifier(remaining, self.deployed),
                # A stalled region: disable anyway, the queued packets stay queued.
                Poll(f"tenant {tenant}'s queues to empty", backlog_empty, give_up=True),
                disable,
                Poll(f"tenant {tenant}'s packets in flight to drain", drained),
                self._flow_table(tenant, self._reset_table(tenant), self._reset_table(tenant))]
        for reg in (f"t{tenant}_inv_weight", f"t{tenant}_quantum"):
            plan.append(Write("scheduler", reg, self._reset("scheduler", reg)))
        for r in (record.regions if record else ()):
            plan.append(Write("scheduler", f"r{r}_cost", self._reset("scheduler", f"r{r}_cost")))
        for r in (record.regions if record and record.branches else ()):
            plan += [Write(f"region{r}", "link", 0), Linked(r, 0)]
        return plan

    # --- load-aware flow tables -----------------------------------------------------------------
    def _deployed_record(self, tenant):
        record = self.deployed.get(tenant)
        if record is None:
            raise DeployRefused(f"tenant {tenant!r} is not deployed (deployed tenants: "
                                f"{sorted(self.deployed) or 'none'})")
        return record

    def _check_load_counters(self):
        if ("scheduler", "bucket_beats") not in self.regs:
            raise DeployRefused("this build's scheduler does not count load per flow-table "
                                "entry (scheduler 1.2)")

    async def _entry_counters(self, tenant):
        from .rebalance import read_loads
        return await read_loads(lambda reg: self.read("scheduler", reg),
                                lambda reg, v: self.regs.write("scheduler", reg, v),
                                tenant, self.table_size)

    def flow_table(self, tenant):
        """The flow table in effect for deployed ``tenant`` (one region per entry): the one a
        rebalance committed, or, once a deploy or a migration wrote the entries in turn over
        the record's regions, that one."""
        record = self._deployed_record(tenant)
        regions = list(record.regions)
        if len(record.table) == self.table_size and set(record.table) <= set(regions):
            return list(record.table)
        return [regions[i % len(regions)] for i in range(self.table_size)]

    async def _commit_table(self, record, table):
        """Write and commit ``record``'s tenant's ``table`` (the tenant is held until its
        packets in flight have left, so no flow reorders) and keep it in the record; on a
        failure the table in effect before is committed again."""
        tx = Transaction(self.regs)
        previous = self.flow_table(record.tenant)
        after = dict(self.deployed)
        after[record.tenant] = replace(record, table=tuple(table))
        try:
            await tx.run([self._flow_table(record.tenant, table, previous)])
            self._save_records(after)
        except Exception as e:  # noqa: BLE001: a bus, transport or file failure: undo
            await tx.undo()
            raise self._failed(f"the new flow table of tenant {record.tenant}", e, tx,
                               "its previous table is back") from e
        self.deployed = after

    async def rebalance(self, tenant, measure=None):
        """Spread ``tenant``'s flow-table entries over its instances by the load each carried
        while ``measure()`` ran (an async callable letting traffic flow; default one
        :attr:`wait`), heaviest first (:mod:`.rebalance`); commit the new table (the tenant is
        held until its packets in flight have left, so no flow reorders). Returns ``{"table",
        "beats", "imbalance_in_turn", "imbalance_balanced"}``: the busiest instance's share
        of the measured load over the mean (1.0 is even) with the entries dealt out in turn
        (the deploy's table) and with the new table."""
        from .rebalance import balance, entry_loads, imbalance
        with self._locked():
            await self.refresh()
            record = self._deployed_record(tenant)
            self._check_load_counters()
            before = await self._entry_counters(tenant)
            await (measure or self.wait)()
            after = await self._entry_counters(tenant)
            regions = list(record.regions)
            loads = entry_loads(before, after)
            table = balance(loads, regions)
            current = [regions[i % len(regions)] for i in range(self.table_size)]
            await self._commit_table(record, table)
        return {"table": table, "beats": sum(loads),
                "imbalance_in_turn": imbalance(loads, current, regions),
                "imbalance_balanced": imbalance(loads, table, regions)}

    async def sample(self, tenant, since=None):
        """One period of deployed ``tenant`` for the auto-scaler (:mod:`.autoscale`):
        ``(sample, counters)``. ``counters`` are this call's readings, to pass as ``since``
        next time; ``sample`` is the :class:`~.autoscale.ChainSample` of the period since
        ``since`` (``None`` without it): the beats queued now, the beats dispatched and the
        packets dropped in the period, the regions, and, when the build counts the load of
        each flow-table entry (scheduler 1.2), each entry's beats in the period and
        :meth:`flow_table`."""
        from .autoscale import ChainSample
        from .rebalance import entry_loads
        with self._locked():
            await self.refresh()
            record = self._deployed_record(tenant)
            counters = {
                "dispatched": await self.read("scheduler", f"t{tenant}_dispatched_beats"),
                "drops": await self.read("scheduler", f"t{tenant}_queue_drops"),
                "entries": (await self._entry_counters(tenant)
                            if ("scheduler", "bucket_beats") in self.regs else None)}
            occupancy = await self.read("scheduler", f"t{tenant}_backlog_beats")
        if since is None:
            return None, counters
        wrap = 1 << self.regs.info("scheduler", f"t{tenant}_dispatched_beats")["width"]
        loads = table = None
        if counters["entries"] is not None and since.get("entries") is not None:
            loads, table = entry_loads(since["entries"], counters["entries"]), \
                self.flow_table(tenant)
        return ChainSample(tenant, record.chain, occupancy,
                           (counters["dispatched"] - since["dispatched"]) % wrap,
                           (counters["drops"] - since["drops"]) % wrap, record.regions,
                           loads, table), counters

    async def apply_rebalance(self, decision):
        """Commit the table of the auto-scaler's :class:`~.autoscale.Rebalance` ``decision``
        the way :meth:`rebalance` does (no flow reorders) and keep it in the tenant's record.
        Refused before any write when the decision no longer fits the tenant (another chain,
        a table of another size or naming a region it does not hold: it was decided before
        the tenant changed)."""
        from .autoscale import Rebalance
        if not isinstance(decision, Rebalance):
            raise TypeError(f"Decision must be a Rebalance, not {decision!r}")
        with self._locked():
            await self.refresh()
            record = self._deployed_record(decision.tenant)
            table = list(decision.table)
            if decision.chain != record.chain or len(table) != self.table_size \
                    or not set(table) <= set(record.regions):
                raise DeployRefused(f"the rebalance of tenant {decision.tenant}'s "
                                    f"{decision.chain!r} over regions {sorted(set(table))} "
                                    f"({len(table)} entries) does not fit the tenant: it runs "
                                    f"{record.chain!r} in regions {list(record.regions)} "
                                    f"({self.table_size} entries)")
            await self._commit_table(record, table)
        return table


    # --- migration ------------------------------------------------------------------------------
    async def migrate(self, tenant, source, target):
        """Move ``tenant``'s chain instance from region ``source`` to the free region
        ``target`` with traffic flowing (both under the state-yielding transform): the
        target gets the source's NT configuration (and the personality loaded, if need be),
        then :func:`~supernic.driver.migration.move_instance` moves the flow buckets and the
        state. Returns the move's report; the tenant's record lists ``target`` where it had
        ``source``. Raises :class:`DeployRefused` before any write, :class:`DeployFailed`
        after a failure (the buckets are pointed back at the source, both regions resumed)."""
        with self._locked():
            return await self._migrate(tenant, source, target)

    def _free_host(self, region, chain):
        """The index of ``chain``'s personality in ``region``, which must be free and able to
        host it (:class:`DeployRefused` otherwise)."""
        if region not in self.free_regions():
            owner = next(t for t, rec in self.deployed.items()
                         if region in {r for r, _ in rec.placements()})
            raise DeployRefused(f"region {region} is not free: tenant {owner} uses it "
                                f"(free regions: {self.free_regions()})")
        index = self._personality(region, chain)
        if index is None:
            raise DeployRefused(f"region {region} cannot host {chain!r}; the regions can "
                                f"host: {self._hosts()}")
        return index

    def _check_migration(self, tenant, source, target):
        record = self.deployed.get(tenant)
        if record is None:
            raise DeployRefused(f"tenant {tenant!r} is not deployed (deployed tenants: "
                                f"{sorted(self.deployed) or 'none'})")
        self._check_region(source, "source region")
        self._check_region(target, "target region")
        if source not in record.regions:
            raise DeployRefused(f"tenant {tenant} ({record.chain}) does not run in region "
                                f"{source}; its regions are {list(record.regions)}")
        if record.branches:
            raise DeployRefused(f"tenant {tenant} ({record.chain}) runs split over linked "
                                f"regions {list(record.regions)} and {list(record.branches)}; "
                                f"a split chain cannot migrate")
        index = self._free_host(target, record.chain)
        for r in (source, target):
            self._check_yieldable(r, "its state cannot move")
        return record, index

    async def _migrate(self, tenant, source, target):
        from .migration import configuration_registers, move_instance
        await self.refresh()
        record, index = self._check_migration(tenant, source, target)
        regions = tuple(target if r == source else r for r in record.regions)
        spec = self._spec_of(record)
        # The personality loads first (writes to its NTs land in the one that runs); then the
        # chain's configuration writes, which also write the tables strobed into the NTs (the
        # configuration a boundary state map leaves out); then the source's read-write
        # registers as they read now.
        plan = [Load(target, index, record.chain)] if self.active[target] != index else []
        plan += [Write(*w) for w in chain_writes(spec, target)]
        for (block, reg) in configuration_registers(self.description, source, record.chain):
            plan.append(Write(block.replace(f"r{source}_", f"r{target}_", 1), reg,
                              await self.read(block, reg)))
        plan.append(Write("scheduler", f"r{target}_cost",
                          await self.read("scheduler", f"r{source}_cost")))
        tx = Transaction(self.regs)
        moved = {}

        async def repoint():        # in the same transaction: undone by pointing back
            await tx.run([self._flow_table(tenant, self._in_turn(regions),
                                           self.flow_table(tenant))])

        async def move():
            moved["report"] = await move_instance(self.bus, self.description, source, target,
                                                  repoint, wait=self.wait,
                                                  timeout=self.timeout)
        # move_instance resumes both regions itself when it fails.
        plan.append(Action(f"the state of region {source} to region {target}", move))
        try:
            await tx.run(plan)
        except Exception as e:  # noqa: BLE001: a bus, transport or state failure: undo
            await tx.undo()
            raise self._failed(f"migration of tenant {tenant} from region {source} to "
                               f"{target}", e, tx, f"the tenant runs in regions "
                               f"{list(record.regions)} as before") from e
        report = moved["report"]
        try:
            await self.regs.write("scheduler", f"r{source}_cost",
                                  self._reset("scheduler", f"r{source}_cost"))
        except Exception as e:  # noqa: BLE001: the move is done; a deploy there sets the cost
            report.setdefault("warnings", []).append(f"region {source}'s cost: {e}")
        after = dict(self.deployed)
        # The move wrote the entries in turn over the new regions (repoint above).
        after[tenant] = replace(record, regions=regions, table=())
        self._save_records(after)
        self.deployed = after
        return report

    # --- scaling --------------------------------------------------------------------------------
    async def scale_out(self, tenant, region):
        """Give deployed ``tenant`` one more instance of its chain in the free ``region``
        (the auto-scaler's :class:`~.autoscale.ScaleOut`): the personality loaded if need be,
        its NTs configured, the region's cost, then the tenant's flow table dealt out in turn
        over all its regions and committed (no flow reorders). Returns the new record.
        Raises :class:`DeployRefused` before any write, :class:`DeployFailed` after the
        undo."""
        with self._locked():
            await self.refresh()
            record = self._deployed_record(tenant)
            self._check_region(region)
            if record.branches:
                raise DeployRefused(f"tenant {tenant} ({record.chain}) runs split over linked "
                                    f"regions; a split chain does not scale by one region")
            if region in record.regions:
                raise DeployRefused(f"tenant {tenant} already runs in region {region}")
            index = self._free_host(region, record.chain)
            spec = self._spec_of(record)
            regions = tuple(record.regions) + (region,)
            plan = [Load(region, index, record.chain)] if self.active[region] != index else []
            plan += [Write(*w) for w in chain_writes(spec, region)]
            plan.append(Write("scheduler", f"r{region}_cost", _fixed_cost(
                self.regions[region][index]["cycles_per_beat"])))
            plan.append(self._flow_table(tenant, self._in_turn(regions),
                                         self.flow_table(tenant)))
            return await self._change_regions(record, regions, plan,
                                              f"scale-out of tenant {tenant} to region {region}")

    async def scale_in(self, tenant, region):
        """Take ``region`` from deployed ``tenant`` (the auto-scaler's
        :class:`~.autoscale.ScaleIn`): its flow table dealt out in turn over the other
        regions and committed (the scheduler holds the tenant until its packets in flight
        have left, so the region is empty of them and no flow reorders), then the region's
        cost back to reset. The region is free; its personality stays loaded. Returns the new
        record."""
        with self._locked():
            await self.refresh()
            record = self._deployed_record(tenant)
            if region not in record.regions:
                raise DeployRefused(f"tenant {tenant} ({record.chain}) does not run in region "
                                    f"{region}; its regions are {list(record.regions)}")
            if len(record.regions) < 2:
                raise DeployRefused(f"region {region} is tenant {tenant}'s only instance: "
                                    f"undeploy the tenant instead")
            if record.branches:
                raise DeployRefused(f"tenant {tenant} ({record.chain}) runs split over linked "
                                    f"regions; a split chain does not scale by one region")
            regions = tuple(r for r in record.regions if r != region)
            plan = [self._flow_table(tenant, self._in_turn(regions), self.flow_table(tenant)),
                    Write("scheduler", f"r{region}_cost",
                          self._reset("scheduler", f"r{region}_cost"))]
            return await self._change_regions(record, regions, plan,
                                              f"scale-in of tenant {tenant} from region "
                                              f"{region}")

    async def _change_regions(self, record, regions, plan, what):
        Transaction(self.regs).check(plan)
        tx = Transaction(self.regs)
        new = replace(record, regions=regions, table=())
        after = {**self.deployed, record.tenant: new}
        try:
            await tx.run(plan)
            self._save_records(after)
        except Exception as e:  # noqa: BLE001: a bus, transport or file failure: undo
            await tx.undo()
            raise self._failed(what, e, tx, f"the tenant runs in regions "
                               f"{list(record.regions)} as before") from e
        self.deployed = after
        return new


def chain_writes(spec, region):
    """``[(block, register, value)]`` configuring ``spec``'s NTs in ``region``."""
    out = []
    for node in spec.node_list():
        block = personality_block_name(region, spec.name, node.name)
        try:
            writes = node.config.register_writes(node.params)
        except (ConfigError, ValueError) as e:
            raise DeployRefused(f"node {node.name!r}: {e}") from None
        out += [(block, reg, value) for reg, value in writes]
    return out


def _fixed_cost(cycles_per_beat):
    """A region cost register value: cycles a beat occupies the region, 8.8 fixed point."""
    try:
        return SchedulerConfig(1, 1, 1, region_costs=(cycles_per_beat,)).cost(0)
    except ConfigError as e:
        raise DeployRefused(f"region cost: {e}") from None

