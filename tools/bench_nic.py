"""`snic bench fairness|scaling|latency`: the multi-tenant NIC measured on Verilator.

All three run one 512-bit bench design (:data:`BENCH_NIC`): two ingress ports, four regions
that can each load the ``web`` chain (ACL, NAT, Maglev load balancer: header-only) or the
``secure`` chain (ACL, ChaCha20, checksum offload: whole packets, 5 cycles a beat at 512 bits,
the compute-heavy one).

``fairness``: four backlogged tenants (each port always has a beat ready, shared evenly by the
two tenants on it, so each offers half a port: twice what the NIC can dispatch in total) under
each scheduler in turn, same design, same traffic:

* ``flood``: 64-byte packets, web chain, port 0;
* ``bulk``: 1,500-byte packets, web chain, port 0;
* ``compute``: 512-byte packets, secure chain (region-bound), port 1;
* ``light``: 256-byte packets, web chain, port 1.

Per tenant it measures the share of each resource over a window: dispatch (ingress) beats a
cycle, region time (cycles its packets held a region's input, over R regions), egress beats a
cycle; the dominant share is the largest, divided by the tenant's weight. Jain's index over the
dominant shares (1.0 = perfectly fair; goal at least 0.98 for DRF), and each tenant's dominant
share against the weighted-DRF ideal (:func:`ideal_shares`: progressive filling over the same
resources with each tenant's own limits: half a port offered, its regions' time).

``fairness`` also measures hostile tenants on the design's own NIC (the default one unless
``--config``): a malformed flood, 9,000-byte frames at line rate, a chain suspended mid-run
and a chain that stops dead mid-run next to well-behaved tenants, whose rates must stay within
5% of their fair share with nothing lost (``hostile`` in the JSON; :mod:`supernic.tools.hostile`).

``scaling``: one tenant on the secure chain (region-bound), 1 to 4 instances: delivered beats a
cycle for each count and the ratio to one instance (goal at least 0.95 x instances), first with
the flow-table entries dealt out in turn; then with the auto-scaler's control loop
(:mod:`supernic.driver.autoscale`) running from that table, once it has rebalanced on its own
(``auto_efficiency``: the bench makes no rebalance call); then after the control plane's
load-aware rebalance (:mod:`supernic.driver.rebalance`) from the entries' loads in the first
window (``rebalanced_efficiency``); the reconfiguration time of loading the chain into each
region; and the scale-out reaction time of the control loop from overload to the new
instance's first packet.

``latency``: cycles from first beat in to first beat out through the idle NIC for 64-byte and
1,500-byte packets on the web chain (3 NTs), against the same chain alone behind its parser
(:mod:`supernic.hw.chain.top`) in the same run: the difference is what classifier, queues,
scheduler, store and egress add (goal: 16 cycles or fewer at 512 bits).
"""

import time

from ..driver.stats import jain
from ..desc.config import DesignConfig
from ..desc.drf import progressive_filling
from ..cache import cache_root
from ..sim.session import chain_simulator, design_simulator, quiet_fds, run_bench
from ..sim.tb import NIC_BENCH_MODULE as MB_MODULE

__all__ = ["BENCH_NIC", "FAIRNESS_TENANTS", "fairness_bench", "fairness_show",
           "scaling_bench", "scaling_show", "latency_bench", "latency_show", "ideal_shares",
           "jain"]

BENCH_NIC = DesignConfig(
    name="nic_bench", data_width=512, tenants=4, ports=2,
    regions=(("web", "secure"), ("web", "secure"), ("secure", "web"), ("web", "secure")),
    # Region input buffers of 512 beats (21 packets of 1,500 bytes): flow-hash dispatch from
    # one FIFO queue blocks at its head while that packet's instance has no room, so the
    # buffers must absorb the flows' short-term imbalance. Measured by `snic bench scaling`
    # at 2/3/4 instances: 256 beats 0.963/0.951/0.941 efficiency, 512 beats 0.990/0.942/0.965,
    # 1,024 beats 0.987/0.946/0.965, against a flow-hash bound of 0.996/0.957/0.974.
    queue_beats=256, store_beats=2048, table_size=256, region_fifo_beats=512)

FAIRNESS_TENANTS = [
    {"id": 0, "name": "flood", "chain": "web", "regions": [0], "size": 64, "port": 0},
    {"id": 1, "name": "bulk", "chain": "web", "regions": [1], "size": 1500, "port": 0},
    {"id": 2, "name": "compute", "chain": "secure", "regions": [2], "size": 512, "port": 1},
    {"id": 3, "name": "light", "chain": "web", "regions": [3], "size": 256, "port": 1},
]
POLICIES = ("drf", "drr", "rr", "fifo")


def _chain_path(name):
    return str(BENCH_NIC.with_(chains=(name,)).chain_paths()[0])


