"""`snic`: the command-line interface.

    snic build [--config FILE] --out DIR      Verilog + JSON register map of a design
    snic lint  [--config FILE]                verilator --lint-only -Wall on the generated design
    snic demo  [--packets N]                  generate, simulate, compare with the model, report
    snic bench [NAME] [--json]                list benchmarks, or run one
    snic sweep NAME --grid P=V1,V2 [...]      a benchmark over a grid, each point a Ray task
    snic resources [KIND ...] [--json]        LUT/FF/BRAM/DSP per NT from YoWASP Yosys
    snic device serve [--config FILE] [--socket PATH | --port N]   serve a virtual device
    snic device serve --mmap BAR --regmap JSON   serve a board's registers (same access rules)
    snic status [--socket PATH | --port N | --mmap FILE --regmap JSON | --serial PORT --regmap JSON]
    snic deploy SPEC --tenant T [--instances N] [--weight W] [--socket PATH | --port N]
    snic undeploy --tenant T [--socket PATH | --port N]
    snic state suspend|resume|capture|restore|traps|to-model|from-model --region R
                                              a region's chain state, or its Python model
    snic suspend|resume --region R            short for snic state suspend|resume
    snic migrate --tenant T --from R --to R2   move a chain instance and its state, live
    snic deploy SPEC --tenant T --share R     time-share region R with its tenant(s)
    snic switch --region R --tenant T         context switch of a time-shared region
    snic traffic --flow tenant=T,rate=R,size=S ... | --replay IN.pcap  [--out OUT.pcap]
                                              traffic through the served NIC; --record RUN.json
    snic stats RUN.json [--plot FILE.png]     throughput, latency, fairness of a traffic run
    snic rack check|run RACK.toml [--flow TENANT:SPEC] [--ray-address A]
                                              a rack of sNICs on Ray (sim/rack)

A connection to a served device presents a token: the operator's from the file beside the
socket, a tenant's (written by snic deploy) from $SNIC_TOKEN_FILE (sw/driver/access.py).

Exit codes: 0 success, 1 a check failed (mismatch, lint warning) or an operation failed on the
device, 2 bad usage, a bad configuration or a request refused before anything changed. Every
error a command reports is a :class:`~supernic.desc.errors.SnicError` carrying its exit code,
caught once, in :func:`main`.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from ..desc.errors import SnicError

__all__ = ["main"]


def _console(stderr=False):
    from rich.console import Console
    return Console(stderr=stderr, highlight=False)


def _error(message):
    """Errors are one plain line on stderr (no wrapping), so scripts can match them."""
    print(f"snic: error: {message}", file=sys.stderr)


def _load(args):
    """The design configuration of ``--config`` (a :class:`ConfigError` reaches :func:`main`)."""
    from ..desc.config import default_config_path, load_config
    return load_config(args.config or default_config_path())


def cmd_build(args):
    if args.board:
        return cmd_build_board(args)
    if args.out is None:
        raise SnicError("snic build: --out is required (or --board for a bitstream)")
    if args.vivado:
        return cmd_build_vivado(args)
    from ..hw.generate import write_design
    config = _load(args)
    console = _console()
    t = time.monotonic()
    with console.status(f"generating {config.name} ({config.data_width}-bit)...") as status:
        paths = write_design(config, args.out, progress=status.update, personalities=True)
    console.print(f"wrote [bold]{paths['verilog']}[/] and [bold]{paths['regmap']}[/] "
                  f"in {time.monotonic() - t:.1f} s")
    for tenant, chain in paths["chains"].items():
        console.print(f"chain [bold]{tenant}[/]: {chain['verilog']}")
    for chain, path in paths["personalities"].items():
        console.print(f"region personality [bold]{chain}[/]: {path}")
    for chain, path in paths["state_maps"].items():
        console.print(f"state map of [bold]{chain}[/] (state-yielding transform): {path}")
    if args.lint:
        return _lint(paths["verilog"], console)
    return 0


def cmd_build_vivado(args):
    from ..tools.vivado import write_vivado_project
    config = _load(args)
    console = _console()
    with console.status(f"generating {config.name} ({config.data_width}-bit)...") as status:
        try:
            paths = write_vivado_project(config, args.out, args.vivado, args.clock_mhz,
                                         progress=status.update)
        except ValueError as e:
            raise SnicError(str(e)) from None
    console.print(f"wrote [bold]{paths['tcl']}[/] for {paths['part']} ({len(paths['sources'])} "
                  f"Verilog files, constraints {paths['xdc'].name}); run it with "
                  f"[bold]vivado -mode batch -source build.tcl[/] in {args.out}")
    return 0


def cmd_report(args):
    from ..tools.report import make_report
    config = _load(args)
    console = _console()
    only = [x for x in (args.only or "").split(",") if x]
    try:
        path = make_report(config, args.out, console, quick=args.quick, only=only)
    except ValueError as e:
        raise SnicError(str(e)) from None
    console.print(f"wrote [bold]{path}[/]")
    return 0


def cmd_build_board(args):
    import shutil
    from rich.table import Table
    from ..desc.config import load_config
    from ..hw.board.boards import board_config_path, board_named
    from ..tools.board_build import build_board, summary_rows
    board = board_named(args.board)
    if args.loopback:
        config = None
    else:
        path = args.config or board_config_path(board.name)
        if path is None:
            raise SnicError(f"no shipped configuration for board {board.name}: give --config, "
                            f"or --loopback for the MAC alone")
        config = load_config(path)
    console = _console()
    t = time.monotonic()
    with console.status(f"building a bitstream for {board.name}...") as status:
        step = ["starting"]

        def progress(line):
            step[0] = line.rstrip(".")
            console.print(line)
            status.update(f"{step[0]} ({time.monotonic() - t:.0f} s)")

        def phase(text):
            status.update(f"{text} ({time.monotonic() - t:.0f} s)")
        result = build_board(board, config, progress=progress, status=phase, force=args.force)
    table = Table(title=f"{result['design']} on {result['board']}"
                  + (" (cached build)" if result.get("cached") else ""), show_header=False)
    for what, figure in summary_rows(result):
        table.add_row(what, figure)
    console.print(table)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        bit = args.out / f"{result['design']}_{result['board']}.bit"
        shutil.copyfile(result["bitstream"], bit)
        (args.out / f"{result['design']}_{result['board']}.json").write_text(
            json.dumps(result, indent=2) + "\n")
        if result.get("regmap"):
            shutil.copyfile(result["regmap"], args.out / Path(result["regmap"]).name)
        console.print(f"wrote [bold]{bit}[/]")
    if not result["timing_met"]:
        console.print("[yellow]timing: a clock missed its target (the figures above); the "
                      "bitstream may not work at speed[/]")
    return 0


def _lint(verilog_path, console):
    from ..hw.lint import lint
    ok, report = lint(verilog_path)
    console.print(report)
    return 0 if ok else 1


def cmd_lint(args):
    import tempfile
    from ..hw.generate import write_design
    config = _load(args)
    console = _console()
    with tempfile.TemporaryDirectory() as tmp:
        with console.status("generating..."):
            paths = write_design(config, tmp)
        return _lint(paths["verilog"], console)


def cmd_demo(args):
    from ..sim.demo import run_demo
    return run_demo(_load(args), packets=args.packets, seed=args.seed, console=_console())


def cmd_bench(args):
    from ..tools.benchmarks import BENCHMARKS, run_benchmark
    console = _console()
    if not args.name:
        from rich.table import Table
        table = Table(title="benchmarks (snic bench NAME [--json])")
        table.add_column("name")
        table.add_column("what it measures")
        for name, bench in BENCHMARKS.items():
            table.add_row(name, bench.doc)
        console.print(table)
        return 0
    if args.name not in BENCHMARKS:
        _error(f"unknown benchmark {args.name!r} (known: {', '.join(BENCHMARKS)})")
        return 2
    only = [x for x in (args.only or "").split(",") if x]
    if only and args.name not in ("nt", "transform", "formal"):
        _error(f"--only applies to the nt, transform and formal benchmarks, not {args.name!r}")
        return 2
    # The board bench builds the board's own configuration unless one is given.
    config = None if args.name == "board" and args.config is None else _load(args)
    try:
        result = run_benchmark(args.name, config, console=_console(stderr=True),
                               quick=args.quick, only=only)
    except ValueError as e:
        _error(e)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        BENCHMARKS[args.name].show(result, console)
    return 0


def cmd_sweep(args):
    """A benchmark over a grid of parameters, each point one Ray task (tools/sweep.py): one
    JSON file and one PNG plot. Bad input is refused (one line) before Ray starts."""
    from ..cache import cache_root
    from ..tools.sweep import run_sweep, show_sweep, show_sweeps, sweep_request
    if not args.name:
        show_sweeps(_console())
        return 0
    request = sweep_request(args.name, args.grid or [], figure=args.figure, quick=args.quick)
    out = args.out if args.out is not None else cache_root() / "sweeps"
    doc = run_sweep(request, out, address=args.ray_address, console=_console(stderr=True))
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        show_sweep(doc, _console())
        print(f"json: {doc['json']}")
        print(f"plot: {doc['plot'] or 'none (no point has the figure ' + doc['figure'] + ')'}")
    return 1 if any("error" in p for p in doc["points"]) else 0


def cmd_fuzz(args):
    from ..tools.fuzz import failed, run_with_progress, show
    config = _load(args)
    if args.frames < 1 or args.workers < 0:
        _error("--frames must be at least 1 and --workers at least 0")
        return 2
    if args.pcap is not None and not args.pcap.is_file():
        _error(f"no such pcap: {args.pcap}")
        return 2
    replay = "snic fuzz" + (f" --config {args.config}" if args.config else "") + (
        f" --width {args.width}" if args.width != 64 else "")
    console = _console(stderr=args.json)
    try:
        result = run_with_progress(config, args.frames, console, seed=args.seed,
                                   width=args.width, workers=args.workers, out_dir=args.out,
                                   pcap=args.pcap, replay=replay)
    except ValueError as e:
        _error(e)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        show(result, console)
    return 1 if failed(result) else 0


def cmd_device_serve(args):
    from ..sim.vdev.serve import serve_design
    from .server import serve_mapped
    console = _console(stderr=True)

    def announce(line):
        print(line, flush=True)   # one plain line on stdout: scripts wait for it
    board = args.mmap if args.mmap is not None else args.serial
    if board is not None and args.regmap is None:
        _error("--mmap and --serial need --regmap (the design JSON that snic build wrote)")
        return 2
    if board is not None:
        serve_mapped(args.mmap, args.regmap, args.socket, args.port, size=args.map_size,
                     announce=announce, serial=args.serial, baud=args.baud)
        return 0
    config = _load(args)
    # Progress goes to stderr line by line: the first build of a 512-bit NIC takes minutes.
    serve_design(config, args.socket, args.port, progress=console.log, announce=announce)
    return 0


def cmd_status(args):
    import asyncio
    from .client import DeviceClient, SocketBus
    from .status import (StatusError, read_board_counters, read_status, read_tenant_status,
                         render_status, render_tenant_status)
    from .transport import MmapBus

    async def over_socket():
        client = await DeviceClient.connect(args.socket, args.port)
        async with client:
            hello = await client.hello()
            if client.role_kind == "tenant":
                # A tenant's token: its own figures only (the server refuses the rest).
                status = await read_tenant_status(SocketBus(client), hello["regmap"],
                                                  await client.request("access"))
            else:
                status = await read_status(SocketBus(client), hello["regmap"])
                if client.role is not None:
                    status["access"] = await client.request("access")
            status["cycle"] = await client.cycle()
            status["endpoint"] = client.endpoint
            return status

    async def over_board():
        try:
            description = json.loads(args.regmap.read_text())
        except (OSError, ValueError) as e:
            raise StatusError(f"cannot read the design description {args.regmap}: {e}") from None
        if args.serial is not None:
            from .serial_bus import SerialBus
            bus = SerialBus(args.serial, **({"baud": args.baud} if args.baud else {}))
            endpoint = f"serial:{args.serial}"
        else:
            try:
                bus = MmapBus(args.mmap, writable=False)
            except (OSError, ValueError) as e:
                raise StatusError(f"cannot map {args.mmap}: {e}") from None
            endpoint = f"mmap:{args.mmap}"
        with bus:
            status = await read_status(bus, description)
            status["board"] = await read_board_counters(bus, description)
        status["endpoint"] = endpoint
        return status

    board = args.mmap if args.mmap is not None else args.serial
    if board is not None and args.regmap is None:
        _error("--mmap and --serial need --regmap (the design JSON that snic build wrote)")
        return 2
    status = asyncio.run(over_board() if board is not None else over_socket())
    if args.json:
        print(json.dumps(status, indent=2))
    elif status.get("role") == "tenant":
        render_tenant_status(status, _console())
    else:
        render_status(status, _console())
    return 0


def _state_path(args):
    """The control plane's state file: next to the device socket (``<socket>.tenants.json``);
    for a TCP device, ``tcp-<port>.tenants.json`` beside the default socket."""
    from .server import default_socket
    if args.state is not None:
        return args.state
    if args.port is not None:
        return default_socket().parent / f"tcp-{args.port}.tenants.json"
    sock = Path(args.socket or default_socket())
    return sock.with_name(sock.name + ".tenants.json")


async def _grant(client, record):
    """Issue the tenant of ``record`` (a deployed tenant) a token over its regions and keys (a
    new one: an earlier one stops working) and write it owner-only beside the operator's; its
    path, or ``None`` when this connection is not the operator's (only it may grant)."""
    from .access import tenant_token_file, write_token
    if client.role_kind != "operator":
        return None
    token = (await client.request(
        "grant", tenant=record.tenant, regions=sorted({*record.regions, *record.branches}),
        keys=list(record.keys)))["token"]
    return write_token(tenant_token_file(client.endpoint, record.tenant), token)


