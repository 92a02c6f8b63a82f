"""The control plane (`supernic.driver.control`) and `snic deploy` / `snic undeploy`.

No simulator: a register file model of a real NIC register map (tests/data/nic_test.toml, and
a smaller NIC for the fault sweep) sits behind a register bus that also plays the hardware's
part in the handshakes the control plane polls (a region load completes after a few reads of
the region, a table commit after a few reads of ``commit_pending``; nothing is in flight) and
keeps what the registers cannot show: the scheduler's shadow and active flow tables and the
classifiers' slots. Checks: a deploy programs exactly the expected registers; two tenants
deploy; refusals (bad spec, foreign chain, unknown tenant, oversubscription, duplicate key,
unsupported design) leave the whole image unchanged; a bus error at every write position of a
deploy, and a load timeout, leave no trace of the tenant; undeploy then redeploy works; state
survives a new control plane; the CLI over a real device server on a fake device.
"""

import asyncio
import copy
import json
import shutil
import tempfile
from pathlib import Path

import pytest

from supernic.driver.cli import main as snic
from supernic.driver.control import (ControlError, ControlPlane, ControlTimeout, DeployFailed,
                                     DeployRefused)
from supernic.driver.discovery import UnsupportedDesignError
from supernic.driver.server import DeviceServer, serving_in_thread
from supernic.driver.state import register_of_port
from supernic.driver.transport import RegisterBus, Response
from supernic.desc.chain import ChainError, load_chain, split_chain
from supernic.desc.config import DesignConfig, load_config
from supernic.hw.generate import design_description
from supernic.hw.nic.classifier import entry_layout
from supernic.desc.nic.classifier import ClassifierEntry
from supernic.desc.nic.shape import NicShape
from supernic.desc.nic.region import personality_block_name
from supernic.desc.statemap import StateMap
from supernic.sim.csr_model import RegisterFileModel

ROOT = Path(__file__).resolve().parents[1]
CHAINS = ROOT / "chains"
NIC_TOML = ROOT / "tests" / "data" / "nic_test.toml"
LINK_TOML = ROOT / "tests" / "data" / "nic_link.toml"
#: A small NIC for the fault sweep: few classifier slots and table entries keep the deploy
#: short enough to fail it at every write.
SMALL_NIC = DesignConfig(name="small_nic", data_width=64, tenants=2, ports=2,
                         regions=(("metered",), ("web", "secure")), classifier_entries=4,
                         table_size=4)


class FakeNic(RegisterBus):
    """A NIC register file plus what the hardware does behind it (see the module docstring).

    ``fail_at``: the write number (1-based, counted over the bus's life) answered SLVERR;
    ``load_reads``: reads of a loading region before it comes back online (``None``: never).
    """

    def __init__(self, description, load_reads=3, commit_reads=2):
        self.description = description
        self.model = RegisterFileModel(description["registers"])
        cfg = description["config"]
        self.shape = NicShape.from_description(description)
        m, sh = self.model, self.shape
        m.set_input("id", "build_id", description["build_id"])
        m.set_input("id", "design_version", 0x0001_0000)
        m.set_input("id", "data_width", cfg["data_width"])
        for r, personalities in enumerate(description["regions"]):
            m.set_input(f"region{r}", "personalities", len(personalities))
            m.set_input(f"region{r}", "online", 1)
        self.tables = [[t % sh.regions] * cfg["table_size"] for t in range(sh.tenants)]
        self.shadows = copy.deepcopy(self.tables)
        empty = {name: 0 for name in entry_layout(sh).members}
        self.slots = [[dict(empty) for _ in range(cfg["classifier_entries"])]
                      for _ in range(sh.ports)]
        self.load_reads, self.commit_reads = load_reads, commit_reads
        self.loading = {}      # region -> [reads left, target]
        self.committing = {}   # tenant -> reads left
        self.writes = 0
        self.fail_at = None
        self.loads = {}        # tenant x table_size + entry -> beats dispatched through it
        self.log = []          # (block, register, word part, value) of every write
        # Writes that reached a personality's NT block while it was not loaded in its region
        # (another one active, or its region reconfiguring): on a partial-reconfiguration
        # board that personality is not there and they are lost.
        self.unloaded_writes = []
        self.personality_of = {f"r{r}_{p['name']}_": (r, i)
                               for r, chains in enumerate(description["regions"])
                               for i, p in enumerate(chains)}
        self.overrides = {}    # address -> value read instead of the model's
        # The state port of every (region, personality) under the transform: distinct words
        # per region, so a migration shows where the state came from.
        self.states = {}
        self.shown = {}         # (NT block, register) -> ((region, chain), state item)
        self.order = {}         # (region, chain) -> the addresses, in the order the port moves
        self.cursor = {}        # region block -> the state port's address
        for block, chains in description.get("state_maps", {}).items():
            r = int(block[6:])
            for chain, raw in chains.items():
                smap = StateMap.from_json(raw)
                self.order[(r, chain)] = smap.addresses()
                self.states[(r, chain)] = {a: (7919 * (a + 1) * (r + 1)) & 0xFFFF_FFFF
                                           for a in self.order[(r, chain)]}
                # A counter the state port does not read shows in its NT's register
                # (hw/transform/inventory.py, find_counters): here, the port's words for it.
                for item in smap.shown():
                    node, reg = register_of_port(item.port)
                    self.shown[(personality_block_name(r, chain, node), reg)] = \
                        ((r, chain), item)

    def image(self):
        return copy.deepcopy((self.model.values, self.tables, self.shadows, self.slots))

    # --- the bus -------------------------------------------------------------------------------
    def read(self, address):
        if address in self.overrides:
            return self.overrides[address], Response.OKAY
        word = self.model.words.get(address & ~3)
        if word is not None and word.block.startswith("region") and word.register in (
                "online", "active"):
            self._step_load(int(word.block[6:]))
        if word is not None and (word.block, word.register) == ("scheduler", "commit_pending"):
            self._step_commits()
        if word is not None and (word.block, word.register) == ("scheduler", "bucket_beats"):
            self.model.set_input("scheduler", "bucket_beats", self.loads.get(
                self.model.get("scheduler", "bucket_select"), 0) % (1 << 32))
        if word is not None and (word.block, word.register) in self.shown:
            key, item = self.shown[(word.block, word.register)]
            self.model.set_input(word.block, word.register, sum(
                self.states[key][item.addr + w] << (32 * w) for w in range(item.words)))
        if word is not None and word.register == "state_rdata":
            self.model.set_input(word.block, "state_rdata",
                                 self._state(word.block)[self.cursor.get(word.block, 0)])
            out = self.model.read(address)
            self._advance(word.block)
            return out
        return self.model.read(address)

    def write(self, address, value, strobe=0b1111):
        self.writes += 1
        if self.writes == self.fail_at:
            return Response.SLVERR
        pulses = len(self.model.pulses)
        response = self.model.write(address, value, strobe)
        word = self.model.words.get(address & ~3)
        if word is not None and word.access is not None:
            self.log.append((word.block, word.register, word.part, value))
            for prefix, (r, index) in self.personality_of.items():
                if word.block.startswith(prefix) and (
                        r in self.loading or self.model.get(f"region{r}", "active") != index):
                    self.unloaded_writes.append((word.block, word.register))
        for block, reg, bits in self.model.pulses[pulses:]:
            self._pulse(block, reg, bits)
        if word is not None and word.register == "state_stop" and response == Response.OKAY:
            self.model.set_input(word.block, "state_stopped", value & 1)
        if word is not None and word.register == "link" and response == Response.OKAY:
            # Nothing is in flight here: a link request takes effect at once.
            self.model.set_input(word.block, "linked", value & 1)
        return response

    async def read_word(self, address):
        return self.read(address)

    async def write_word(self, address, value, strobe=0b1111):
        return self.write(address, value, strobe)

    # --- the hardware's side ------------------------------------------------------------------
    def _pulse(self, block, reg, bits):
        get = self.model.get
        if (block, reg) == ("scheduler", "table_write"):
            t, i = get("scheduler", "table_tenant"), get("scheduler", "table_index")
            self.shadows[t][i] = get("scheduler", "table_region")
        elif (block, reg) == ("scheduler", "table_commit"):
            for t in range(self.shape.tenants):
                if bits >> t & 1:
                    self.committing[t] = self.commit_reads
            self._show_pending()
        elif block.startswith("classifier") and reg == "entry_write":
            port = int(block[10:])
            self.slots[port][get(block, "entry_index")] = {
                name: get(block, f"entry_{name}") for name in self.slots[port][0]}
        elif block.startswith("region") and reg == "state_addr_stb":
            self.cursor[block] = get(block, "state_addr")
        elif block.startswith("region") and reg == "state_wdata_stb":
            self._state(block)[self.cursor.get(block, 0)] = get(block, "state_wdata")
            self._advance(block)
        elif block.startswith("region") and reg == "load":
            r = int(block[6:])
            self.model.set_input(block, "online", 0)
            self.loading[r] = [self.load_reads, get(block, "load_index")]

    def _key(self, block):
        r = int(block[6:])
        return r, self.description["regions"][r][self.model.get(block, "state_select")]["name"]

    def _state(self, block):
        return self.states[self._key(block)]

    def _advance(self, block):
        """The port moves on in the map's address order, as the hardware's does."""
        order = self.order[self._key(block)]
        here = self.cursor.get(block, 0)
        self.cursor[block] = order[(order.index(here) + 1) % len(order)]

    def _step_load(self, r):
        if r not in self.loading or self.loading[r][0] is None:
            return
        self.loading[r][0] -= 1
        if self.loading[r][0] <= 0:
            _, target = self.loading.pop(r)
            block = f"region{r}"
            if target < len(self.description["regions"][r]):
                self.model.set_input(block, "active", target)
            self.model.set_input(block, "online", 1)
            self.model.set_input(block, "loads", self.model.get(block, "loads") + 1)

    def _step_commits(self):
        for t in list(self.committing):
            self.committing[t] -= 1
            if self.committing[t] <= 0:
                del self.committing[t]
                self.tables[t] = list(self.shadows[t])
        self._show_pending()

    def _show_pending(self):
        self.model.set_input("scheduler", "commit_pending",
                             sum(1 << t for t in self.committing))