def ideal_shares(demands, capacity, limits, weights):
    """Each tenant's weighted dominant share under weighted DRF with continuous rates
    (:func:`supernic.desc.drf.progressive_filling`). ``demands[t][k]``: share of resource ``k``
    one unit of tenant t's work takes; ``capacity[k]``: 1.0 each; ``limits[t]``: most units t
    can use (what it offers, what its regions can do)."""
    rate = progressive_filling(demands, weights, capacity, limits)
    return {t: rate[t] * max(demands[t][k] / capacity[k] for k in capacity) / weights[t]
            for t in demands}


def _ideal(tenants, shape_regions, data_width, costs=None):
    """The weighted-DRF shares; region costs as measured (``costs``: region -> cycles a beat),
    else as the chains declare them."""
    from ..desc.chain import load_chain
    demands, limits, weights = {}, {}, {}
    for t in tenants:
        cost = (costs or {}).get(str(t["regions"][0])) or load_chain(
            _chain_path(t["chain"])).cycles_per_beat(data_width)
        # One unit = one beat a cycle dispatched.
        demands[t["id"]] = {"ingress": 1.0, "region": cost / shape_regions, "egress": 1.0}
        limits[t["id"]] = min(0.5, len(t["regions"]) / cost)
        weights[t["id"]] = t.get("weight", 1)
    return ideal_shares(demands, {"ingress": 1.0, "region": 1.0, "egress": 1.0}, limits,
                        weights)


def _scenario(tenants, policy, **extra):
    out = []
    for t in tenants:
        t = dict(t)
        t["chain"] = _chain_path(t["chain"])
        out.append(t)
    return {"tenants": out, "policy": policy, **extra}


def _sim(status, log):
    with quiet_fds(log):
        return design_simulator(BENCH_NIC, progress=status.update)


def fairness_bench(config, console, quick, tenants=None, policies=POLICIES, window=None):
    """``window``: the cycles measured after the warm-up (default 6,000 with ``quick``, else
    20,000)."""
    log = cache_root() / "logs" / "bench-fairness.log"
    tenants = tenants or FAIRNESS_TENANTS
    window = window or (6000 if quick else 20000)
    figures = {"benchmark": "fairness", "log": str(log), "design": "nic_bench (512-bit)",
               "window_cycles": window, "tenants": [
                   {k: t[k] for k in ("name", "chain", "size", "port")} | {
                       "weight": t.get("weight", 1)} for t in tenants], "policies": {}}
    ideal = None
    t0 = time.monotonic()
    with console.status("fairness bench") as status:
        sim = _sim(status, log)
        for policy in policies:
            status.update(f"{policy}: four backlogged tenants, {window} cycles...")
            with quiet_fds(log):
                got = run_bench(sim, "shares", _scenario(tenants, policy, window=window,
                                                         warmup=3000 if quick else 6000),
                                module=MB_MODULE)
            if ideal is None:
                # The first run's calibration (what the control plane measured each chain's
                # region cycles a beat to be) sets the ideal for every policy.
                figures["measured_region_costs"] = got["region_costs"]
                ideal = _ideal(tenants, len(BENCH_NIC.regions), BENCH_NIC.data_width,
                               got["region_costs"])
                figures["ideal_dominant_shares"] = {t["name"]: round(ideal[t["id"]], 4)
                                                    for t in tenants}
            row = {}
            shares = []
            for t in tenants:
                u = got["usage"][str(t["id"])]
                dominant = max(u["ingress"], u["region"], u["egress"]) / u["weight"]
                shares.append(dominant)
                row[t["name"]] = {
                    "ingress": round(u["ingress"], 4), "region": round(u["region"], 4),
                    "egress": round(u["egress"], 4), "dominant_share": round(dominant, 4),
                    "ideal": round(ideal[t["id"]], 4),
                    "to_ideal": round(dominant / ideal[t["id"]], 3),
                    "queue_drops": u["queue_drops"]}
            figures["policies"][policy] = {
                # No share at all counts as equal shares (index 1), as it always has here.
                "jain": round(jain(shares) or 1.0, 4), "tenants": row,
                "dispatched_beats_per_cycle": round(sum(
                    got["usage"][str(t["id"])]["ingress"] for t in tenants), 4)}
    if "drf" in figures["policies"]:
        figures["drf_jain"] = figures["policies"]["drf"]["jain"]
        figures["drf_goal_met"] = figures["drf_jain"] >= 0.98
    if config.is_nic:
        # Hostile tenants (issue 17) on the design's own NIC (the default one unless
        # --config), next to well-behaved ones: tools/hostile.py.
        from .hostile import hostile_bench
        with console.status("hostile tenants") as status:
            figures["hostile"] = hostile_bench(config, cycles=20_000 if quick else 100_000,
                                               progress=status.update)
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def fairness_show(result, console):
    from rich.table import Table
    table = Table(title="weighted dominant shares, all tenants backlogged "
                        f"(window {result['window_cycles']} cycles; ideal = weighted DRF)")
    table.add_column("policy")
    table.add_column("Jain", justify="right")
    for t in result["tenants"]:
        table.add_column(f"{t['name']} ({t['size']} B, {t['chain']})", justify="right")
    ideal = result["ideal_dominant_shares"]
    table.add_row("ideal", "1.0000", *(f"{ideal[t['name']]:.3f}" for t in result["tenants"]))
    for policy, row in result["policies"].items():
        table.add_row(policy, f"{row['jain']:.4f}", *(
            f"{row['tenants'][t['name']]['dominant_share']:.3f} "
            f"({row['tenants'][t['name']]['to_ideal']:.2f}x)" for t in result["tenants"]))
    console.print(table)
    if "hostile" in result:
        from .hostile import hostile_show
        hostile_show(result["hostile"], console)