async def _revoke(client, tenant):
    from .access import tenant_token_file
    if client.role_kind == "operator":
        await client.request("revoke", tenant=tenant)
        tenant_token_file(client.endpoint, tenant).unlink(missing_ok=True)


def _control(args, operation, after=None):
    """Run ``operation(plane)`` on a control plane attached to the served device and return
    its result. Its errors carry their exit codes to :func:`main`: 2 refused before any write
    (bad spec, unknown tenant, not enough regions, a taken key, unsupported design, no device),
    1 failed on the device (a deploy is rolled back)."""
    import asyncio
    from .client import DeviceClient, SocketBus
    from .control import ControlPlane

    async def session():
        client = await DeviceClient.connect(args.socket, args.port)
        async with client:
            hello = await client.hello()
            # A served virtual device advances only when asked: run it between two polls.
            plane = ControlPlane(SocketBus(client), hello["regmap"], _state_path(args),
                                 wait=lambda: client.run(256), timeout=args.timeout)
            result = await operation(plane)
            if after is not None:
                await after(client, plane, result)
            return result

    return asyncio.run(session())


def _region_list(text):
    try:
        return [int(r) for r in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"regions must be comma-separated region numbers, "
                                         f"not {text!r}") from None


def cmd_deploy(args):
    from ..desc.chain import load_chain
    # The file's own errors (a ChainError) come first: a user with a broken spec and no device
    # running is told what is wrong with the file, not to start a device (the control plane
    # loads it again, which is cheap, so it sees exactly the spec that was checked).
    load_chain(args.spec)
    token = {}

    async def grant(client, plane, record):
        token["path"] = await _grant(client, record)

    record = _control(args, lambda plane: plane.deploy(
        args.spec, args.tenant, instances=args.instances, weight=args.weight,
        share=args.share, regions=args.regions), after=grant)
    print(f"deployed {record.chain} as tenant {record.tenant} on regions "
          f"{', '.join(map(str, record.regions))}"
          + (f", split: its branches in linked region(s) "
             f"{', '.join(map(str, record.branches))}" if record.branches else "")
          + (f", time-shared (held until snic switch --region {args.share} --tenant "
             f"{record.tenant})" if args.share is not None else ""))
    if token.get("path"):
        print(f"tenant {record.tenant}'s token (its own blocks only): {token['path']} "
              f"(SNIC_TOKEN_FILE={token['path']} snic status)")
    return 0