class FakeDevice:
    """What the device server needs of a device, over a :class:`FakeNic`."""

    def __init__(self, nic):
        self.nic = nic
        self.data_width = nic.description["config"]["data_width"]
        self.port_count = nic.shape.ports
        self.cycle = 0

    def access(self, write, address, value=0, strobe=0b1111):
        self.cycle += 4
        if write:
            return 0, self.nic.write(address, value, strobe)
        return self.nic.read(address)

    def run(self, cycles):
        self.cycle += cycles

    def queued(self, port):
        return 0            # no traffic: the control plane only touches registers

    def delivered_waiting(self):
        return 0


@pytest.fixture(scope="module")
def nic_description():
    return design_description(load_config(NIC_TOML))


@pytest.fixture(scope="module")
def small_description():
    return design_description(SMALL_NIC)


def _run(coroutine):
    return asyncio.run(coroutine)


def _expected_slots(nic, tenants):
    """Classifier slots for ``[(tenant, keys), ...]``, as the hardware holds them."""
    empty = {name: 0 for name in entry_layout(nic.shape).members}
    entries = [ClassifierEntry(t, k).words(nic.shape) for t, keys in tenants for k in keys]
    size = len(nic.slots[0])
    return [entries + [dict(empty) for _ in range(size - len(entries))]
            for _ in range(nic.shape.ports)]


def _nt_writes(nic, region, spec):
    """The word writes that configure ``spec``'s NTs in ``region``, in order."""
    regs = {(b["name"], r["name"]): r for b in nic.description["registers"]["blocks"]
            for r in b["registers"]}
    out = []
    for node in spec.node_list():
        block = f"r{region}_{spec.name}_{node.name}"
        for reg, value in node.config.register_writes(node.params):
            for part in range(regs[(block, reg)]["words"]):
                out.append((block, reg, part, value >> (32 * part) & 0xFFFF_FFFF))
    return out