def scaling_bench(config, console, quick):
    log = cache_root() / "logs" / "bench-scaling.log"
    # 1,500-byte packets the chain delivers: every payload beat goes through ChaCha20, so one
    # instance is region-bound (about 0.2 beats a cycle at 512 bits) and four stay below the
    # dispatch path's one beat a cycle.
    tenant = {"id": 0, "name": "compute", "chain": "secure", "regions": [2], "size": 1500,
              "port": 0, "delivered_only": True, "distinct_flows": True}
    instances = [2, 0, 1, 3]
    # Flow-affinity dispatch can only be as even as the flows hash: with few flows the busiest
    # instance sets the pace (each point reports that bound). An aggregate of thousands of
    # random flows, each its own 5-tuple, is what a NIC's instances see.
    flows = 1024 if quick else 4096
    figures = {"benchmark": "scaling", "log": str(log), "design": "nic_bench (512-bit)",
               "chain": "secure", "size": 1500, "flows": flows}
    t0 = time.monotonic()
    with console.status("scaling bench") as status:
        sim = _sim(status, log)
        status.update("1 to 4 instances of the secure chain, saturated...")
        with quiet_fds(log):
            got = run_bench(sim, "scaling", _scenario(
                [tenant], "drf", instances=instances, window=4000 if quick else 12000,
                warmup=2000 if quick else 4000, flows=flows,
                window_one=4000 if quick else 60000,
                pool_passes=0 if quick else 2, rebalance=True, auto_passes=1,
                auto_period=2000 if quick else 5000), module=MB_MODULE)
    one = got["points"][0]["beats_per_cycle"]
    figures["points"] = [{**p, "beats_per_cycle": round(p["beats_per_cycle"], 4),
                          "hash_bound": round(p["hash_bound"], 3),
                          "speedup": round(p["beats_per_cycle"] / one, 3),
                          "efficiency": round(p["beats_per_cycle"] / one / p["instances"], 3),
                          # What the dispatch achieves of what these flows' hash split allows.
                          "of_bound": round(p["beats_per_cycle"] / one / p["instances"]
                                            / p["hash_bound"], 3),
                          **_rebalanced(p, one), **_auto(p, one)}
                         for p in got["points"]]
    figures["min_efficiency"] = min(p.get("rebalanced_efficiency", p["efficiency"])
                                    for p in figures["points"])
    figures["min_efficiency_in_turn"] = min(p["efficiency"] for p in figures["points"])
    figures["goal_met"] = figures["min_efficiency"] >= 0.95
    # The auto-scaler alone: one instance has nothing to rebalance, so it counts as measured.
    figures["min_auto_efficiency"] = min(p.get("auto_efficiency", p["efficiency"])
                                         for p in figures["points"])
    figures["auto_goal_met"] = figures["min_auto_efficiency"] >= 0.95
    figures["reconfig_cycles"] = got["reconfig_cycles"]
    for key in ("reaction",):
        if key in got:
            figures[key] = got[key]
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def _rebalanced(point, one):
    """The figures of a point after the control plane's load-aware table (if measured)."""
    if "rebalanced_beats_per_cycle" not in point:
        return {}
    rate = point["rebalanced_beats_per_cycle"]
    return {"rebalanced_beats_per_cycle": round(rate, 4),
            "rebalanced_speedup": round(rate / one, 3),
            "rebalanced_efficiency": round(rate / one / point["instances"], 3),
            "rebalanced_bound": round(point["rebalanced_bound"], 3)}


def _auto(point, one):
    """The figures of a point after the auto-scaler's own rebalance (if measured)."""
    if "auto_beats_per_cycle" not in point:
        return {}
    rate = point["auto_beats_per_cycle"]
    return {"auto_beats_per_cycle": round(rate, 4), "auto_speedup": round(rate / one, 3),
            "auto_efficiency": round(rate / one / point["instances"], 3),
            "auto_bound": round(point["auto_bound"], 3)}