def cmd_rebalance(args):
    async def rebalance(plane):
        async def measure():
            # A served virtual device advances only when asked (plane.wait runs 256 cycles).
            for _ in range(max(1, args.cycles // 256)):
                await plane.wait()
        return await plane.rebalance(args.tenant, measure)
    report = _control(args, rebalance)
    print(f"rebalanced tenant {args.tenant}'s flow table over {report['beats']} beats: "
          f"busiest instance {report['imbalance_in_turn']:.3f} of the mean with entries "
          f"in turn, {report['imbalance_balanced']:.3f} now")
    return 0


def cmd_switch(args):
    share = _control(args, lambda plane: plane.switch(args.region, args.tenant))
    print(f"region {args.region}: tenant {args.tenant}'s context loaded (held: "
          f"{', '.join(map(str, sorted(share.contexts))) or 'none'})")
    return 0


def cmd_undeploy(args):
    async def revoke(client, plane, result):
        await _revoke(client, args.tenant)

    _control(args, lambda plane: plane.undeploy(args.tenant), after=revoke)
    print(f"undeployed tenant {args.tenant}")
    return 0


def cmd_scale(args):
    async def regrant(client, plane, record):
        # The tenant's token covers its regions: a new one over the regions it has now.
        await _grant(client, record)

    out = args.command == "scale-out"
    record = _control(args, lambda plane: (plane.scale_out if out else plane.scale_in)(
        args.tenant, args.region), after=regrant)
    print(f"tenant {args.tenant} ({record.chain}) {'given' if out else 'gave up'} region "
          f"{args.region}: it runs on regions {', '.join(map(str, record.regions))}, its flow "
          f"table dealt out over them")
    return 0


def cmd_migrate(args):
    async def regrant(client, plane, report):
        # The tenant's blocks moved with it: a token over its regions now.
        await plane.refresh()
        record = plane.deployed.get(args.tenant)
        if record is not None:
            await _grant(client, record)

    report = _control(args, lambda plane: plane.migrate(args.tenant, args.source, args.target),
                      after=regrant)
    print(f"tenant {args.tenant}: {report['personality']} moved from region "
          f"{report['source']} to region {report['target']} ({report['words']} state "
          f"words) with traffic flowing")
    for warning in report.get("warnings", ()):
        print(f"snic: warning: {warning}", file=sys.stderr)
    return 0


def cmd_state(args):
    """Suspend, resume, capture or restore a region's personality (state-yielding transform)."""
    import asyncio
    from .client import DeviceClient, SocketBus
    from .state import RegionState

    snapshot = None
    if args.action == "restore":
        if args.file is None:
            _error("restore needs a snapshot file (snic state capture --out FILE)")
            return 2
        try:
            snapshot = json.loads(Path(args.file).read_text())
        except (OSError, ValueError) as e:
            raise SnicError(f"cannot read snapshot {args.file}: {e}") from None
    if args.action == "to-model" and args.out is None:
        _error("to-model needs --out FILE (the chain's Python model, pickled)")
        return 2
    if args.action == "from-model":
        if args.file is None:
            _error("from-model needs the file to-model wrote")
            return 2
        import pickle
        try:
            # A pickle runs code when loaded: only load files you wrote (snic state to-model).
            with open(args.file, "rb") as f:
                saved = pickle.load(f)
            snapshot = saved["snapshot"]
        except (OSError, pickle.UnpicklingError, EOFError, KeyError, TypeError) as e:
            raise SnicError(f"cannot read model file {args.file}: {e}") from None

    async def session():
        from ..sim.model_migration import from_model, to_model
        client = await DeviceClient.connect(args.socket, args.port)
        async with client:
            hello = await client.hello()
            region = RegionState(SocketBus(client), hello["regmap"], args.region,
                                 wait=lambda: client.run(256), timeout=args.timeout)
            if args.action == "suspend":
                return await region.suspend(at_boundary=not args.now)
            if args.action == "resume":
                return await region.resume()
            if args.action == "capture":
                return await region.capture()
            if args.action == "traps":
                return await region.service_traps()
            if args.action == "to-model":
                return await to_model(region)
            if args.action == "from-model":
                return await from_model(region, saved["model"], snapshot)
            return await region.restore(snapshot)

    result = asyncio.run(session())
    if args.action == "suspend":
        print(f"region {args.region}: {result} stopped"
              + (" at once" if args.now else " at a packet boundary, drained"))
    elif args.action == "resume":
        print(f"region {args.region}: running")
    elif args.action == "traps":
        for message in result:
            print(message, end="" if message.endswith("\n") else "\n")
    elif args.action == "to-model":
        import pickle
        from rich.table import Table
        model, snap = result
        with open(args.out, "wb") as f:
            pickle.dump({"model": model, "snapshot": snap}, f)
        table = Table(title=f"region {args.region}: {snap['personality']} in the Python model "
                            f"({args.out})")
        table.add_column("node")
        table.add_column("counters")
        for node, nt_model in model.models.items():
            table.add_row(node, ", ".join(f"{k} {v}" for k, v in nt_model.counters().items()))
        _console().print(table)
    elif args.action == "from-model":
        print(f"region {args.region}: {snapshot['personality']} state loaded from the model in "
              f"{args.file}")
    elif args.action == "capture":
        text = json.dumps(result, indent=1)
        if args.out is not None:
            Path(args.out).write_text(text + "\n")
            print(f"region {args.region}: {result['personality']}, {len(result['words'])} "
                  f"words captured to {args.out}")
        else:
            print(text)
    else:
        print(f"region {args.region}: {snapshot['personality']} restored from {args.file} "
              f"({len(snapshot['words'])} words)")
    return 0


def cmd_traffic(args):
    """Send flows or a pcap through the served NIC; report, and keep the output and record."""
    import asyncio
    from ..desc.chain import load_chain
    from ..desc.config import ConfigError
    from .client import DeviceClient, SocketBus
    from .control import ControlPlane
    from .stats import render_stats, traffic_stats
    from .traffic import TrafficError, parse_flow, replay_schedule, run_traffic, write_pcap_out
    from ..sim.flows import make_schedule

    if bool(args.flow) == bool(args.replay):
        _error("give flows (--flow tenant=T,...) or a pcap to replay (--replay FILE)"
               + (", not both" if args.flow else ""))
        return 2
    if args.clock_mhz <= 0:
        _error(f"--clock-mhz must be positive, not {args.clock_mhz}")
        return 2
    if not 0 <= args.backpressure < 1:
        _error(f"--backpressure must be a probability in [0, 1), not {args.backpressure}")
        return 2
    flows = [parse_flow(text) for text in args.flow or ()]
    console = _console(stderr=True)

    async def session():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
        client = await DeviceClient.connect(args.socket, args.port)
        async with client:
            hello = await client.hello()
            description = hello["regmap"]
            if not description.get("regions"):
                raise TrafficError(f"design {hello['design']} is not a multi-tenant NIC")
            plane = ControlPlane(SocketBus(client), description, _state_path(args))
            await plane.refresh()
            targets, weights = {}, {}
            for t, record in plane.deployed.items():
                try:
                    spec = load_chain(record.source)
                except (ConfigError, OSError):
                    spec = None     # the spec file moved: generic traffic with its keys
                targets[t] = {"keys": list(record.keys), "spec": spec}
                weights[str(t)] = record.weight
            cfg = description["config"]
            if flows:
                schedule = make_schedule(flows, targets, cfg["data_width"], hello["ports"],
                                         packets=args.packets, cycles=args.cycles,
                                         seed=args.seed, header_bytes=cfg["header_bytes"])
            else:
                schedule = replay_schedule(args.replay, hello["ports"], args.ingress_port,
                                           args.clock_mhz if args.pcap_timing else None)
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[cycles]:,} cycles"), console=console,
                          transient=True) as bar:
                task = bar.add_task("delivered", total=len(schedule), cycles=0)
                run = await run_traffic(client, description, schedule, progress=lambda done,
                                        total, cycles: bar.update(task, completed=done,
                                                                  cycles=cycles),
                                        backpressure=args.backpressure, seed=args.seed)
            return run, weights

    run, weights = asyncio.run(session())
    record = run.to_json(clock_mhz=args.clock_mhz, weights=weights)
    if args.out is not None:
        write_pcap_out(args.out, run, args.clock_mhz)
    if args.record is not None:
        Path(args.record).write_text(json.dumps(record) + "\n")
    stats = traffic_stats(record)
    if args.json:
        print(json.dumps({k: v for k, v in stats.items() if k != "throughput_series"},
                         indent=2))
    else:
        render_stats(stats, _console(), title=f"snic traffic ({len(run.sent['port']):,} packets"
                                             f" sent)")
        for what, path in (("output", args.out), ("record", args.record)):
            if path is not None:
                print(f"{what}: {path}")
    return 0 if stats["account"]["balanced"] else 1


