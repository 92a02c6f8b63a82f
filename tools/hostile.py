"""Hostile tenants on a NIC, next to well-behaved ones (``snic bench fairness``, its
``hostile`` figures; issue 17).

One tenant per chain the regions load at reset (four on the default NIC). The hostile tenant
(the first whose region is under the state-yielding transform) has ingress port 0 to itself
and offers it at line rate; the others share port 1, each offering a fixed fraction of line
rate in mixed sizes, below what the NIC gives each of them, so a fair NIC delivers all they
send. Five runs of the same length, the well-behaved tenants' frames identical in each (same
flows, same seed):

* ``baseline``: the hostile tenant behaves (mixed sizes at line rate): the fair share the
  others get when nobody misbehaves, which the other runs are measured against;
* ``malformed_flood``: it sends only malformed frames (every kind the generator makes);
* ``jumbo_line_rate``: it sends 9,000-byte frames at line rate;
* ``suspended_chain``: it sends large frames at line rate (9,000 bytes, or half its queue if
  that is less, so that they are not all queue drops) and a quarter into the run its region
  is suspended (``snic suspend --now``; a region with the boundary state port drains to a
  packet boundary first), then resumed after the run, so the packets it held leave then;
* ``stalled_chain``: the same frames, and a quarter into the run its chain stops dead, as a
  hung NT would (the region's ``inject_stall`` register: no beat taken or offered, and the
  scheduler not told). A frame larger than the region's buffer half-way in holds the packet
  store's input every tenant shares, one half-way out holds its output; the store cuts them
  after ``nic.stall_cycles`` (counted: ``stalled`` in the account, ``stall_cuts``). The chain
  runs on after the run, so the packets it held leave then.

Per well-behaved tenant and run: frames sent and delivered, delivered bytes per cycle and
their ratio to the baseline (goal at least 0.95), and frames lost (queue, store and disabled
drops: none allowed; an NT's own verdict drops are the chain's function and equal in every
run). Per run the NIC's whole account must balance.
"""

import asyncio
import tempfile
import time
from pathlib import Path

__all__ = ["hostile_bench", "hostile_show", "SCENARIOS", "WELL_BEHAVED_RATE"]

SCENARIOS = ("baseline", "malformed_flood", "jumbo_line_rate", "suspended_chain",
             "stalled_chain")
#: Each well-behaved tenant's offered load, a fraction of its port's line rate.
WELL_BEHAVED_RATE = 0.12
_HOSTILE_FLOW = {
    "baseline": "size=200-1500",
    "malformed_flood": "size=200-1500,malformed=1.0",
    "jumbo_line_rate": "size=9000",
    "suspended_chain": "size={large}",
    "stalled_chain": "size={large}",
}


def _per_tenant(record, tenants, window):
    """Sent, delivered, delivered bytes, and bytes delivered within ``window`` cycles of the
    run's start, per tenant, from a run's record."""
    out = {t: {"sent": 0, "delivered": 0, "delivered_bytes": 0, "window_bytes": 0}
           for t in tenants}
    for t in record["sent"]["tenant"]:
        if t in out:
            out[t]["sent"] += 1
    end = record["start_cycle"] + window
    d = record["delivered"]
    for t, size, last in zip(d["tenant"], d["size"], d["last"]):
        if t in out:
            out[t]["delivered"] += 1
            out[t]["delivered_bytes"] += size
            if last <= end:
                out[t]["window_bytes"] += size
    return out


def _hostile(description, chains):
    """The hostile tenant: the first whose region is under the state-yielding transform (its
    chain can be suspended), else the first."""
    maps = description.get("state_maps") or {}
    for tenant, (region, _source) in enumerate(chains):
        if f"region{region}" in maps:
            return tenant
    return 0