def scaling_show(result, console):
    from rich.table import Table
    table = Table(title=f"{result['chain']} chain, {result['size']}-byte packets, saturated")
    for col in ("instances", "speedup, entries in turn", "efficiency",
                f"flow-hash bound ({result['flows']} flows)", "speedup, rebalanced",
                "efficiency", "bound", "speedup, auto-scaler", "efficiency (goal >= 0.95)",
                "bound"):
        table.add_column(col, justify="right")
    for p in result["points"]:
        again = []
        for kind in ("rebalanced", "auto"):
            again += ([f"{p[f'{kind}_speedup']:.2f}x", f"{p[f'{kind}_efficiency']:.3f}",
                       f"{p[f'{kind}_bound']:.3f}"] if f"{kind}_speedup" in p else ["-"] * 3)
        table.add_row(str(p["instances"]), f"{p['speedup']:.2f}x", f"{p['efficiency']:.3f}",
                      f"{p['hash_bound']:.3f}", *again)
    console.print(table)
    if "reaction" in result:
        console.print(f"scale-out reaction: {result['reaction']}")


def latency_bench(config, console, quick):
    log = cache_root() / "logs" / "bench-latency.log"
    figures = {"benchmark": "latency", "log": str(log), "design": "nic_bench (512-bit)",
               "chain": "web (acl, nat, l4lb)", "sizes": {}}
    t0 = time.monotonic()
    with console.status("latency bench") as status:
        sim = _sim(status, log)
        with quiet_fds(log):
            base = chain_simulator(_chain_path("web"), DesignConfig(data_width=512),
                                   progress=status.update)
        for size in (64, 1500):
            status.update(f"{size}-byte packets through the idle NIC and the chain alone...")
            tenant = {"id": 0, "name": "web", "chain": "web", "regions": [0], "size": size,
                      "port": 0}
            with quiet_fds(log):
                got = run_bench(sim, "latency", _scenario([tenant], "drf"), module=MB_MODULE)
                ref = run_bench(base, "saturation", {"size": size, "packets": 20},
                                module="supernic.sim.tb.chain_tb")
            nic = min(got["samples"])
            figures["sizes"][f"{size}B"] = {
                "nic_latency_cycles": nic, "nic_latency_max": max(got["samples"]),
                "chain_alone_latency_cycles": ref["latency_cycles"],
                "added_cycles": nic - ref["latency_cycles"]}
        status.update("64-byte packets: every tenant backlogged, then one tenant alone...")
        figures.update(_throughput_64B(sim, log, quick))
    figures["added_cycles_64B"] = figures["sizes"]["64B"]["added_cycles"]
    figures["goal_met"] = figures["added_cycles_64B"] <= 16
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def _throughput_64B(sim, log, quick):
    """Packets a cycle out of the NIC's one dispatch path and egress with 64-byte (one-beat)
    frames: four web tenants, two on each port, every port flooding (aggregate), then one
    tenant alone on port 0 spread over all four regions (so no region is the limit)."""
    window, warmup = (4000, 2000) if quick else (20000, 4000)
    out = {}
    runs = {
        "aggregate": [{"id": t, "name": f"t{t}", "chain": "web", "regions": [t], "size": 64,
                       "port": t // 2, "delivered_only": True} for t in range(4)],
        "one_tenant": [{"id": 0, "name": "alone", "chain": "web", "regions": [0, 1, 2, 3],
                        "size": 64, "port": 0, "delivered_only": True}],
    }
    for name, tenants in runs.items():
        with quiet_fds(log):
            got = run_bench(sim, "shares", _scenario(
                tenants, "drf", loads={"2": "web"}, calibrate=False, warmup=warmup,
                window=window), module=MB_MODULE)
        usage = [got["usage"][str(t["id"])] for t in tenants]
        out[f"{name}_64B_packets_per_cycle"] = round(
            sum(u["delivered_packets"] for u in usage) / got["cycles"], 4)
        out[f"{name}_64B_dispatched_per_cycle"] = round(sum(u["ingress"] for u in usage), 4)
    return out


def latency_show(result, console):
    from rich.table import Table
    table = Table(title=f"first beat in to first beat out, idle, {result['chain']}")
    for col in ("packet", "NIC (cycles)", "chain alone", "added (goal <= 16 at 64 B)"):
        table.add_column(col, justify="right")
    for size, r in result["sizes"].items():
        table.add_row(size, str(r["nic_latency_cycles"]), str(r["chain_alone_latency_cycles"]),
                      str(r["added_cycles"]))
    console.print(table)
    for name in ("aggregate", "one_tenant"):
        key = f"{name}_64B_packets_per_cycle"
        if key in result:
            console.print(f"64-byte packets a cycle out, {name.replace('_', ' ')}: "
                          f"{result[key]}")