def cmd_stats(args):
    """Figures of a traffic record, and a plot."""
    from .stats import plot_stats, render_stats, traffic_stats
    try:
        record = json.loads(Path(args.record).read_text())
        stats = traffic_stats(record, args.window)
    except FileNotFoundError:
        raise SnicError(f"traffic record {args.record} does not exist (snic traffic --record "
                        f"FILE writes one)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SnicError(f"cannot read traffic record {args.record}: {type(e).__name__}: {e}"
                        ) from None
    if args.plot is not None:
        plot_stats(record, stats, args.plot)
    if args.json:
        print(json.dumps({k: v for k, v in stats.items() if k != "throughput_series"},
                         indent=2))
    else:
        render_stats(stats, _console(), title=f"{args.record}")
        if args.plot is not None:
            print(f"plot: {args.plot}")
    return 0


def _rack_flows(texts):
    """``--flow TENANT:SPEC`` arguments as ``{tenant: [Flow]}``."""
    from .traffic import parse_flow
    flows = {}
    for text in texts or ():
        name, colon, spec = text.partition(":")
        if not colon or not name:
            raise SnicError(f"--flow {text!r}: give TENANT:SPEC, as alice:rate=0.5,size=imix")
        flows.setdefault(name, []).append(parse_flow(f"tenant=0,{spec}" if spec else
                                                     "tenant=0"))
    return flows