def test_deploy_programs_the_expected_registers(nic_description, tmp_path):
    nic = FakeNic(nic_description)
    plane = ControlPlane(nic, nic_description, tmp_path / "state.json")
    web, secure = load_chain(CHAINS / "web.toml"), load_chain(CHAINS / "secure.toml")
    assert _run(plane.refresh()) == {} and plane.fresh          # reset: all enabled, inert

    record = _run(plane.deploy(CHAINS / "web.toml", tenant=0))
    assert record.regions == (0,) and record.keys == (100,)
    get = nic.model.get
    assert get("scheduler", "tenant_enable") == 0b0001     # the reset defaults are cleared
    assert nic.tables[0] == [0] * 16
    assert nic.slots == _expected_slots(nic, [(0, [100])])
    assert [w for w in nic.log if w[0].startswith("r0_web_")] == _nt_writes(nic, 0, web)
    assert not any(w[0].startswith(("r1_", "r2_", "r3_", "r4_", "r5_")) for w in nic.log)
    assert get("scheduler", "r0_cost") == 0x100 and get("scheduler", "t0_inv_weight") == 0x100
    assert not nic.model.pulses or all(p[1] != "load" for p in nic.model.pulses)
    # The enable bit is the last write, after the classifier and the table commit.
    assert nic.log[-1] == ("scheduler", "tenant_enable", 0, 0b0001)

    # A second tenant: two instances of secure, region 1 must first load its personality.
    nic.log.clear()
    record = _run(plane.deploy(CHAINS / "secure.toml", tenant=1, instances=2, weight=2))
    assert record.regions == (1, 2)
    assert get("region1", "active") == 1 and get("region1", "loads") == 1
    assert ("region1", "load", 1) in nic.model.pulses
    assert get("scheduler", "tenant_enable") == 0b0011
    assert nic.tables[0] == [0] * 16 and nic.tables[1] == [1, 2] * 8
    assert nic.slots == _expected_slots(nic, [(0, [100]), (1, [30])])
    assert [w for w in nic.log if w[0].startswith("r1_secure_")] == _nt_writes(nic, 1, secure)
    assert [w for w in nic.log if w[0].startswith("r2_secure_")] == _nt_writes(nic, 2, secure)
    assert get("scheduler", "t1_inv_weight") == 0x80 and get("scheduler", "t1_quantum") == 4096
    blocks = [w[0] for w in nic.log]
    # The load, then NT configs (each to the personality that runs), then scheduler,
    # classifiers, enable last.
    assert blocks.index("region1") < min(i for i, b in enumerate(blocks) if b.startswith("r1_"))
    assert nic.unloaded_writes == []
    assert blocks.index("classifier0") > max(i for i, b in enumerate(blocks)
                                             if b.startswith(("r1_", "r2_")))
    assert nic.log[-1] == ("scheduler", "tenant_enable", 0, 0b0011)

    # A new control plane (another CLI invocation) sees the same truth.
    again = ControlPlane(nic, nic_description, tmp_path / "state.json")
    assert set(_run(again.refresh())) == {0, 1} and again.unmanaged == ()
    assert again.free_regions() == [3, 4, 5]
    # Without the state file the enabled tenants are unmanaged: deploys are refused.
    blind = ControlPlane(nic, nic_description, tmp_path / "other.json")
    before = nic.image()
    with pytest.raises(DeployRefused, match=r"tenants \[0, 1\] are enabled but not recorded"):
        _run(blind.deploy(CHAINS / "metered.toml", tenant=2))
    assert nic.image() == before
    # An unmanaged tenant can be undeployed (disabled, its table reset) without a record.
    assert _run(blind.undeploy(1)) is None
    assert nic.model.get("scheduler", "tenant_enable") == 0b0001 and nic.tables[1] == [1] * 16


def _refused(nic, plane, call, error, match):
    before = nic.image()
    pulses = len(nic.model.pulses)
    with pytest.raises(error, match=match):
        _run(call(plane))
    assert nic.image() == before and len(nic.model.pulses) == pulses


def test_refusals_leave_the_image_unchanged(nic_description, tmp_path):
    nic = FakeNic(nic_description)
    plane = ControlPlane(nic, nic_description, tmp_path / "state.json")
    _run(plane.deploy(CHAINS / "web.toml", tenant=0, instances=2))
    bad = tmp_path / "bad.toml"
    bad.write_text("[tenant]\nname = 'web'\n[[nodes]]\nname = 'x'\nnt = 'nonesuch'\n")
    _refused(nic, plane, lambda p: p.deploy(bad, 1), ChainError, "unknown NT 'nonesuch'")
    _refused(nic, plane, lambda p: p.deploy(tmp_path / "missing.toml", 1), ChainError,
             "does not exist")
    _refused(nic, plane, lambda p: p.deploy(ROOT / "tests/chains/acl_dag.toml", 1),
             DeployRefused, r"is not a personality of any region; the regions can host: "
                            r"region 0: web; region 1: web, secure")
    _refused(nic, plane, lambda p: p.deploy(CHAINS / "metered.toml", 4), DeployRefused,
             r"tenant must be an integer from 0 to 3")
    _refused(nic, plane, lambda p: p.deploy(CHAINS / "metered.toml", 0), DeployRefused,
             r"tenant 0 is taken: it runs web on regions \[0, 1\]")
    _refused(nic, plane, lambda p: p.deploy(CHAINS / "secure.toml", 1, instances=2),
             DeployRefused, r"not enough free regions for 2 instance\(s\) of 'secure': regions "
                            r"able to host it are \[1, 2\], free \[2\] \(held: region 1 by "
                            r"tenant 0\)")
    _refused(nic, plane, lambda p: p.deploy(CHAINS / "metered.toml", 1, weight=0),
             DeployRefused, "weight")
    dup = tmp_path / "metered.toml"
    dup.write_text((CHAINS / "metered.toml").read_text().replace("keys = [10, 20]",
                                                                 "keys = [10, 100]"))
    _refused(nic, plane, lambda p: p.deploy(dup, 1), DeployRefused,
             r"key 100 of chain 'metered' is claimed by tenant 0 \(web\)")
    _refused(nic, plane, lambda p: p.undeploy(2), DeployRefused,
             r"tenant 2 is not deployed \(deployed tenants: \[0\]\)")
    # An unsupported major version of a block: discovery refuses it.
    sched = next(b for b in nic_description["registers"]["blocks"] if b["name"] == "scheduler")
    nic.overrides[sched["base"] + 4] = 0x0002_0000
    _refused(nic, ControlPlane(nic, nic_description), lambda p: p.deploy(
        CHAINS / "metered.toml", 1), UnsupportedDesignError, r"block scheduler .* version 2\.0")


def _trace_free(nic, before, tenant):
    """Nothing of ``tenant`` stays configured: the image equals ``before`` but for the regions'
    load status (a personality loaded for the deploy stays loaded)."""
    values, tables, shadows, slots = nic.image()
    old_values, old_tables, old_shadows, old_slots = before
    assert not values[("scheduler", "tenant_enable")] >> tenant & 1
    assert slots == old_slots and tables == old_tables and shadows == old_shadows
    loaded = {(f"region{r}", reg) for r in range(nic.shape.regions)
              for reg in ("active", "loads", "online")}
    assert {k: v for k, v in values.items() if k not in loaded} == \
        {k: v for k, v in old_values.items() if k not in loaded}