async def _scenario(client, description, work, name, cycles, seed, progress):
    from ..driver.client import DeviceError, SocketBus
    from ..driver.control import ControlPlane
    from ..driver.discovery import read_register, write_register
    from ..driver.state import RegionState
    from ..driver.stats import ACCOUNT_DROPS, account
    from ..driver.status import read_status
    from ..driver.traffic import TrafficError, parse_flow, run_traffic
    from ..sim.flows import make_schedule
    from ..sim.vdev.bench import _deploy_tenants, _tenant_chains

    chains = _tenant_chains(description)
    bus, regmap = SocketBus(client), description["registers"]
    plane = ControlPlane(bus, description, work / f"{name}.json",
                         wait=lambda: client.run(256))
    targets = await _deploy_tenants(plane, [source for _, source in chains])
    hostile = _hostile(description, chains)
    others = [t for t in sorted(targets) if t != hostile]
    cfg = description["config"]
    # A frame larger than half the tenant's queue is mostly dropped there (the queue holds
    # whole packets), so it would never reach a region.
    large = min(9000, cfg["queue_beats"] * cfg["data_width"] // 16)
    hostile_flow = _HOSTILE_FLOW[name].format(large=large)
    flows = [parse_flow(f"tenant={hostile},rate=1.0,port=0,flows=64,{hostile_flow}")]
    flows += [parse_flow(f"tenant={t},rate={WELL_BEHAVED_RATE},port=1,flows=64,size=200-1500")
              for t in others]
    # The well-behaved flows are seeded by their own index in make_schedule, so they are the
    # same frames in every scenario.
    schedule = make_schedule(flows, targets, cfg["data_width"], cfg["ports"], cycles=cycles,
                             seed=seed, header_bytes=cfg["header_bytes"])
    stop = release = None
    block = f"region{chains[hostile][0]}"
    if name == "suspended_chain":
        if block not in (description.get("state_maps") or {}):
            return {"skipped": "no region of the design is under the state-yielding "
                               "transform, so none can be suspended"}
        region = RegionState(bus, description, chains[hostile][0],
                             wait=lambda: client.run(256))
        stop, release = (lambda: region.suspend(at_boundary=False)), region.resume
    elif name == "stalled_chain":
        async def stop():
            await write_register(bus, regmap, block, "inject_stall", 1)

        async def release():
            await write_register(bus, regmap, block, "inject_stall", 0)
    progress(f"hostile tenants: {name}, {len(schedule):,} frames over {cycles:,} cycles...")
    events = [(cycles // 4, stop)] if stop else []
    before = await read_status(bus, description)
    try:
        run = await run_traffic(client, description, schedule, events=events,
                                drain_cycles=4 * cycles)
    except (TrafficError, DeviceError) as e:
        # A NIC that one tenant can stop: the others' packets never all come out. What did,
        # per tenant, from the egress counters.
        after = await read_status(bus, description)
        sent = {t: schedule.tenants.count(t) for t in [hostile, *others]}
        return {"hang": str(e), "tenants": {str(a["tenant"]): {
            "role": "hostile" if a["tenant"] == hostile else "well-behaved",
            "sent": sent[a["tenant"]], "delivered": a["delivered"] - b["delivered"]}
            for b, a in zip(before["tenants"], after["tenants"]) if a["tenant"] in sent}}
    held = None
    if release is not None:
        cut_before = await read_register(bus, regmap, "store", "stall_drops")
        await release()
        await client.drain(quiet=500)
        late = await client.pop()
        held = len(late)
        # A packet cut going in comes back after the release and is discarded, so it is
        # counted once, when it was cut; nothing may be cut after the run.
        held_cut = await read_register(bus, regmap, "store", "stall_drops") - cut_before
    record = run.to_json()
    tenants = _per_tenant(record, [hostile, *others], cycles)
    counters = record["counters"]["tenants"]
    row = {"frames": len(schedule), "cycles": record["end_cycle"] - record["start_cycle"],
           "account": account(record), "tenants": {}}
    for t in [hostile, *others]:
        got = tenants[t]
        nt_drops = counters.get(str(t), {}).get("dropped", 0)
        row["tenants"][str(t)] = {
            "role": "hostile" if t == hostile else "well-behaved",
            "chain": Path(chains[t][1]).stem, **got, "nt_drops": nt_drops,
            # Whatever was sent and neither delivered nor dropped by the chain's own verdict:
            # queue, store or disabled drops, or a packet still held.
            "lost": got["sent"] - got["delivered"] - nt_drops,
            "bytes_per_cycle": round(got["window_bytes"] / cycles, 4)}
    if held is not None:
        # The packets the stopped chain held stay in its region until it runs on: they
        # complete the account afterwards.
        row["held_then_delivered"] = held
        row["stall_cuts"] = record["counters"]["store"].get("stall_cuts", 0)
        acc = row["account"]
        acc["balanced"] = held_cut == 0 and acc["sent"] == held + sum(
            acc[k] for k in ACCOUNT_DROPS)
    return row


def hostile_bench(config, cycles=200_000, seed=7, progress=print, scenarios=SCENARIOS):
    """The runs (``baseline`` first, always) on ``config``'s NIC, each on a fresh virtual
    device; returns the figures."""
    from ..driver.client import DeviceClient
    from ..driver.server import serving_in_thread
    from ..sim.vdev.serve import device_server
    from ..sim.build import generated_design
    from ..sim.vdev import VirtualDevice

    if not config.is_nic:
        raise ValueError(f"design {config.name} is not a NIC (no [nic] section)")
    paths = generated_design(config, progress=progress)
    work = Path(tempfile.mkdtemp(prefix="snic-hostile-", dir="/tmp"))
    figures = {"design": config.name, "cycles": cycles, "well_behaved_rate": WELL_BEHAVED_RATE,
               "scenarios": {}}
    t0 = time.monotonic()
    for name in ("baseline", *(s for s in scenarios if s != "baseline")):
        sock = work / f"{name}.sock"

        async def session():
            client = await DeviceClient.connect(sock)
            async with client:
                description = (await client.hello())["regmap"]
                return await _scenario(client, description, work, name, cycles, seed,
                                       progress)
        # A fresh device for each run: no state carries over from the one before.
        with VirtualDevice.build(paths["verilog"], paths["regmap"], progress=progress) as dev:
            with serving_in_thread(device_server(dev, paths["regmap"]), sock):
                figures["scenarios"][name] = asyncio.run(session())
    base = figures["scenarios"]["baseline"]["tenants"]
    worst, lost = None, 0
    for name, row in figures["scenarios"].items():
        for t, r in row.get("tenants", {}).items():
            if r["role"] != "well-behaved":
                continue
            if "hang" in row:
                lost += r["sent"] - r["delivered"]
                continue
            ratio = r["bytes_per_cycle"] / max(base[t]["bytes_per_cycle"], 1e-12)
            r["to_fair_share"] = round(ratio, 4)
            lost += r["lost"]
            worst = ratio if worst is None else min(worst, ratio)
    figures["worst_to_fair_share"] = round(worst, 4)
    figures["well_behaved_lost"] = lost
    figures["hangs"] = [name for name, row in figures["scenarios"].items() if "hang" in row]
    figures["balanced"] = all(row["account"]["balanced"]
                              for row in figures["scenarios"].values() if "account" in row)
    figures["goal_met"] = (worst >= 0.95 and lost == 0 and figures["balanced"]
                           and not figures["hangs"])
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def hostile_show(figures, console):
    """One row per run and tenant: what it sent, what arrived, its rate against the
    baseline."""
    from rich.table import Table
    table = Table(title=f"hostile tenants on {figures['design']} ({figures['cycles']:,} cycles a "
                        f"run; goal: others within 5% of their fair share, nothing lost)")
    for col in ("run", "tenant", "chain", "sent", "delivered", "NT drops", "lost",
                "bytes/cycle", "to fair share"):
        table.add_column(col, justify="left" if col in ("run", "tenant", "chain") else "right")
    for name, row in figures["scenarios"].items():
        if "skipped" in row:
            table.add_row(name, "-", row["skipped"], *[""] * 6)
            continue
        if "hang" in row:
            table.add_row(name, "-", f"[red]hang: {row['hang']}[/red]", *[""] * 6)
            for t, r in row["tenants"].items():
                table.add_row("", f"{t} ({r['role']})", "", f"{r['sent']:,}",
                              f"{r['delivered']:,}", *[""] * 4)
            continue
        for t, r in row["tenants"].items():
            table.add_row(name, f"{t} ({r['role']})", r["chain"], f"{r['sent']:,}",
                          f"{r['delivered']:,}", f"{r['nt_drops']:,}", f"{r['lost']:,}",
                          f"{r['bytes_per_cycle']:.3f}",
                          f"{r['to_fair_share']:.3f}" if "to_fair_share" in r else "")
            name = ""
    console.print(table)
    for name, row in figures["scenarios"].items():
        if "held_then_delivered" in row:
            console.print(f"{name}: {row['held_then_delivered']} packets held, delivered after "
                          f"the run; {row['account']['stalled']} cut going in (dropped), "
                          f"{row['stall_cuts']} cut coming out (left cut short)")
    console.print(f"worst well-behaved rate to fair share {figures['worst_to_fair_share']:.3f}, "
                  f"well-behaved frames lost {figures['well_behaved_lost']}, every account "
                  f"{'balanced' if figures['balanced'] else 'NOT balanced'}: goal "
                  f"{'met' if figures['goal_met'] else 'NOT met'}")