def cmd_rack(args):
    """A rack of sNICs: its description checked, or a run on Ray (sim/rack)."""
    from ..desc.rack import load_rack
    rack = load_rack(args.rack)
    if args.action == "check":
        print(f"rack {rack.name} ({rack.topology}): {len(rack.nics)} sNICs, "
              f"{len(rack.endpoints)} endpoints, {len(rack.tenants)} tenants; clock "
              f"{rack.clock_mhz:g} MHz, switch {rack.switch_cycles} cycles, lockstep window "
              f"{rack.lookahead} cycles")
        for n in rack.nics:
            print(f"  {n.name}: {n.design}, link {n.link_bytes_per_cycle:g} bytes/cycle, "
                  f"{n.link_cycles} cycles")
        for t in rack.tenants:
            print(f"  tenant {t.name}: {t.chain.stem} from {t.endpoint}"
                  + (f" on {t.nic}" if t.nic else ""))
        return 0
    from ..sim.rack.run import render_rack, run_rack
    flows = _rack_flows(args.flow)
    unknown = sorted(set(flows) - {t.name for t in rack.tenants})
    if unknown:
        raise SnicError(f"--flow names tenant {unknown[0]!r}, not in rack {rack.name} (its "
                        f"tenants: {', '.join(t.name for t in rack.tenants)})")
    console = _console(stderr=args.json)
    with console.status(f"rack {rack.name}") as status:
        summary = run_rack(rack, flows, cycles=args.cycles, seed=args.seed,
                           policy=not args.no_policy, address=args.ray_address,
                           ray=not args.local, interval=args.interval, progress=status.update)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        render_rack(summary, _console())
    return 0 if summary["account"]["balanced"] else 1


def cmd_rack_serve(args):
    from ..desc.rack import load_rack
    from ..sim.rack.serve import serve_rack
    config = load_rack(args.rack)
    console = _console(stderr=True)

    def announce(line):
        print(line, flush=True)   # one plain line on stdout: scripts wait for it
    serve_rack(config, args.socket, args.port, address=args.ray_address, ray=not args.local,
               policy=not args.no_policy, interval=args.interval, deploy=args.deploy,
               progress=console.log, announce=announce)
    return 0


def cmd_rack_client(args):
    """`snic rack status|deploy|undeploy|migrate|traffic|stop` against a served rack."""
    from ..sim.rack.run import render_rack
    from .access import write_token
    from .rack_client import rack_connection, tenant_token_file
    action = args.action
    if action == "deploy" and bool(args.tenant) == bool(args.all):
        raise SnicError("give a tenant or --all" + (", not both" if args.all else ""))
    if action == "traffic":
        _rack_flows(args.flow)      # the specs checked here; the rack gets them as text
        flows = {}
        for text in args.flow or ():
            name, _, spec = text.partition(":")
            flows.setdefault(name, []).append(spec)
    with rack_connection(args.socket, args.port) as rack:
        if action == "status":
            summary = rack.request("status")
        elif action == "deploy":
            placed = rack.request("deploy", tenant=args.tenant, all=args.all, nic=args.nic,
                                  instances=args.instances)["placed"]
            for p in placed:
                # The tenant's token (its own traffic and status), owner-only beside the socket.
                path = tenant_token_file(rack.endpoint, p["tenant"])
                write_token(path, rack.request("grant", tenant=p["tenant"])["token"])
                print(f"deployed {p['tenant']} on {p['nic']} as tenant {p['slot']}, regions "
                      f"{', '.join(map(str, p['regions']))}; its token: {path} "
                      f"(SNIC_TOKEN_FILE={path} snic rack status)")
            if not placed:
                print("every tenant is deployed already")
            return 0
        elif action == "undeploy":
            rack.request("undeploy", tenant=args.tenant, nic=args.nic)
            print(f"undeployed {args.tenant} from {args.nic}")
            return 0
        elif action == "migrate":
            report = rack.request("migrate", tenant=args.tenant, to=args.to)
            print(f"moved {args.tenant} from {report['from']} to {report['to']} (region "
                  f"{report['region']}) with its state, {report['held']} packets held "
                  f"meanwhile, in {report['cycles']:,} cycles")
            return 0
        elif action == "stop":
            rack.request("shutdown")
            print("the rack stopped")
            return 0
        else:
            console = _console(stderr=True)
            with console.status(f"{args.cycles:,} cycles of traffic on the rack..."):
                summary = rack.request("traffic", flows=flows, cycles=args.cycles,
                                       seed=args.seed)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        render_rack(summary, _console())
    return 0 if summary["account"]["balanced"] else 1


