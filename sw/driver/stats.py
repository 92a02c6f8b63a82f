"""Figures of a traffic run (the record ``snic traffic --record`` writes): throughput, latency
distribution and fairness over time, per tenant.

- **Throughput**: a tenant's delivered bytes over its span (its first packet offered to its
  last one out), as bytes a cycle, as a fraction of one port's line rate (``data_width / 8``
  bytes a cycle) and, with a clock, in Gbit/s.
- **Latency**: cycles from a packet's first beat entering the NIC (the parser's timestamp) to
  its first beat leaving (``m_axis``): percentiles 50, 90, 99 and the maximum.
- **Fairness over time**: the run is cut into windows; in each, every tenant that was offered
  traffic (or, for a replay, delivered some) gets its delivered bytes divided by its weight,
  and Jain's index is taken over those (Jain, Chiu and Hawe, DEC-TR-301, 1984: 1 when equal,
  1/n when one tenant has everything). Windows with fewer than two active tenants are left
  out. This is the weighted share of delivered bytes, the egress resource; ``snic bench
  fairness`` measures dominant shares over all three resources.
- **Accounting**: every packet sent is delivered or counted: unmatched by a classifier,
  dropped at a full tenant queue or for a disabled tenant, dropped whole at a full packet
  store, dropped because its region stopped taking beats (``stalled``), or dropped by an NT
  of the tenant's chain.
"""

import numpy as np

__all__ = ["traffic_stats", "jain", "plot_stats", "account", "ACCOUNT_DROPS"]

PERCENTILES = (50, 90, 99)


def jain(values):
    """Jain's fairness index of ``values`` (1 for equal values; None for no values)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0 or not x.any():
        return None
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum()))


#: The ways a sent packet is accounted for, delivery first (:func:`account`).
ACCOUNT_DROPS = ("delivered", "unmatched", "queue", "disabled", "store", "stalled",
                 "misrouted", "nt")


def account(record):
    """``{"sent", "delivered", "unmatched", "queue", "disabled", "store", "stalled", "misrouted",
    "nt", "balanced"}``
    from the record's counter changes; ``balanced`` is False when a packet is missing."""
    counters = record["counters"]
    tenants = counters.get("tenants") or {}
    out = {"sent": len(record["sent"]["port"]), "delivered": len(record["delivered"]["size"]),
           "unmatched": sum(p.get("classifier.dropped", 0) for p in counters["ports"].values()),
           "queue": sum(t.get("queue_drops", 0) for t in tenants.values()),
           "disabled": sum(t.get("disabled_drops", 0) for t in tenants.values()),
           "store": (counters.get("store") or {}).get("drops", 0),
           "stalled": (counters.get("store") or {}).get("stall_drops", 0),
           "misrouted": (counters.get("store") or {}).get("misrouted", 0),
           "nt": sum(t.get("dropped", 0) for t in tenants.values())}
    counted_delivered = sum(t.get("delivered", 0) for t in tenants.values())
    out["balanced"] = (out["delivered"] == counted_delivered and out["sent"] == sum(
        out[k] for k in ACCOUNT_DROPS))
    return out