def _fault_sweep(description, base, state, tmp_path, chain, tenant):
    """Deploy ``chain`` as ``tenant`` on copies of ``base`` (whose records are in ``state``)
    with a bus error at each of its writes in turn: each fails with one message, leaves no
    trace of the tenant and keeps the state file. Returns ``(clean, nic)``: the deploy done
    without a fault, and the device after the last faulty one."""
    saved = state.read_text()
    clean = copy.deepcopy(base)
    shutil.copy(state, tmp_path / "clean.json")
    _run(ControlPlane(clean, description, tmp_path / "clean.json").deploy(
        CHAINS / f"{chain}.toml", tenant))
    nic = None
    for k in range(1, clean.writes - base.writes + 1):
        nic = copy.deepcopy(base)
        before = nic.image()
        nic.fail_at = nic.writes + k
        with pytest.raises(DeployFailed, match=rf"deploy of '{chain}' as tenant {tenant} "
                                               rf"failed: write at .* SLVERR.*rolled back"):
            _run(ControlPlane(nic, description, state).deploy(CHAINS / f"{chain}.toml",
                                                              tenant))
        _trace_free(nic, before, tenant)
        assert state.read_text() == saved
    return clean, nic


def test_a_fault_at_every_write_leaves_no_trace(small_description, tmp_path):
    """Tenant 1 runs in region 0 and tenant 0 deploys into region 1, so each tenant's flow
    table differs from its reset one (tenant t -> region t mod R): a deploy whose table write
    is not undone leaves a trace the sweep sees."""
    state = tmp_path / "state.json"
    base = FakeNic(small_description)
    _run(ControlPlane(base, small_description, state).deploy(CHAINS / "metered.toml", 1))
    clean, nic = _fault_sweep(small_description, base, state, tmp_path, "secure", 0)
    assert clean.model.get("region1", "active") == 1 and clean.writes - base.writes > 150
    assert clean.tables[0] != base.tables[0]
    # After the last fault the same deploy goes through.
    record = _run(ControlPlane(nic, small_description, state).deploy(CHAINS / "secure.toml", 0))
    assert record.regions == (1,) and nic.model.get("scheduler", "tenant_enable") == 0b11


def test_a_chain_splits_over_a_linked_pair(tmp_path):
    """The monitoring chain is built nowhere whole in the linked NIC, so the deploy splits it
    over the pair (hw/nic/link.py): each part's NTs configured in its region, the link on,
    the flow table over the primary region only. Both regions are taken; migration is
    refused; the record survives a new control plane; undeploy opens the link and frees both
    regions; a fault at any write of the split deploy leaves no trace."""
    description = design_description(load_config(LINK_TOML))
    state = tmp_path / "state.json"
    nic = FakeNic(description)
    plane = ControlPlane(nic, description, state)
    base = copy.deepcopy(nic)
    record = _run(plane.deploy(CHAINS / "monitoring.toml", 0))
    assert record.regions == (0,) and record.branches == (1,)
    primary, branches = split_chain(load_chain(CHAINS / "monitoring.toml"))
    writes = [w for w in nic.log if w[0].startswith("r")]
    want = _nt_writes(nic, 0, primary) + _nt_writes(nic, 1, branches)
    assert [w for w in writes if not w[0].startswith("region")] == want
    get = nic.model.get
    assert get("region0", "link") == 1 and get("region0", "linked") == 1
    assert nic.tables[0] == [0] * 16 and get("scheduler", "tenant_enable") == 0b01
    assert plane.free_regions() == [2]
    assert _run(plane.deploy(CHAINS / "web.toml", 1)).regions == (2,)
    with pytest.raises(DeployRefused, match="runs split over linked regions .* cannot migrate"):
        _run(plane.migrate(0, 0, 1))
    fresh = ControlPlane(nic, description, state)
    assert _run(fresh.refresh())[0].branches == (1,)
    _run(fresh.undeploy(0))
    assert get("region0", "link") == 0 and get("region0", "linked") == 0
    assert fresh.free_regions() == [0, 1]
    # Region 1 is a region of its own again: it loads the web chain for a second instance.
    _run(fresh.undeploy(1))
    assert _run(fresh.deploy(CHAINS / "web.toml", 0, instances=2)).regions == (1, 2)
    assert get("region1", "active") == 1

    # Faults: every write of the split deploy, beside a web tenant.
    state = tmp_path / "faults.json"
    _run(ControlPlane(base, description, state).deploy(CHAINS / "web.toml", 1))
    clean, _ = _fault_sweep(description, base, state, tmp_path, "monitoring", 0)
    assert clean.model.get("region0", "linked") == 1 and clean.writes - base.writes > 80


def test_rebalance_spreads_entries_by_their_load(nic_description):
    """The entries dealt out in turn put the heavy ones on one instance; rebalancing reads
    each entry's beats before and after the traffic (the counters wrap) and commits a table
    that evens the load."""
    nic = FakeNic(nic_description)
    plane = ControlPlane(nic, nic_description)
    _run(plane.deploy(CHAINS / "web.toml", 2, instances=2))
    regions = plane.deployed[2].regions
    size = nic_description["config"]["table_size"]
    load = [900 if i % 2 == 0 else 100 for i in range(size)]
    for i in range(size):
        nic.loads[2 * size + i] = (1 << 32) - 50      # about to wrap

    async def traffic():
        for i in range(size):
            nic.loads[2 * size + i] += load[i]
    report = _run(plane.rebalance(2, traffic))
    assert report["beats"] == sum(load)
    assert report["imbalance_in_turn"] == pytest.approx(1.8)
    assert report["imbalance_balanced"] == pytest.approx(1.0)
    assert nic.tables[2] == report["table"] and set(report["table"]) == set(regions)
    assert nic.model.get("scheduler", "commit_pending") == 0
    with pytest.raises(DeployRefused, match="tenant 3 is not deployed"):
        _run(plane.rebalance(3))


def test_a_load_that_never_completes_times_out_and_rolls_back(small_description):
    nic = FakeNic(small_description, load_reads=10 ** 9)
    plane = ControlPlane(nic, small_description, timeout=0.05)
    _run(plane.deploy(CHAINS / "metered.toml", 0))
    before = nic.image()
    with pytest.raises(DeployFailed, match=r"timed out after 0.05 s waiting for region 1 to "
                                           r"load personality 1 \(secure\).*rolled back") as e:
        _run(plane.deploy(CHAINS / "secure.toml", 1))
    assert isinstance(e.value.__cause__, ControlTimeout)
    _trace_free(nic, before, 1)


