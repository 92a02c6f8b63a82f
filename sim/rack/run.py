"""`snic rack run`: a rack described by rack.toml, its tenants deployed, their traffic run to
the end, and what happened, per sNIC and per tenant (the rack-wide account last).

    summary = run_rack(load_rack("chains/racks/pool.toml"), flows={"alice": [flow]},
                       cycles=50_000)
    render_rack(summary, console)
"""

import collections

import numpy as np

from ...driver.traffic import parse_flow
from .pool import PoolControl, PoolPolicy
from .rack import Rack

__all__ = ["run_rack", "summarize", "render_rack", "DEFAULT_FLOW"]

#: A tenant's traffic when none is given: half its endpoint's link, sizes 64 to 1,500 bytes.
DEFAULT_FLOW = "rate=0.5,size=64-1500,flows=32"


def run_rack(config, flows=None, cycles=50_000, seed=1, policy=True, address=None, ray=True,
             interval=5_000, progress=None):
    """Run ``config``'s rack: every tenant deployed where the rack places it, ``flows``
    (``{tenant: [Flow]}``; missing tenants get :data:`DEFAULT_FLOW`) offered for ``cycles``,
    the pool's policy acting every ``interval`` cycles (an intermediate pool, ``policy``),
    then run until drained. Returns a JSON-able summary."""
    flows = dict(flows or {})
    with Rack(config, address=address, ray=ray, progress=progress) as rack:
        if rack.pool and policy:
            rack.policy = PoolPolicy(PoolControl(rack), interval=interval)
        placed = rack.deploy_all()
        sent = {}
        for k, name in enumerate(sorted(rack.tenants)):
            tenant_flows = flows.get(name) or [parse_flow(f"tenant=0,{DEFAULT_FLOW}")]
            sent[name] = rack.send(name, tenant_flows, cycles=cycles, seed=seed + 101 * k)
        if progress:
            progress(f"running {cycles:,} cycles in windows of {rack.window_cycles}...")
        rack.run(cycles)
        rack.run_until_drained()
        summary = summarize(rack, sent)
        summary["placed"] = placed
        return summary


def summarize(rack, sent, status=None):
    """What happened in ``rack``: per sNIC its regions (tenant: chain) and its tenants'
    counters and rack port, per tenant of ``sent`` (``{tenant: [packet ids]}``) its instances,
    redirects and the delivery and latency of those packets, the policy's moves and the
    rack-wide account. JSON-able; :func:`render_rack` shows it."""
    status = status if status is not None else rack.status()
    account = rack.account(status)
    arrivals = {pid: cycle for pid, _, cycle, _ in rack.delivered}
    tenants = {}
    for name, ids in sent.items():
        t = rack.tenants[name]
        lat = np.array([arrivals[p] - rack.packets[p][2] for p in ids if p in arrivals])
        served = collections.Counter(rack.packets[p][3] for p in ids if p in arrivals)
        tenants[name] = {
            "chain": t.spec.name, "endpoint": t.entry.endpoint,
            "instances": [{"nic": n, "slot": s} for n, s in t.instances],
            "redirects": [{"peer": p, "buckets": b} for p, b in t.redirects],
            "sent": len(ids), "delivered": int(len(lat)), "served_by": dict(served),
            "latency_p50": float(np.median(lat)) if len(lat) else None,
            "latency_p99": float(np.percentile(lat, 99)) if len(lat) else None,
            "lost": t.lost}
    nics = {}
    for name in rack.nics:
        s = status.get(name)
        slots = {slot: t for t in rack.tenants for n, slot in rack.tenants[t].instances
                 if n == name}
        row = {"dead_at": rack.dead.get(name), "regions": [], "tenants": {}}
        if s and "error" not in s:
            for r in s["regions"]:
                owner = next((t for t in rack.tenants
                              if (name, r["region"]) in rack.tenants[t].regions), None)
                row["regions"].append({"region": r["region"], "chain": r["personality"],
                                       "tenant": owner})
            for t in s["tenants"]:
                if t["tenant"] in slots:
                    row["tenants"][slots[t["tenant"]]] = {
                        k: t[k] for k in ("enqueued", "queue_drops", "dropped",
                                          "delivered", "backlog_beats")}
            row["rack"] = s.get("rack")
        nics[name] = row
    moves = list(rack.policy.log) if rack.policy else []
    return {"rack": rack.config.name, "topology": rack.config.topology, "cycles": rack.now,
            "window_cycles": rack.window_cycles, "nics": nics, "tenants": tenants,
            "moves": moves, "account": account, "switch": rack.switch.counters()}


def render_rack(summary, console):
    from rich.table import Table
    title = (f"rack {summary['rack']} ({summary['topology']}): {summary['cycles']:,} cycles "
             f"in windows of {summary['window_cycles']}")
    table = Table(title=title)
    for col in ("sNIC", "regions (tenant: chain)", "tenants (enqueued / queue drops / "
                "delivered)", "rack rx / bad"):
        table.add_column(col)
    for name, row in summary["nics"].items():      # none in a tenant's view
        if row["dead_at"] is not None:
            table.add_row(name, f"dead since cycle {row['dead_at']:,}", "", "")
            continue
        regions = ", ".join(f"{r['region']} {r['tenant'] or '-'}: {r['chain']}"
                            for r in row["regions"])
        tenants = ", ".join(f"{t} {v['enqueued']}/{v['queue_drops']}/{v['delivered']}"
                            for t, v in row["tenants"].items())
        rack = row.get("rack")
        table.add_row(name, regions, tenants, f"{rack['rx']} / {rack['rx_bad']}" if rack
                      else "-")
    if summary["nics"]:
        console.print(table)
    table = Table(title="tenants")
    for col in ("tenant", "chain", "sent", "delivered", "served by", "redirects",
                "latency p50 / p99 (cycles)"):
        table.add_column(col)
    for name, t in summary["tenants"].items():
        served = ", ".join(f"{n} {c}" for n, c in sorted(t["served_by"].items()))
        redirects = ", ".join(f"{r['peer']} {r['buckets']:#06x}" for r in t["redirects"])
        lat = (f"{t['latency_p50']:.0f} / {t['latency_p99']:.0f}" if t["latency_p50"]
               is not None else "-")
        state = " (lost)" if t["lost"] else "" if t["instances"] else " (not deployed)"
        table.add_row(name + state, t["chain"], str(t["sent"]),
                      str(t["delivered"]), served, redirects or "-", lat)
    console.print(table)
    for m in summary["moves"]:
        where = m.get("peer") or f"{m.get('from')} -> {m.get('to')}"
        console.print(f"  cycle {m['at']:,}: {m['move']} of {m['tenant']} ({where})")
    a = summary["account"]
    console.print(f"account: sent {a['sent']:,} = delivered {a['delivered']:,} + switch drops "
                  f"{a['switch_drops']:,} + NIC drops {sum(a['nic_drops'].values()):,} + lost "
                  f"{a['lost']:,}: {'balanced' if a['balanced'] else 'NOT BALANCED'}")