def _control_arguments(p):
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", type=Path,
                       help="device server's Unix socket (default: $SNIC_CACHE/run/device.sock)")
    where.add_argument("--port", type=int, help="device server's TCP port on 127.0.0.1")
    p.add_argument("--state", type=Path,
                   help="tenant state file (default: next to the socket, <socket>.tenants.json)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds a region load, table commit or drain may take (default 30)")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="snic", description=(
        "Generator and simulator for multi-tenant FPGA SmartNICs."))
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="write the Verilog and register map of a design, or "
                                     "with --board a bitstream")
    p.add_argument("--config", type=Path, help="design TOML (default: the shipped default.toml; "
                                                "with --board the board's, chains/boards/)")
    p.add_argument("--out", type=Path, help="output directory")
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only -Wall")
    p.add_argument("--board", help="build a bitstream for this board with YoWASP Yosys, "
                                   "nextpnr-ecp5 and ecppack (boards: ecpix5_85, ecpix5_45)")
    p.add_argument("--loopback", action="store_true",
                   help="with --board: the Ethernet MAC echoing frames, no NIC")
    p.add_argument("--force", action="store_true", help="with --board: build again, not from "
                                                         "the cache")
    p.add_argument("--vivado", metavar="CARD", help="with --out: also a Vivado non-project Tcl "
                   "script and constraints for an AMD card or part (u250, u280, u55c, zcu102)")
    p.add_argument("--clock-mhz", type=float, default=250.0,
                   help="with --vivado: the clock to close timing at (default 250)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("report", help="run the benchmarks and write one Markdown report with "
                                      "plots, every figure beside its goal and baseline")
    p.add_argument("--config", type=Path, help="design TOML (default: the shipped default.toml)")
    p.add_argument("--out", type=Path, default=Path("report"), help="output directory (report)")
    p.add_argument("--quick", action="store_true", help="each benchmark's short run")
    p.add_argument("--only", help="comma-separated sections (board, parser, latency, fairness, "
                                  "scaling, transform, device, rack)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("lint", help="lint the generated Verilog with verilator -Wall")
    p.add_argument("--config", type=Path)
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("demo", help="simulate mixed traffic through the design, check the model")
    p.add_argument("--config", type=Path)
    p.add_argument("--packets", type=int, default=4000)
    p.add_argument("--seed", type=int, default=2026)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("bench", help="list benchmarks, or run one")
    p.add_argument("name", nargs="?")
    p.add_argument("--config", type=Path)
    p.add_argument("--json", action="store_true", help="print one JSON object of figures")
    p.add_argument("--quick", action="store_true", help="fewer packets (for smoke tests)")
    p.add_argument("--only", metavar="NAMES",
                   help="nt, transform: comma-separated NT kinds (nt: and chain names) to run; "
                   "formal: property names")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("sweep", help="list sweepable benchmarks, or run one over a grid of "
                                     "parameters, each point a Ray task")
    p.add_argument("name", nargs="?", help="fairness or scaling (none: list them)")
    p.add_argument("--grid", action="append", metavar="P=V1,V2,...",
                   help="a parameter's values (integers also A..B); repeat for more: the grid "
                        "is their product")
    p.add_argument("--figure", help="the figure to plot (default: the benchmark's)")
    p.add_argument("--out", type=Path,
                   help="where NAME.json and NAME.png go (default: $SNIC_CACHE/sweeps)")
    p.add_argument("--json", action="store_true", help="print the sweep's JSON document")
    p.add_argument("--quick", action="store_true", help="each point as snic bench --quick")
    p.add_argument("--ray-address", metavar="ADDR",
                   help="join this Ray cluster (e.g. auto, ray://head:10001; default: start "
                        "a Ray on this machine, one CPU per core)")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("fuzz", help="random and mutated frames through the parser on the "
                       "virtual device and the model, every metadata field compared")
    p.add_argument("--config", type=Path, help="design TOML: its parser parameters")
    p.add_argument("--frames", type=int, default=100_000, help="frames to send (default 100,000)")
    p.add_argument("--seed", type=int, default=1, help="campaign seed (default 1)")
    p.add_argument("--width", type=int, choices=(64, 128, 256, 512), default=64,
                   help="data width of the parser build (default 64)")
    p.add_argument("--pcap", type=Path, help="send the frames of this pcap instead (replays a "
                   "saved mismatch)")
    p.add_argument("--out", type=Path, help="where mismatching frames are saved as pcaps "
                   "(default: the cache's fuzz/)")
    p.add_argument("--workers", type=int, default=2,
                   help="processes drawing frames and running the model (default 2)")
    p.add_argument("--json", action="store_true", help="print one JSON object of figures")
    p.set_defaults(func=cmd_fuzz)

    p = sub.add_parser("device", help="run a virtual device that drivers attach to")
    device_sub = p.add_subparsers(dest="device_command", required=True)
    p = device_sub.add_parser("serve", help="build a design into a virtual device and serve it")
    p.add_argument("--config", type=Path, help="design TOML (default: the shipped default.toml)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", type=Path,
                       help="Unix socket (default: $SNIC_CACHE/run/device.sock)")
    where.add_argument("--port", type=int, help="TCP port on 127.0.0.1 instead (0: any free)")
    p.add_argument("--mmap", type=Path,
                   help="serve a board's registers instead: its BAR (e.g. /sys/bus/pci/devices/"
                        ".../resource0), tenants checked as on a virtual device; needs --regmap")
    p.add_argument("--serial", metavar="PORT", help="serve a board's registers over its UART "
                   "bridge instead (/dev/ttyUSB1, or a pyserial URL); needs --regmap")
    p.add_argument("--baud", type=int, help="with --serial: the bridge's baud rate (1,000,000)")
    p.add_argument("--regmap", type=Path, help="with --mmap or --serial: the design JSON snic "
                                               "build wrote")
    p.add_argument("--map-size", type=int, help="with --mmap: bytes to map (a device file "
                                                "reports size 0)")
    p.set_defaults(func=cmd_device_serve)

    p = sub.add_parser("status", help="regions, tenants and counters of a running design")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--socket", type=Path,
                       help="device server's Unix socket (default: $SNIC_CACHE/run/device.sock)")
    where.add_argument("--port", type=int, help="device server's TCP port on 127.0.0.1")
    where.add_argument("--mmap", type=Path, metavar="FILE",
                       help="a memory-mapped register space (a BAR's sysfs resource0 file)")
    where.add_argument("--serial", metavar="PORT",
                       help="a board's UART register bridge (/dev/ttyUSB1, or a pyserial URL)")
    p.add_argument("--baud", type=int, help="with --serial: the bridge's baud rate (1,000,000)")
    p.add_argument("--regmap", type=Path, help="with --mmap or --serial: the design JSON of "
                                               "snic build")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("deploy", help="deploy a tenant's chain onto free regions of the NIC")
    p.add_argument("spec", type=Path, help="chain specification (TOML)")
    p.add_argument("--tenant", type=int, required=True, help="tenant id (0 to nic.tenants-1)")
    p.add_argument("--instances", type=int, default=1, help="regions to run it in (default 1)")
    p.add_argument("--weight", type=float, default=1.0, help="scheduling weight (default 1)")
    p.add_argument("--share", type=int, metavar="REGION",
                   help="time-share this region with the tenant(s) running the same chain "
                        "there (needs nic.yieldable; see snic switch)")
    p.add_argument("--regions", type=_region_list, metavar="R,R,...",
                   help="the free regions to run it in (instead of --instances)")
    _control_arguments(p)
    p.set_defaults(func=cmd_deploy)

    for name, text in (("scale-out", "give a deployed tenant's chain one more instance in a "
                                     "free region"),
                       ("scale-in", "take one of a deployed tenant's instances away")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--tenant", type=int, required=True, help="tenant id")
        p.add_argument("--region", type=int, required=True, help="the region")
        _control_arguments(p)
        p.set_defaults(func=cmd_scale)

    p = sub.add_parser("switch", help="load a tenant's context in a time-shared region")
    p.add_argument("--region", type=int, required=True, help="the time-shared region")
    p.add_argument("--tenant", type=int, required=True, help="the tenant to run there")
    _control_arguments(p)
    p.set_defaults(func=cmd_switch)

    p = sub.add_parser("undeploy", help="remove a tenant and free its regions")
    p.add_argument("--tenant", type=int, required=True, help="tenant id")
    _control_arguments(p)
    p.set_defaults(func=cmd_undeploy)

    p = sub.add_parser("state", help="suspend, resume, capture or restore a region's chain, "
                                     "or serve its Print traps (needs nic.yieldable)")
    p.add_argument("action", choices=("suspend", "resume", "capture", "restore", "traps",
                                      "to-model", "from-model"),
                   help="traps: print the messages of Prints that trapped, and run on; "
                        "to-model: the chain's Python model holding the state (pickled to "
                        "--out); from-model: load such a model's state back")
    p.add_argument("file", nargs="?", help="restore: the snapshot file capture wrote; "
                                           "from-model: the file to-model wrote")
    p.add_argument("--region", type=int, required=True, help="region index")
    p.add_argument("--now", action="store_true",
                   help="suspend: stop at once, not at the next packet boundary")
    p.add_argument("--out", type=Path, help="capture: write the snapshot here (JSON); "
                                            "to-model: write the model here (pickle)")
    _control_arguments(p)
    p.set_defaults(func=cmd_state)

    # `snic suspend` and `snic resume`: short for `snic state suspend|resume`.
    for action, text in (("suspend", "stop a region's chain (at a packet boundary, drained)"),
                         ("resume", "run a suspended region's chain again")):
        p = sub.add_parser(action, help=text + " (snic state " + action + ")")
        p.add_argument("--region", type=int, required=True, help="region index")
        if action == "suspend":
            p.add_argument("--now", action="store_true",
                           help="stop at once, not at the next packet boundary")
        _control_arguments(p)
        p.set_defaults(func=cmd_state, action=action, file=None, out=None)
        if action == "resume":
            p.set_defaults(now=False)

    p = sub.add_parser("rebalance", help="spread a tenant's flow-table entries over its "
                                         "instances by their measured load")
    p.add_argument("--tenant", type=int, required=True)
    p.add_argument("--cycles", type=int, default=100_000,
                   help="cycles of traffic to measure the entries' load over (default 100000)")
    _control_arguments(p)
    p.set_defaults(func=cmd_rebalance)

    p = sub.add_parser("migrate", help="move a tenant's chain instance to a free region with "
                                       "its state, traffic flowing (needs nic.yieldable)")
    p.add_argument("--tenant", type=int, required=True, help="tenant id")
    p.add_argument("--from", dest="source", type=int, required=True, help="region it runs in")
    p.add_argument("--to", dest="target", type=int, required=True,
                   help="a free region able to host its chain")
    _control_arguments(p)
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("traffic", help="send flows per tenant or a pcap through the served NIC, "
                                       "capture the output")
    p.add_argument("--flow", action="append", metavar="tenant=T[,rate=R,size=S,port=P,...]",
                   help="a flow: tenant, rate (fraction of line rate or N%%, default 1), size "
                        "(bytes, LO-HI, imix, mixed; default 64), port (default T mod ports), "
                        "packets, flows (distinct 5-tuples, 16), key, malformed (fraction); "
                        "repeat for more")
    p.add_argument("--replay", type=Path, help="a pcap to send instead of flows")
    p.add_argument("--ingress-port", type=int, help="port for --replay (default: alternate)")
    p.add_argument("--pcap-timing", action="store_true",
                   help="pace --replay by the file's timestamps at --clock-mhz")
    p.add_argument("--packets", type=int, default=1000, help="packets per flow (default 1000)")
    p.add_argument("--cycles", type=int, help="instead of --packets: what each flow's rate "
                                               "fits into this many cycles")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--backpressure", type=float, default=0.0, metavar="P",
                   help="the receiver is not ready in a cycle with probability P (default 0)")
    p.add_argument("--clock-mhz", type=float, default=250.0,
                   help="clock for Gbit/s and pcap timestamps (default 250)")
    p.add_argument("--out", type=Path, help="write the delivered packets to this pcap")
    p.add_argument("--record", type=Path, help="write the run's record (for snic stats)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    _control_arguments(p)
    p.set_defaults(func=cmd_traffic)

    p = sub.add_parser("stats", help="throughput, latency and fairness of a traffic record")
    p.add_argument("record", type=Path, help="the file snic traffic --record wrote")
    p.add_argument("--window", type=int, help="cycles per window (default: 1/40 of the run)")
    p.add_argument("--plot", type=Path, help="write a PNG: throughput, latency CDF, fairness")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("rack", help="a rack of sNICs on Ray: check, run or serve a rack.toml, "
                                    "and drive a served one")
    rack_sub = p.add_subparsers(dest="action", required=True)
    p = rack_sub.add_parser("check", help="check a rack.toml and say what it describes")
    p.add_argument("rack", type=Path, help="the rack description (rack.toml)")
    p.set_defaults(func=cmd_rack)

    def ray_arguments(p):
        p.add_argument("--interval", type=int, default=5_000,
                       help="cycles between the pool policy's looks at the reports")
        p.add_argument("--no-policy", action="store_true",
                       help="an intermediate pool without its redirect policy")
        where = p.add_mutually_exclusive_group()
        where.add_argument("--ray-address", help="join this Ray cluster (default: start a "
                                                 "local Ray)")
        where.add_argument("--local", action="store_true",
                           help="every sNIC in this process, no Ray")

    def flow_arguments(p, default):
        p.add_argument("--flow", action="append",
                       help="TENANT:SPEC, a flow as snic traffic's without tenant= (rate is a "
                            "fraction of the tenant's endpoint link); repeat; default for each "
                            f"{default} tenant: rate=0.5,size=64-1500")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = rack_sub.add_parser("run", help="deploy every tenant, run their traffic, report")
    p.add_argument("rack", type=Path, help="the rack description (rack.toml)")
    flow_arguments(p, "")
    p.add_argument("--cycles", type=int, default=50_000, help="cycles of traffic offered")
    ray_arguments(p)
    p.set_defaults(func=cmd_rack)

    def rack_endpoint(p):
        where = p.add_mutually_exclusive_group()
        where.add_argument("--socket", type=Path,
                           help="the rack's Unix socket (default: $SNIC_CACHE/run/rack.sock)")
        where.add_argument("--port", type=int, help="the rack's TCP port on 127.0.0.1")

    p = rack_sub.add_parser("serve", help="start a rack (Ray local by default) and serve it "
                                          "to snic rack status, deploy, migrate, traffic")
    p.add_argument("rack", type=Path, help="the rack description (rack.toml)")
    rack_endpoint(p)
    p.add_argument("--deploy", action="store_true",
                   help="deploy every tenant where the rack places it before serving")
    ray_arguments(p)
    p.set_defaults(func=cmd_rack_serve)
    p = rack_sub.add_parser("status", help="a served rack: per sNIC its regions, tenants, "
                                           "loads and redirects; per tenant its packets")
    rack_endpoint(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_rack_client)
    p = rack_sub.add_parser("deploy", help="deploy a tenant of the served rack onto an sNIC "
                                           "(default: where the rack places it)")
    p.add_argument("tenant", nargs="?", help="a tenant of the rack.toml")
    p.add_argument("--all", action="store_true", help="every tenant not yet deployed")
    p.add_argument("--nic", help="the sNIC (default: the rack's placement)")
    p.add_argument("--instances", type=int, help="instances (default: the rack.toml's)")
    rack_endpoint(p)
    p.set_defaults(func=cmd_rack_client)
    p = rack_sub.add_parser("undeploy", help="remove a tenant's instance from an sNIC")
    p.add_argument("tenant")
    p.add_argument("--nic", required=True)
    rack_endpoint(p)
    p.set_defaults(func=cmd_rack_client)
    p = rack_sub.add_parser("migrate", help="move a tenant's instance to another sNIC with its "
                                            "state, traffic flowing")
    p.add_argument("tenant")
    p.add_argument("--to", required=True, help="the sNIC it moves to")
    rack_endpoint(p)
    p.set_defaults(func=cmd_rack_client)
    p = rack_sub.add_parser("traffic", help="offer flows to the served rack's tenants, run "
                                            "until drained, report")
    flow_arguments(p, "deployed")
    p.add_argument("--cycles", type=int, default=20_000, help="cycles of traffic offered")
    rack_endpoint(p)
    p.set_defaults(func=cmd_rack_client)
    p = rack_sub.add_parser("stop", help="stop the served rack (its Ray actors end)")
    rack_endpoint(p)
    p.set_defaults(func=cmd_rack_client)

    # `snic resources` hands its arguments to the tool as they are (it has its own parser).
    sub.add_parser("resources", add_help=False,
                   help="LUT/FF/BRAM/DSP per NT from YoWASP Yosys (snic resources --help)")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["resources"]:
        from ..tools.resources import main as resources_main
        return resources_main(argv[1:], prog="snic resources")

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SnicError as e:      # the one place an error becomes a message and an exit code
        _error(e)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