def test_undeploy_then_redeploy(nic_description, tmp_path):
    nic = FakeNic(nic_description)
    plane = ControlPlane(nic, nic_description, tmp_path / "state.json")
    _run(plane.deploy(CHAINS / "web.toml", 0, instances=2, weight=4))
    _run(plane.deploy(CHAINS / "metered.toml", 1))
    record = _run(plane.undeploy(0))
    assert record.chain == "web" and record.regions == (0, 1)
    get = nic.model.get
    assert get("scheduler", "tenant_enable") == 0b0010
    assert nic.slots == _expected_slots(nic, [(1, [10, 20])])
    assert nic.tables[0] == [0] * 16                             # back to the reset table
    assert get("scheduler", "t0_inv_weight") == 0x100 and get("scheduler", "t0_quantum") == 2048
    # The classifier forgets the tenant before the disable (its queued packets go through
    # its chain first); the reset table follows.
    disable = nic.log.index(("scheduler", "tenant_enable", 0, 0b0010))
    last_entry = max(i for i, w in enumerate(nic.log) if w[0] == "classifier1")
    first_reset = max(i for i, w in enumerate(nic.log) if w[:2] == ("scheduler", "table_commit"))
    assert last_entry < disable < first_reset
    fresh = ControlPlane(nic, nic_description, tmp_path / "state.json")
    assert set(_run(fresh.refresh())) == {1} and fresh.free_regions() == [0, 1, 2, 4, 5]
    with pytest.raises(DeployRefused, match="tenant 0 is not deployed"):
        _run(fresh.undeploy(0))
    # The freed regions and the freed id take a tenant again, in another order.
    assert _run(fresh.deploy(CHAINS / "web.toml", 3, instances=2)).regions == (0, 1)
    assert _run(fresh.deploy(CHAINS / "secure.toml", 0)).regions == (2,)
    assert get("scheduler", "tenant_enable") == 0b1011
    assert nic.tables[3] == [0, 1] * 8 and nic.tables[0] == [2] * 16
    assert nic.slots == _expected_slots(nic, [(0, [30]), (1, [10, 20]), (3, [100])])


def test_undeploy_that_cannot_drain_says_so(nic_description):
    nic = FakeNic(nic_description)
    plane = ControlPlane(nic, nic_description, timeout=0.05)
    _run(plane.deploy(CHAINS / "web.toml", 0))
    nic.model.set_input("scheduler", "t0_in_flight", 3)     # a region that never gives back
    with pytest.raises(ControlError, match=r"undeploy of tenant 0 failed: timed out after "
                                           r"0.05 s waiting for tenant 0's packets in flight "
                                           r"to drain \(the tenant is disabled; run undeploy "
                                           r"again\)"):
        _run(plane.undeploy(0))
    assert nic.model.get("scheduler", "tenant_enable") == 0


def test_migrate_moves_buckets_configuration_and_state(nic_description, tmp_path):
    """``migrate`` (sw/driver/migration.py): the target gets the source's NT configuration and
    cost, the tenant's buckets point at it, and the source's state words are in the target;
    both regions run afterwards. The sequence under traffic is tested on the NIC in
    tests/test_nic.py."""
    nic = FakeNic(nic_description)
    plane = ControlPlane(nic, nic_description, tmp_path / "state.json")
    get = nic.model.get
    assert _run(plane.deploy(CHAINS / "metered.toml", tenant=2)).regions == (3,)
    _run(plane.deploy(CHAINS / "web.toml", tenant=0))
    source_state = dict(nic.states[(3, "metered")])
    assert nic.states[(5, "metered")] != source_state
    # A run-time change of the source's configuration moves too.
    rl = next(b["name"] for b in nic_description["registers"]["blocks"]
              if b["name"].startswith("r3_metered_") and any(
                  r["access"] == "RW" for r in b["registers"]))
    reg = next(r for r in next(b for b in nic_description["registers"]["blocks"]
                               if b["name"] == rl)["registers"] if r["access"] == "RW")
    _run(plane.regs.write(rl, reg["name"], 1))
    cost = get("scheduler", "r3_cost")

    report = _run(plane.migrate(2, 3, 5))
    assert report["personality"] == "metered" and report["words"] == len(source_state)
    assert nic.states[(5, "metered")] == source_state
    assert nic.tables[2] == [5] * 16 and nic.tables[0] == [0] * 16
    assert get(rl.replace("r3_", "r5_", 1), reg["name"]) == 1
    assert get("scheduler", "r5_cost") == cost and get("scheduler", "r3_cost") == 0x100
    assert get("region3", "state_stop") == 0 and get("region5", "state_stop") == 0
    # The record follows: a new control plane sees the tenant in region 5, region 3 free.
    again = ControlPlane(nic, nic_description, tmp_path / "state.json")
    assert _run(again.refresh())[2].regions == (5,) and 3 in again.free_regions()

    refusals = [
        (lambda p: p.migrate(1, 5, 3), r"tenant 1 is not deployed"),
        (lambda p: p.migrate(2, 3, 5), r"tenant 2 \(metered\) does not run in region 3; its "
                                       r"regions are \[5\]"),
        (lambda p: p.migrate(2, 5, 0), r"region 0 is not free: tenant 0 uses it"),
        (lambda p: p.migrate(2, 5, 4), r"region 4 cannot host 'metered'"),
        (lambda p: p.migrate(2, 5, 9), r"target region must be an integer from 0 to 5"),
        (lambda p: p.migrate(0, 0, 1), r"region 0 is not under the state-yielding transform"),
    ]
    for call, match in refusals:
        states = copy.deepcopy(nic.states)
        _refused(nic, plane, call, DeployRefused, match)
        assert nic.states == states

    # A bus error at every write of a migration back up to the state transfer, then at every
    # 97th (the transfer is a few thousand alike writes): the buckets point at the source
    # again, both regions run, the record is unchanged.
    trial = copy.deepcopy(nic)
    start = trial.writes
    shutil.copy(tmp_path / "state.json", tmp_path / "trial.json")
    _run(ControlPlane(trial, nic_description, tmp_path / "trial.json").migrate(2, 5, 3))
    blocks = [w[:2] for w in trial.log[-(trial.writes - start):]]
    transfer = blocks.index(("region5", "state_addr")) + 1
    total = trial.writes - start
    for k in [*range(1, transfer + 1), *range(transfer + 97, total - 2, 97)]:
        faulty = copy.deepcopy(nic)
        shutil.copy(tmp_path / "state.json", tmp_path / "trial.json")
        faulty.fail_at = faulty.writes + k
        plane = ControlPlane(faulty, nic_description, tmp_path / "trial.json")
        with pytest.raises(DeployFailed, match=r"migration of tenant 2 from region 5 to 3 "
                                               r"failed: .*runs in regions \[5\] as before"):
            _run(plane.migrate(2, 5, 3))
        assert faulty.tables[2] == [5] * 16, k
        assert faulty.model.get("region3", "state_stop") == 0, k
        assert faulty.model.get("region5", "state_stop") == 0, k
        assert _run(plane.refresh())[2].regions == (5,)
    # Once the target runs, the move stands: a failure to resume the source (the last write
    # but one) is a warning.
    faulty = copy.deepcopy(nic)
    faulty.fail_at = faulty.writes + total - 1
    report = _run(ControlPlane(faulty, nic_description, tmp_path / "state.json").migrate(2, 5, 3))
    assert "region 5 stays stopped" in report["warnings"][0]
    assert faulty.tables[2] == [3] * 16 and faulty.model.get("region5", "state_stop") == 1


