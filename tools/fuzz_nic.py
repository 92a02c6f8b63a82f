"""The fuzz campaign through a whole NIC: tenants' traffic, mutated, on the virtual device.

The parser campaign (tools/fuzz.py) compares metadata frame by frame; past the parser a frame's
fate depends on tables, queues and chains, so here the claim is the one a NIC owes its
tenants under hostile input: it never hangs, and every frame that went in either came out or
was counted with a reason (unmatched by the classifier, a full queue, a disabled tenant, the
packet store, an NT's drop).

The NIC is served as a virtual device and driven through the driver, as ``snic traffic`` does
it: one tenant is deployed per chain the regions load at reset, each sends mixed-size traffic
aimed at its chain's rules with its key, and then most frames are mutated
(:func:`supernic.sim.fuzz.mutate`: bit flips, truncations, length and field lies) and some
replaced by whole fuzz frames (tiny, random, tag stacks, extension chains, jumbo frames).
The sink is not always ready. The account comes from the NIC's own counters
(:func:`supernic.driver.stats.account`).
"""

import asyncio
import random
import tempfile
import time
from pathlib import Path

from ..sim.fuzz import fuzz_frame, mutate
from ..sim.parser_model import ParserModel

__all__ = ["nic_campaign", "fuzz_schedule", "show", "MUTATED", "REPLACED"]

#: Fractions of the tenants' frames mutated, and replaced by a whole fuzz frame.
MUTATED = 0.6
REPLACED = 0.1


def fuzz_schedule(schedule, seed, model, ext_headers):
    """Mutate ``schedule``'s frames in place; return the count of each mutation."""
    counts = {}
    for i, frame in enumerate(schedule.frames):
        rng = random.Random(seed * 0x1_0000_0000 + i)
        x = rng.random()
        if x < REPLACED:
            mutation, frame = fuzz_frame(seed + 1, i, model, ext_headers)
            mutation = f"replaced: {mutation}"
        elif x < REPLACED + MUTATED:
            mutation, frame = mutate(rng, frame, model)
        else:
            mutation = "none"
        schedule.frames[i] = frame
        counts[mutation] = counts.get(mutation, 0) + 1
    return dict(sorted(counts.items()))


def nic_campaign(config, frames, seed=1, backpressure=0.2, progress=print):
    """Run ``frames`` fuzzed frames through ``config``'s NIC; return the figures."""
    from ..driver.client import DeviceClient, SocketBus
    from ..driver.control import ControlPlane
    from ..driver.server import serving_in_thread
    from ..sim.vdev.serve import device_server
    from ..driver.stats import ACCOUNT_DROPS, account
    from ..driver.traffic import TrafficError, parse_flow, run_traffic
    from ..sim.flows import make_schedule
    from ..sim.build import generated_design
    from ..sim.vdev import VirtualDevice
    from ..sim.vdev.bench import _deploy_tenants, _tenant_chains

    if not config.is_nic:
        raise ValueError(f"design {config.name} is not a NIC (no [nic] section)")
    paths = generated_design(config, progress=progress)
    work = Path(tempfile.mkdtemp(prefix="snic-fuzz-nic-", dir="/tmp"))
    sock = work / "dev.sock"
    model = ParserModel.of(config)
    figures = {"benchmark": "fuzz_nic", "design": config.name, "seed": seed,
               "backpressure": backpressure}

    async def session():
        client = await DeviceClient.connect(sock)
        async with client:
            description = (await client.hello())["regmap"]
            plane = ControlPlane(SocketBus(client), description, work / "tenants.json",
                                 wait=lambda: client.run(256))
            targets = await _deploy_tenants(
                plane, [source for _, source in _tenant_chains(description)])
            per = -(-frames // len(targets))
            # Each port carries about its line rate in all: its tenants share it.
            ports = config.ports
            share = {p: sum(1 for t in targets if t % ports == p) for p in range(ports)}
            flows = [parse_flow(f"tenant={t},size=60-1500,flows=64,packets={per},"
                                f"rate={1 / share[t % ports]:.4f}") for t in targets]
            schedule = make_schedule(flows, targets, config.data_width, ports, seed=seed,
                                     header_bytes=config.header_bytes)
            for name in ("ports", "frames", "at", "tenants", "flow_ids"):
                setattr(schedule, name, getattr(schedule, name)[:frames])
            progress(f"deployed {len(targets)} tenants; fuzzing {len(schedule)} frames...")
            figures["tenants"] = len(targets)
            figures["mutations"] = fuzz_schedule(schedule, seed, model, config.ext_headers)
            t0 = time.perf_counter()
            try:
                run = await run_traffic(client, description, schedule,
                                        backpressure=backpressure, seed=seed)
            except TrafficError as e:
                figures.update(hangs=1, hang=str(e), frames=len(schedule))
                return None
            figures["seconds"] = round(time.perf_counter() - t0, 1)
            return run

    with VirtualDevice.build(paths["verilog"], paths["regmap"], progress=progress) as device:
        with serving_in_thread(device_server(device, paths["regmap"]), sock):
            run = asyncio.run(session())
    if run is None:
        figures["balanced"] = False
        return figures
    record = run.to_json()
    acct = account(record)
    parsed = sum(p.get("parser.packets", 0) for p in record["counters"]["ports"].values())
    malformed = sum(p.get("parser.malformed", 0) for p in record["counters"]["ports"].values())
    figures.update(
        frames=acct["sent"], hangs=0, delivered=acct["delivered"],
        counted={k: acct[k] for k in ACCOUNT_DROPS if k != "delivered"},
        parser_packets=parsed, parser_malformed=malformed,
        balanced=acct["balanced"] and parsed == acct["sent"],
        cycles=run.end_cycle - run.start_cycle)
    return figures


def show(result, console):
    """The NIC campaign's account as a table."""
    from rich.table import Table
    if result.get("hangs"):
        console.print(f"[red]NIC {result['design']}: hang: {result['hang']}[/red]")
        return
    verdict = "balanced" if result["balanced"] else "[red]NOT balanced[/red]"
    table = Table(title=f"NIC {result['design']}: {result['frames']:,} fuzzed frames of "
                        f"{result['tenants']} tenants, {verdict}")
    for col in ("delivered", "unmatched", "queue", "disabled", "store", "stalled", "NT drops",
                "parser packets", "parser malformed", "cycles", "seconds"):
        table.add_column(col, justify="right")
    c = result["counted"]
    table.add_row(*(f"{v:,}" for v in (
        result["delivered"], c["unmatched"], c["queue"], c["disabled"], c["store"],
        c["stalled"], c["nt"],
        result["parser_packets"], result["parser_malformed"], result["cycles"])),
        f"{result['seconds']}")
    console.print(table)