def _window(record, window):
    duration = max(1, record["end_cycle"] - record["start_cycle"])
    if window is None:
        # About 40 windows, rounded to a power of two cycles.
        window = 1 << max(6, int(np.log2(max(1, duration // 40))))
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive number of cycles, not {window!r}")
    return window


def traffic_stats(record, window=None):
    """The figures of ``record`` (a dict: ``TrafficRun.to_json``); ``window`` in cycles for the
    fairness and throughput series (default about 1/40 of the run)."""
    window = _window(record, window)
    start, end = record["start_cycle"], record["end_cycle"]
    duration = max(1, end - start)
    beat_bytes = record["data_width"] // 8
    clock = record.get("clock_mhz")
    weights = {int(t): float(w) for t, w in (record.get("weights") or {}).items()}
    sent = {k: np.asarray(v, dtype=np.int64) for k, v in record["sent"].items()}
    out = {k: np.asarray(v, dtype=np.int64) for k, v in record["delivered"].items()}
    counters = (record["counters"].get("tenants") or {})
    tenants = sorted({int(t) for t in out["tenant"]} | {int(t) for t in sent["tenant"] if t >= 0})
    edges = np.arange(start, end + window, window)
    series = {}
    rows = []
    for t in tenants:
        mine = out["tenant"] == t
        offered = sent["tenant"] == t
        latency = out["first"][mine] - out["ingress"][mine]
        delivered_bytes = int(out["size"][mine].sum())
        # Over the tenant's own span: its first packet offered (or in) to its last one out.
        first_in = [int(sent["at"][offered].min())] if offered.any() else []
        first_in += [int(out["ingress"][mine].min())] if mine.any() else []
        span = (int(out["last"][mine].max()) - min(first_in) + 1) if mine.any() else duration
        rate = delivered_bytes / max(1, span)
        row = {"tenant": t, "weight": weights.get(t, 1.0),
               "sent": int(offered.sum()) if (sent["tenant"] >= 0).any() else None,
               "sent_bytes": int(sent["size"][offered].sum()) if offered.any() else None,
               "delivered": int(mine.sum()), "delivered_bytes": delivered_bytes,
               "span_cycles": span,
               "bytes_per_cycle": rate, "line_rate_share": rate / beat_bytes,
               "gbit_s": rate * 8 * clock / 1000 if clock else None}
        c = counters.get(str(t), {})
        row.update({"queue_drops": c.get("queue_drops"), "disabled_drops": c.get("disabled_drops"),
                    "nt_drops": c.get("dropped")})
        if len(latency):
            row["latency"] = {f"p{q}": float(np.percentile(latency, q)) for q in PERCENTILES}
            row["latency"].update(mean=float(latency.mean()), min=int(latency.min()),
                                  max=int(latency.max()))
        else:
            row["latency"] = None
        rows.append(row)
        series[t] = {
            "delivered_bytes": np.histogram(out["first"][mine], edges,
                                            weights=out["size"][mine])[0],
            "offered": np.histogram(sent["at"][offered], edges)[0] if offered.any() else None}
    jains, times = [], []
    for i in range(len(edges) - 1):
        active = [t for t in tenants
                  if (series[t]["offered"] is not None and series[t]["offered"][i] > 0)
                  or (series[t]["offered"] is None and series[t]["delivered_bytes"][i] > 0)]
        if len(active) < 2:
            continue
        value = jain([series[t]["delivered_bytes"][i] / weights.get(t, 1.0) for t in active])
        if value is not None:
            jains.append(value)
            times.append(int(edges[i] - start))
    return {
        "cycles": duration, "window": window, "clock_mhz": clock, "tenants": rows,
        "account": account(record),
        "fairness": {"windows": len(jains),
                     "jain_mean": float(np.mean(jains)) if jains else None,
                     "jain_min": float(np.min(jains)) if jains else None,
                     "series": {"cycle": times, "jain": jains}},
        "throughput_series": {"cycle": [int(e - start) for e in edges[:-1]],
                              **{str(t): (series[t]["delivered_bytes"] / window).tolist()
                                 for t in tenants}},
    }


def plot_stats(record, stats, path):
    """Three panels to ``path`` (PNG): delivered throughput per tenant over time, the latency
    distribution per tenant (CDF) and Jain's index over time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    clock = stats["clock_mhz"]
    scale, unit = ((8 * clock / 1000, "Gbit/s") if clock else (1.0, "bytes/cycle"))
    fig, (a, b, c) = plt.subplots(3, 1, figsize=(8, 10), constrained_layout=True)
    series = stats["throughput_series"]
    x = np.asarray(series["cycle"])
    out = {k: np.asarray(v, dtype=np.int64) for k, v in record["delivered"].items()}
    for row in stats["tenants"]:
        t = row["tenant"]
        a.plot(x, np.asarray(series[str(t)]) * scale, label=f"tenant {t}")
        mine = out["tenant"] == t
        latency = np.sort(out["first"][mine] - out["ingress"][mine])
        if len(latency):
            b.step(latency, np.arange(1, len(latency) + 1) / len(latency), where="post",
                   label=f"tenant {t} (p99 {row['latency']['p99']:.0f})")
    a.set(title=f"delivered throughput ({stats['window']}-cycle windows)", xlabel="cycle",
          ylabel=unit)
    a.legend(loc="best")
    b.set(title="latency through the NIC (first beat in to first beat out)",
          xlabel="cycles", ylabel="fraction of packets")
    if b.lines:
        b.set_xscale("log")
        b.legend(loc="lower right")
    fair = stats["fairness"]["series"]
    c.plot(fair["cycle"], fair["jain"], marker=".")
    c.set(title="Jain's index of weighted delivered bytes (tenants with traffic offered)",
          xlabel="cycle", ylabel="Jain's index", ylim=(0, 1.05), xlim=a.get_xlim())
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_stats(stats, console, title="tenants"):
    """A table per tenant, the account of every packet, and the fairness line."""
    from rich import box
    from rich.table import Table
    clock = stats["clock_mhz"]
    table = Table(title=f"{title}: {stats['cycles']:,} cycles"
                        + (f" at {clock:g} MHz" if clock else "")
                        + "; latency p50/p99/max in cycles", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 1), collapse_padding=True)
    for col in ("tenant", "weight", "sent", "delivered", "q-drop", "nt-drop",
                "Gbit/s" if clock else "B/cycle", "p50", "p99", "max"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in stats["tenants"]:
        lat = row["latency"] or {}

        def cell(v, fmt="{:,}"):
            return "-" if v is None else fmt.format(v)
        table.add_row(str(row["tenant"]), f"{row['weight']:g}", cell(row["sent"]),
                      cell(row["delivered"]), cell(row["queue_drops"]), cell(row["nt_drops"]),
                      f"{row['gbit_s']:.2f}" if clock else f"{row['bytes_per_cycle']:.2f}",
                      cell(lat.get("p50"), "{:,.0f}"),
                      cell(lat.get("p99"), "{:,.0f}"), cell(lat.get("max")))
    console.print(table)
    a = stats["account"]
    console.print(f"account: {a['sent']:,} sent = {a['delivered']:,} delivered + "
                  f"{a['unmatched']:,} unmatched + {a['queue']:,} queue full + "
                  f"{a['disabled']:,} disabled tenant + {a['store']:,} store full + "
                  f"{a.get('stalled', 0):,} region stalled + "
                  f"{a.get('misrouted', 0):,} misrouted + "
                  f"{a['nt']:,} dropped by NTs: "
                  + ("[green]balanced[/]" if a["balanced"] else "[red]NOT balanced[/]"))
    f = stats["fairness"]
    if f["windows"]:
        console.print(f"fairness: Jain's index of weighted delivered bytes over {f['windows']} "
                      f"windows of {stats['window']:,} cycles: mean {f['jain_mean']:.3f}, "
                      f"min {f['jain_min']:.3f}")
    else:
        console.print("fairness: no window had two tenants with traffic")
