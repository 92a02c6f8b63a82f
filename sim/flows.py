"""The packets of flows (:class:`~supernic.driver.traffic.Flow`) as a schedule for a running
device (:func:`~supernic.driver.traffic.run_traffic`): frames made the way the tests make them
(:func:`~supernic.sim.chain_model.chain_traffic`, aimed at the tenant's chain rules when the
tenant is deployed), carrying the tenant's key (its VLAN ID, or the VXLAN VNI).

Why templates: building and parsing a frame in Python costs about 160 us (measured: 2,000 web
frames generated in 0.33 s and parsed in 0.34 s), so 100,000 packets would take half a minute
before the device runs one cycle. A flow instead builds ``flows`` distinct frames (its 5-tuples)
once per size and draws every packet from them with numpy, which takes milliseconds.
"""

import numpy as np

from ..driver.traffic import IMIX, Schedule, TrafficError, in_time_order
from .chain_model import chain_traffic
from .nic.nic_model import tag_frame
from .parser_model import ParserModel
from .traffic import random_packets

__all__ = ["make_schedule"]


def _templates(flow, target, header_bytes, seed):
    """``{size: [frames]}`` for ``flow``: its chain's traffic (or generic traffic), tagged with
    the tenant key; frames the key cannot be put in are left out (a VNI above 4095 only fits
    VXLAN frames)."""
    keys = [flow.key] if flow.key is not None else list(target["keys"]) if target else []
    if not keys:
        raise TrafficError(f"tenant {flow.tenant} is not deployed and the flow gives no key=K")
    if flow.size == "imix":
        sizes = [s for s, _ in IMIX]
    elif flow.size == "mixed":
        sizes = ["mixed"]
    else:
        sizes = [flow.size]
    parser = ParserModel(header_bytes)
    out = {}
    for i, size in enumerate(sizes):
        frames, attempt = [], 0
        while len(frames) < flow.flows and attempt < 20:
            n = 4 * flow.flows
            s = seed + 7919 * i + 104729 * attempt
            # An untagged frame gains a 4-byte 802.1Q tag for the key: make fixed sizes both
            # ways and keep the frames that come out at the size asked for; make ranges 4
            # bytes short at the top.
            if isinstance(size, int):
                makes = (size, size - 4)
            elif isinstance(size, tuple) and size[1] - 4 >= size[0]:
                makes = ((size[0], size[1] - 4),)
            else:
                makes = (size,)
            for made in makes:
                raw = (chain_traffic(target["spec"], n, s, flow.malformed, made, header_bytes)
                       if target and target.get("spec") is not None
                       else [f for _, f in random_packets(n, s, made, flow.malformed)])
                for frame in raw:
                    meta = parser.parse(frame)
                    usable = [k for k in keys if meta["vxlan"] or k < 4096]
                    if not usable or len(frames) == flow.flows:
                        continue
                    tagged = tag_frame(frame, meta, usable[len(frames) % len(usable)])
                    if not isinstance(size, int) or len(tagged) == size:
                        frames.append(tagged)
            attempt += 1
        if not frames:
            raise TrafficError(f"cannot make {size}-byte frames that carry tenant "
                               f"{flow.tenant}'s keys {keys}")
        out[size] = frames
    return out


def make_schedule(flows, targets, data_width, ports, packets=1000, cycles=None, seed=1,
                  header_bytes=256):
    """The packets of ``flows``; ``targets[t]`` is ``{"keys": [...], "spec": ChainSpec}`` for
    each deployed tenant. Every flow sends its ``packets`` (default ``packets``) or, with
    ``cycles``, as many as its rate fits into that many cycles."""
    if not flows:
        raise TrafficError("no flows given (--flow tenant=T,... or --replay FILE)")
    beat = data_width // 8
    schedule = Schedule()
    for index, flow in enumerate(flows):
        port = flow.port if flow.port is not None else flow.tenant % ports
        if not 0 <= port < ports:
            raise TrafficError(f"flow {index} ({flow.describe()}): port {port} does not exist "
                               f"(the device has {ports})")
        rng = np.random.default_rng(seed + 1_000_003 * index)
        templates = _templates(flow, targets.get(flow.tenant), header_bytes,
                               seed + 31 * index)
        pool = [f for size in templates for f in templates[size]]
        if flow.size == "imix":
            # A size by its IMIX weight, then one of that size's 5-tuples.
            probs = np.concatenate([np.full(len(templates[s]), w / len(templates[s]))
                                    for s, w in IMIX])
            probs /= probs.sum()
        else:
            probs = None
        lengths = np.array([len(f) for f in pool])
        beats = np.maximum(1, -(-lengths // beat))
        if cycles is not None:
            mean = float((beats * (probs if probs is not None else 1 / len(pool))).sum())
            n = max(1, int(cycles * flow.rate / mean))
        else:
            n = flow.packets or packets
        picks = rng.choice(len(pool), size=n, p=probs)
        gaps = beats[picks] / flow.rate
        at = np.floor(np.concatenate([[0.0], np.cumsum(gaps)[:-1]])).astype(np.int64)
        schedule.ports += [port] * n
        schedule.frames += [pool[i] for i in picks]
        schedule.at += at.tolist()
        schedule.tenants += [flow.tenant] * n
        schedule.flow_ids += [index] * n
    return in_time_order(schedule)