METERED_B = """
[tenant]
name = "metered"
keys = [3003]
[[nodes]]
name = "policer"
nt = "rate_limiter"
[nodes.config]
buckets = [{ rate = 0.25, burst = 2000, action = "drop" }]
classes = [{ vlan = 3003, bucket = 0 }]
unmatched = 0
[[nodes]]
name = "untag"
nt = "vlan_pop"
"""


def _rw_config(nic, region, spec):
    """The read-write NT registers ``spec`` configures in ``region``, with their values."""
    rw = {(b["name"], r["name"]) for b in nic.description["registers"]["blocks"]
          for r in b["registers"] if r["access"] == "RW"}
    return {(f"r{region}_{spec.name}_{node.name}", reg): value for node in spec.node_list()
            for reg, value in node.config.register_writes(node.params)
            if (f"r{region}_{spec.name}_{node.name}", reg) in rw}


def test_time_share_a_region_between_two_tenants(nic_description, tmp_path):
    """``deploy(..., share=R)`` and ``switch`` (sw/driver/timeshare.py): the second tenant is
    held, gets a fresh context (reset state and its configuration) while the first runs on
    with its own; switches save one context and load the other, through another control
    plane (the state file keeps the contexts); undeploying the running one loads the other."""
    nic = FakeNic(nic_description)
    state = tmp_path / "state.json"
    plane = ControlPlane(nic, nic_description, state)
    get = nic.model.get
    first = load_chain(CHAINS / "metered.toml")
    (tmp_path / "metered_b.toml").write_text(METERED_B)
    second = load_chain(tmp_path / "metered_b.toml")
    assert _run(plane.deploy(CHAINS / "metered.toml", tenant=2)).regions == (3,)
    words_2 = dict(nic.states[(3, "metered")])
    smap = StateMap.from_json(nic_description["state_maps"]["region3"]["metered"])
    fresh = dict(zip(smap.addresses(), smap.reset_words()))

    def loaded(spec, words):
        assert nic.states[(3, "metered")] == words
        assert {k: get(*k) for k in _rw_config(nic, 3, spec)} == _rw_config(nic, 3, spec)

    assert _run(plane.deploy(tmp_path / "metered_b.toml", tenant=3, share=3)).regions == (3,)
    assert get("scheduler", "tenant_hold") == 1 << 3
    assert get("scheduler", "tenant_enable") == 1 << 2 | 1 << 3
    assert nic.tables[3] == [3] * 16
    loaded(first, words_2)                      # tenant 2 runs on, as it was

    again = ControlPlane(nic, nic_description, state)      # another CLI invocation
    _run(again.switch(3, 3))
    assert get("scheduler", "tenant_hold") == 1 << 2
    loaded(second, fresh)                       # a fake NT does not run: still the reset state
    nic.log.clear()
    _run(ControlPlane(nic, nic_description, state).switch(3, 2))
    assert get("scheduler", "tenant_hold") == 1 << 3
    loaded(first, words_2)
    # Its configuration writes came back first, the strobed ones too (what the state map
    # leaves out), though its deploy, not a context, had configured it.
    assert [w for w in nic.log if w[0].startswith("r3_metered_")][:len(_nt_writes(
        nic, 3, first))] == _nt_writes(nic, 3, first)

    _run(plane.deploy(CHAINS / "web.toml", tenant=0))
    third = tmp_path / "metered_c.toml"
    third.write_text(METERED_B.replace("3003", "3004"))
    refusals = [
        (lambda p: p.deploy(third, 1, share=0), DeployRefused,
         r"region 0 is not under the state-yielding transform"),
        (lambda p: p.deploy(third, 1, share=5), DeployRefused,
         r"region 5 runs no tenant: deploy without --share"),
        (lambda p: p.deploy(third, 1, instances=2, share=3),
         DeployRefused, r"a time-shared tenant runs in one region"),
        (lambda p: p.switch(3, 0), DeployRefused,
         r"tenant 0 does not share region 3 \(its sharers: \[2, 3\]\)"),
        (lambda p: p.switch(5, 2), DeployRefused, r"region 5 is not time-shared"),
    ]
    for call, error, match in refusals:
        _refused(nic, plane, call, error, match)

    # Undeploying the running tenant loads the other's context and releases it.
    _run(plane.undeploy(2))
    assert get("scheduler", "tenant_hold") == 0
    loaded(second, fresh)
    assert json.loads(state.read_text())["time_shares"] == {}
    assert _run(ControlPlane(nic, nic_description, state).refresh())[3].regions == (3,)


def test_device_reset_makes_records_stale(nic_description, tmp_path):
    nic = FakeNic(nic_description)
    state = tmp_path / "state.json"
    _run(ControlPlane(nic, nic_description, state).deploy(CHAINS / "web.toml", 0))
    reset = FakeNic(nic_description)              # the same device after a reset
    plane = ControlPlane(reset, nic_description, state)
    assert _run(plane.refresh()) == {} and plane.fresh and plane.unmanaged == ()
    assert _run(plane.deploy(CHAINS / "web.toml", 2)).regions == (0,)


def test_cli_deploy_and_undeploy_through_a_device_server(nic_description, capsys):
    short = Path(tempfile.mkdtemp(prefix="snic", dir="/tmp"))   # Unix socket paths are short
    sock = short / "dev.sock"
    nic = FakeNic(nic_description)
    server = DeviceServer(FakeDevice(nic), nic_description)
    with serving_in_thread(server, sock, timeout=10):
        assert snic(["deploy", str(CHAINS / "web.toml"), "--tenant", "1", "--instances", "2",
                     "--socket", str(sock)]) == 0
        out = capsys.readouterr().out.strip().splitlines()
        assert out[0] == "deployed web as tenant 1 on regions 0, 1"
        # The tenant's token, owner-only beside the socket (sw/driver/access.py).
        token = short / "dev.sock.tenant1.token"
        assert out[1:] == [f"tenant 1's token (its own blocks only): {token} "
                           f"(SNIC_TOKEN_FILE={token} snic status)"]
        assert token.stat().st_mode & 0o077 == 0
        assert (short / "dev.sock.tenants.json").exists()
        assert nic.model.get("scheduler", "tenant_enable") == 0b0010

        def fails(args, match):
            assert snic([*args, "--socket", str(sock)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith("snic: error: ") and match in err[0]
        fails(["deploy", str(CHAINS / "secure.toml"), "--tenant", "0", "--instances", "3"],
              "not enough free regions for 3 instance(s) of 'secure'")
        fails(["deploy", str(ROOT / "tests/data/nic_test.toml"), "--tenant", "0"],
              "unknown key 'design'")
        fails(["undeploy", "--tenant", "3"], "tenant 3 is not deployed")
        # Rebalance: over the measuring window tenant 1's even entries carry 960 beats each,
        # its odd ones 96 (the fake device's traffic, 1/16 of it every 256 cycles run).
        loads = {16 + i: 960 if i % 2 == 0 else 96 for i in range(16)}
        real_run = FakeDevice.run

        def run_with_traffic(device, cycles):
            for k, v in loads.items():
                nic.loads[k] = nic.loads.get(k, 0) + v * cycles // 4096
            real_run(device, cycles)
        FakeDevice.run = run_with_traffic
        try:
            assert snic(["rebalance", "--tenant", "1", "--cycles", "4096",
                         "--socket", str(sock)]) == 0
        finally:
            FakeDevice.run = real_run
        assert capsys.readouterr().out.strip() == (
            "rebalanced tenant 1's flow table over 8448 beats: busiest instance 1.818 of the "
            "mean with entries in turn, 1.000 now")
        assert sorted(nic.tables[1].count(r) for r in (0, 1)) == [8, 8]
        assert snic(["deploy", str(CHAINS / "metered.toml"), "--tenant", "2",
                     "--socket", str(sock)]) == 0
        capsys.readouterr()
        # Region 3's state: an idle chain whose rate limiter counted 42 packets.
        smap = StateMap.from_json(nic_description["state_maps"]["region3"]["metered"])
        values = smap.decode([0] * smap.words)
        values["graph.policer.csr__packets"] = 42
        nic.states[(3, "metered")] = dict(zip(smap.addresses(), smap.encode(values)))
        assert snic(["migrate", "--tenant", "2", "--from", "3", "--to", "5",
                     "--socket", str(sock)]) == 0
        assert capsys.readouterr().out.strip() == (
            f"tenant 2: metered moved from region 3 to region 5 ({smap.words} state words) with "
            "traffic flowing")
        assert nic.tables[2] == [5] * 16
        # To the Python model and back (the region suspended first).
        moved = dict(nic.states[(5, "metered")])
        assert snic(["suspend", "--region", "5", "--socket", str(sock)]) == 0
        assert "region 5: metered stopped at a packet boundary" in capsys.readouterr().out
        model_file = short / "metered.pkl"
        assert snic(["state", "to-model", "--region", "5", "--out", str(model_file),
                     "--socket", str(sock)]) == 0
        out = capsys.readouterr().out
        assert "region 5: metered in the Python model" in out and "packets 42" in out
        assert snic(["state", "from-model", str(model_file), "--region", "5",
                     "--socket", str(sock)]) == 0
        assert "state loaded from the model" in capsys.readouterr().out
        assert nic.states[(5, "metered")] == moved
        assert snic(["resume", "--region", "5", "--socket", str(sock)]) == 0
        fails(["state", "to-model", "--region", "5"], "to-model needs --out FILE")
        fails(["state", "from-model", str(short / "none.pkl"), "--region", "5"],
              "cannot read model file")
        fails(["migrate", "--tenant", "1", "--from", "0", "--to", "2"],
              "region 2 cannot host 'web'")
        # Time sharing region 5 with a second metered tenant.
        (short / "metered_b.toml").write_text(METERED_B)
        assert snic(["deploy", str(short / "metered_b.toml"), "--tenant", "3", "--share", "5",
                     "--socket", str(sock)]) == 0
        assert capsys.readouterr().out.strip().splitlines()[0] == (
            "deployed metered as tenant 3 on regions 5, time-shared (held until snic switch "
            "--region 5 --tenant 3)")
        assert snic(["switch", "--region", "5", "--tenant", "3", "--socket", str(sock)]) == 0
        assert capsys.readouterr().out.strip() == (
            "region 5: tenant 3's context loaded (held: 2)")
        assert nic.model.get("scheduler", "tenant_hold") == 1 << 2
        fails(["switch", "--region", "3", "--tenant", "3"], "region 3 is not time-shared")
        assert snic(["undeploy", "--tenant", "3", "--socket", str(sock)]) == 0
        assert nic.model.get("scheduler", "tenant_hold") == 0
        assert snic(["undeploy", "--tenant", "2", "--socket", str(sock)]) == 0
        capsys.readouterr()
        # Scaling: secure deployed on region 2 by --regions; web scales in from region 1 and
        # secure out to it (a personality load); the tenant's token follows its regions.
        assert snic(["deploy", str(CHAINS / "secure.toml"), "--tenant", "0", "--regions", "2",
                     "--socket", str(sock)]) == 0
        assert capsys.readouterr().out.splitlines()[0] == \
            "deployed secure as tenant 0 on regions 2"
        with pytest.raises(SystemExit) as bad:       # argparse: usage, then the error
            snic(["deploy", str(CHAINS / "metered.toml"), "--tenant", "2", "--regions", "x"])
        assert bad.value.code == 2 and capsys.readouterr().err.strip().splitlines()[-1].endswith(
            "regions must be comma-separated region numbers, not 'x'")
        fails(["scale-out", "--tenant", "0", "--region", "1"], "region 1 is not free")
        assert snic(["scale-in", "--tenant", "1", "--region", "1", "--socket", str(sock)]) == 0
        assert capsys.readouterr().out.strip() == (
            "tenant 1 (web) gave up region 1: it runs on regions 0, its flow table dealt out "
            "over them")
        assert snic(["scale-out", "--tenant", "0", "--region", "1", "--socket", str(sock)]) == 0
        assert capsys.readouterr().out.strip() == (
            "tenant 0 (secure) given region 1: it runs on regions 2, 1, its flow table dealt "
            "out over them")
        assert nic.tables[0] == [2, 1] * 8 and nic.tables[1] == [0] * 16
        assert server.access.grants()[0].regions == (1, 2)
        assert snic(["undeploy", "--tenant", "0", "--socket", str(sock)]) == 0
        assert token.exists()
        assert snic(["undeploy", "--tenant", "1", "--socket", str(sock)]) == 0
        assert nic.model.get("scheduler", "tenant_enable") == 0
        assert not token.exists() and server.access.grants() == {}
    assert snic(["undeploy", "--tenant", "1", "--socket", str(sock)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no device is serving" in err[0]
    shutil.rmtree(short, ignore_errors=True)


def test_a_failed_rebalance_puts_the_previous_table_back(nic_description, tmp_path):
    """A rebalance's table goes through the transaction: a bus error at any of its writes
    commits the table in effect before again and keeps the record."""
    from supernic.driver.autoscale import Rebalance
    nic = FakeNic(nic_description)
    state = tmp_path / "state.json"
    _run(ControlPlane(nic, nic_description, state).deploy(CHAINS / "web.toml", 2, instances=2))
    size = nic_description["config"]["table_size"]
    decision = Rebalance(2, "web", tuple([0] * (size - 1) + [1]), "test", 1.0, 1.0)
    trial = copy.deepcopy(nic)
    start = trial.writes
    shutil.copy(state, tmp_path / "trial.json")
    _run(ControlPlane(trial, nic_description, tmp_path / "trial.json").apply_rebalance(decision))
    assert trial.tables[2] == list(decision.table)
    saved = state.read_text()
    for k in range(1, trial.writes - start + 1):
        faulty = copy.deepcopy(nic)
        faulty.fail_at = faulty.writes + k
        plane = ControlPlane(faulty, nic_description, state)
        with pytest.raises(DeployFailed, match=r"the new flow table of tenant 2 failed: .*"
                                               r"SLVERR.*its previous table is back"):
            _run(plane.apply_rebalance(decision))
        assert faulty.tables == nic.tables and faulty.shadows == nic.shadows, k
        assert state.read_text() == saved
        assert _run(plane.refresh())[2].table == ()


def test_scale_out_and_in_move_one_region(nic_description, tmp_path):
    """``scale_out`` gives a tenant a free region (its personality loaded, its NTs configured,
    its cost, the table over all its regions committed); ``scale_in`` takes one back (the
    table over the rest first, then the cost). A bus error at any write of either leaves the
    device and the record as they were."""
    state = tmp_path / "state.json"
    nic = FakeNic(nic_description)
    plane = ControlPlane(nic, nic_description, state)
    secure = load_chain(CHAINS / "secure.toml")
    _run(plane.deploy(CHAINS / "web.toml", 0))
    assert _run(plane.deploy(CHAINS / "secure.toml", 1, regions=[2])).regions == (2,)
    nic.log.clear()
    record = _run(plane.scale_out(1, 1))
    assert record.regions == (2, 1) and nic.tables[1] == [2, 1] * 8
    assert nic.model.get("region1", "active") == 1 and nic.unloaded_writes == []
    assert [w for w in nic.log if w[0].startswith("r1_secure_")] == _nt_writes(nic, 1, secure)
    assert nic.model.get("scheduler", "r1_cost") == nic.model.get("scheduler", "r2_cost")
    again = ControlPlane(nic, nic_description, state)
    assert _run(again.refresh())[1].regions == (2, 1) and 1 not in again.free_regions()

    refusals = [
        (lambda p: p.scale_out(1, 0), r"region 0 is not free"),
        (lambda p: p.scale_out(1, 2), r"tenant 1 already runs in region 2"),
        (lambda p: p.scale_out(0, 5), r"region 5 cannot host 'web'"),
        (lambda p: p.scale_out(3, 4), r"tenant 3 is not deployed"),
        (lambda p: p.scale_in(0, 0), r"region 0 is tenant 0's only instance"),
        (lambda p: p.scale_in(1, 4), r"tenant 1 \(secure\) does not run in region 4"),
        (lambda p: p.deploy(CHAINS / "metered.toml", 2, regions=[1]),
         r"regions \[1\] cannot take 'metered'"),
    ]
    for call, match in refusals:
        _refused(nic, plane, call, DeployRefused, match)

    record = _run(plane.scale_in(1, 2))
    assert record.regions == (1,) and nic.tables[1] == [1] * 16
    assert nic.model.get("scheduler", "r2_cost") == 0x100 and 2 in plane.free_regions()

    # Faults: at every write of a scale-out that loads region 1's personality, and of a
    # scale-in.
    base = FakeNic(nic_description)
    _run(ControlPlane(base, nic_description, state).deploy(CHAINS / "web.toml", 0))
    _run(ControlPlane(base, nic_description, state).deploy(CHAINS / "secure.toml", 1,
                                                           regions=[2]))
    for op in ("scale_out", "scale_in"):
        if op == "scale_in":
            _run(ControlPlane(base, nic_description, state).scale_out(1, 1))
        trial = copy.deepcopy(base)
        start = trial.writes
        shutil.copy(state, tmp_path / "trial.json")
        _run(getattr(ControlPlane(trial, nic_description, tmp_path / "trial.json"), op)(1, 1))
        saved = state.read_text()
        for k in range(1, trial.writes - start + 1):
            faulty = copy.deepcopy(base)
            before = faulty.image()
            faulty.fail_at = faulty.writes + k
            p = ControlPlane(faulty, nic_description, state)
            with pytest.raises(DeployFailed, match=r"scale-(out|in) of tenant 1 .* failed: .*"
                                                   r"SLVERR.*runs in regions .* as before"):
                _run(getattr(p, op)(1, 1))
            _trace_free_of_change(faulty, before)
            assert state.read_text() == saved


def _trace_free_of_change(nic, before):
    """The image equals ``before`` but for the regions' load status."""
    values, tables, shadows, slots = nic.image()
    old_values, old_tables, old_shadows, old_slots = before
    assert slots == old_slots and tables == old_tables and shadows == old_shadows
    loaded = {(f"region{r}", reg) for r in range(nic.shape.regions)
              for reg in ("active", "loads", "online")}
    assert {k: v for k, v in values.items() if k not in loaded} == \
        {k: v for k, v in old_values.items() if k not in loaded}
