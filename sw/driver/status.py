"""What a running design is doing, read through any register bus (read-only).

:func:`read_status` discovers the blocks, refuses a design whose block versions this driver
does not know (:class:`~supernic.driver.discovery.UnsupportedDesignError`), checks that the
design JSON describes the blocks it found, and reads:

- ``ports``: per ingress port the parser's ``packets``/``bytes``/``malformed`` and, in the NIC,
  the classifier's ``packets``/``unmatched``/``dropped``;
- ``tenants`` (NIC only): enabled bit, queue backlog, enqueued, dispatched and in-flight
  packets from the ``scheduler`` block, queue and disabled drops, delivered and dropped from
  the ``egress`` block;
- ``regions`` (NIC only): the active personality by name (from the design JSON's
  ``regions``), online, loads, packets in and out, and packets in flight from the ``store``;
- ``store`` (NIC only): ``drops``, packets dropped whole because the packet store was full,
  ``stall_drops``, packets dropped because their region stopped taking beats, and
  ``stall_cuts``, packets that left cut short because their region stopped giving beats (the
  regions' ``stalled`` says which is cut off now), ``misrouted``, packets dispatched to a
  region the NIC does not have (dropped), and ``header_errors``, header-only packets whose
  region changed the header by part of a beat (sent with ``keep_error``).

A section whose blocks the design lacks (the parser-only design has no scheduler or regions)
is ``None`` and named in ``absent``, with the reason, rather than failing.
"""

from ..desc.errors import SnicError
from .discovery import check_supported, discover

__all__ = ["StatusError", "read_status", "read_board_counters", "render_status",
           "read_tenant_status",
           "render_tenant_status"]


class StatusError(SnicError):
    """The design JSON does not describe the device on the bus."""


class _Registers:
    """Reads registers by block and name through the design JSON, lo word first (the order
    in which the register file latches a 64-bit counter atomically)."""

    def __init__(self, bus, description):
        self.bus = bus
        self.blocks = {b["name"]: {r["name"]: r for r in b["registers"]}
                       for b in description["registers"]["blocks"]}

    def has(self, block, reg=None):
        return block in self.blocks and (reg is None or reg in self.blocks[block])

    async def read(self, block, reg):
        """The register's value, or ``None`` if this version of the block lacks it."""
        if not self.has(block, reg):
            return None
        r = self.blocks[block][reg]
        value = 0
        for part in range(r["words"]):
            value |= await self.bus.read32(r["address"] + 4 * part) << (32 * part)
        return value & ((1 << r["width"]) - 1)

    async def read_many(self, block, names, prefix=""):
        return {name: await self.read(block, prefix + name) for name in names}


def _match(blocks, description):
    """Pair discovered blocks with the design JSON's, by base address and type."""
    described = {b["base"]: b for b in description["registers"]["blocks"]}
    for block in blocks:
        entry = described.get(block.base)
        if entry is None or entry["type"] != block.type_id:
            what = (f"type {entry['type']:#010x} ({entry['name']})" if entry
                    else "no block there")
            raise StatusError(f"the design description does not match the device: block at "
                              f"{block.base:#010x} is type {block.type_id:#010x}, the "
                              f"description has {what}")
    found = {b.base for b in blocks}
    missing = [b["name"] for b in description["registers"]["blocks"] if b["base"] not in found]
    if missing:
        raise StatusError(f"the design description does not match the device: blocks "
                          f"{', '.join(missing)} are not on the device")


_PARSER = ("packets", "bytes", "malformed")
_CLASSIFIER = ("packets", "unmatched", "dropped")
_REGION = ("personalities", "active", "online", "header_only", "loads", "packets_in",
           "packets_out", "offline_cycles")


async def read_status(bus, description):
    """The state of the design on ``bus``, which ``description`` (the design JSON of
    ``hw.generate.design_description``, as ``snic build`` writes it and the device server's
    ``hello`` returns it) describes. Returns a JSON-serialisable dict."""
    blocks = await discover(bus)
    unknown = check_supported(blocks)
    _match(blocks, description)
    regs = _Registers(bus, description)
    status = {"design": {"name": description.get("top"),
                         "blocks": len(blocks),
                         "unknown_blocks": [f"{b.type_id:#010x}@{b.base:#x}" for b in unknown]},
              "ports": [], "tenants": None, "regions": None, "absent": {}}
    design = status["design"]
    if regs.has("id"):
        design.update(await regs.read_many("id", ("build_id", "design_version", "data_width",
                                                  "header_bytes")))
        expected = description.get("build_id")
        design["build_id_matches"] = expected is None or expected == design["build_id"]

    nic = await regs.read_many("nic", ("tenants", "ports", "regions")) if regs.has("nic") \
        else None
    design["nic"] = nic
    if regs.has("parser"):
        parsers = [("parser", "classifier")]
    else:
        count = nic["ports"] if nic else sum(1 for n in regs.blocks if n.startswith("parser"))
        parsers = [(f"parser{p}", f"classifier{p}") for p in range(count)]
    for port, (parser, classifier) in enumerate(parsers):
        status["ports"].append({
            "port": port,
            "parser": await regs.read_many(parser, _PARSER) if regs.has(parser) else None,
            "classifier": (await regs.read_many(classifier, _CLASSIFIER)
                           if regs.has(classifier) else None)})

    if regs.has("scheduler"):
        tenants = nic["tenants"] if nic else description["config"]["tenants"]
        enable = await regs.read("scheduler", "tenant_enable") or 0
        status["policy"] = await regs.read("scheduler", "policy")
        status["tenants"] = []
        for t in range(tenants):
            row = {"tenant": t, "enabled": bool(enable >> t & 1)}
            row.update(await regs.read_many("scheduler", (
                "backlog_beats", "enqueued", "dispatched", "in_flight", "queue_drops",
                "disabled_drops"), prefix=f"t{t}_"))
            if regs.has("egress"):
                row.update(await regs.read_many("egress", ("delivered", "dropped"),
                                                prefix=f"t{t}_"))
            status["tenants"].append(row)
    else:
        status["absent"]["tenants"] = "no scheduler block: not a multi-tenant NIC design"

    if regs.has("store", "drops"):
        status["store"] = {"drops": await regs.read("store", "drops")}
        if regs.has("store", "stall_drops"):   # a build before the stall watchdog has none
            status["store"].update(await regs.read_many("store", ("stall_drops", "stall_cuts")))
        if regs.has("store", "misrouted"):     # store 1.2
            status["store"].update(await regs.read_many("store", ("misrouted",
                                                                  "header_errors")))

    region_names = sorted((n for n in regs.blocks if n.startswith("region")
                           and n[len("region"):].isdigit()), key=lambda n: int(n[6:]))
    if region_names:
        personalities = description.get("regions") or []
        status["regions"] = []
        for name in region_names:
            r = int(name[len("region"):])
            row = {"region": r}
            row.update(await regs.read_many(name, _REGION))
            row["online"] = bool(row["online"])
            names = [p["name"] for p in personalities[r]] if r < len(personalities) else []
            active = row["active"]
            row["personality"] = (names[active] if active is not None and active < len(names)
                                  else None)
            row["in_flight"] = await regs.read("store", f"r{r}_in_flight")
            if regs.has("store", f"r{r}_stalled"):
                row["stalled"] = bool(await regs.read("store", f"r{r}_stalled"))
            # A link's primary (hw/nic/link.py): the branch region, while linked.
            if regs.has(name, "linked") and await regs.read(name, "linked"):
                row["linked_to"] = await regs.read(name, "link_branch")
            status["regions"].append(row)
    else:
        status["absent"]["regions"] = "no region blocks: not a multi-tenant NIC design"
    return status


async def read_tenant_status(bus, description, report):
    """What one tenant may see of the design on ``bus``: its own row of the tenants table
    (scheduler and egress figures named for it), its regions' in-flight counts, and every
    register of its own blocks. ``report`` is the device server's ``access`` answer for the
    tenant's connection (tenant, regions, blocks). No other tenant's figure is read: the
    server would refuse it (:mod:`supernic.driver.access`)."""
    regs = _Registers(bus, description)
    t = report["tenant"]
    row = {"tenant": t}
    for block, names in (("scheduler", ("backlog_beats", "enqueued", "dispatched", "in_flight",
                                        "queue_drops", "disabled_drops")),
                         ("egress", ("delivered", "dropped"))):
        if regs.has(block):
            row.update(await regs.read_many(block, names, prefix=f"t{t}_"))
    status = {"design": {"name": description.get("top")}, "role": "tenant", "tenant": t,
              "tenants": [row], "regions": [], "blocks": {},
              "denials": report.get("denials", 0)}
    for r in report["regions"]:
        status["regions"].append({"region": r, "in_flight": await regs.read(
            "store", f"r{r}_in_flight")})
    for block in report["blocks"]:
        status["blocks"][block] = {name: await regs.read(block, name)
                                   for name in regs.blocks.get(block, {})}
    return status


def render_tenant_status(status, console):
    """Print a tenant's ``status`` (from :func:`read_tenant_status`)."""
    from rich.table import Table
    console.print(f"[bold]{status['design']['name']}[/], tenant {status['tenant']}"
                  + (f", cycle {status['cycle']:,}" if "cycle" in status else "")
                  + f", regions {', '.join(str(r['region']) for r in status['regions'])}"
                  + f", {status['denials']} request(s) of this tenant denied")
    row = status["tenants"][0]
    table = Table(title="this tenant")
    for key in row:
        table.add_column(key.replace("_", " "), justify="right")
    table.add_row(*[_cell(v) for v in row.values()])
    console.print(table)
    table = Table(title="its blocks")
    for column in ("block", "register", "value"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for block, values in status["blocks"].items():
        for name, value in values.items():
            table.add_row(block, name, _cell(value))
    console.print(table)


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:,}" if isinstance(value, int) else str(value)


async def read_board_counters(bus, description):
    """A board's own counters (the MAC's and the UART bridge's), the words the design JSON's
    ``board`` section names from its ``base`` (the bridge answers them: hw/board/top.py);
    ``{}`` for a design without one."""
    board = description.get("board")
    if not board:
        return {}
    return {name: await bus.read32(board["base"] + 4 * k)
            for k, name in enumerate(board["registers"])}


def render_status(status, console):
    """Print ``status`` (from :func:`read_status`) as rich tables on ``console``."""
    from rich.table import Table

    design = status["design"]
    line = f"[bold]{design.get('name')}[/]"
    if "data_width" in design:
        line += (f", {design['data_width']}-bit, build {design['build_id']:#010x}"
                 + ("" if design.get("build_id_matches", True)
                    else " [red](the description says another build)[/]"))
    if "cycle" in status:
        line += f", cycle {status['cycle']:,}"
    line += f", {design['blocks']} register blocks"
    if design["unknown_blocks"]:
        line += f" ({len(design['unknown_blocks'])} of unknown type)"
    console.print(line)

    table = Table(title="ports")
    columns = [("port", None, "port"), ("packets", "parser", "packets"),
               ("bytes", "parser", "bytes"), ("malformed", "parser", "malformed"),
               ("classified", "classifier", "packets"),
               ("unmatched", "classifier", "unmatched"), ("cls dropped", "classifier", "dropped")]
    has_classifier = any(p["classifier"] for p in status["ports"])
    columns = [c for c in columns if c[1] != "classifier" or has_classifier]
    for title, *_ in columns:
        table.add_column(title, justify="right")
    for port in status["ports"]:
        table.add_row(*[_cell(port[key] if block is None else (port[block] or {}).get(key))
                        for _, block, key in columns])
    console.print(table)

    if status["tenants"] is not None:
        table = Table(title="tenants")
        keys = ("tenant", "enabled", "backlog_beats", "enqueued", "dispatched", "in_flight",
                "delivered", "dropped", "queue_drops", "disabled_drops")
        for key in keys:
            table.add_column(key.replace("_", " "), justify="right")
        for row in status["tenants"]:
            table.add_row(*[_cell(row.get(key)) for key in keys])
        console.print(table)
    if status["regions"] is not None:
        table = Table(title="regions")
        keys = ("region", "personality", "online", "loads", "packets_in", "packets_out",
                "in_flight")
        if any("stalled" in row for row in status["regions"]):
            keys += ("stalled",)
        if any("linked_to" in row for row in status["regions"]):
            keys += ("linked_to",)
        for key in keys:
            table.add_column(key.replace("_", " "), justify="right")
        for row in status["regions"]:
            table.add_row(*[_cell(row.get(key)) for key in keys])
        console.print(table)
    if status.get("store"):
        store = status["store"]
        console.print(f"store: {store['drops']:,} packets dropped (store full)"
                      + (f", {store['stall_drops']:,} (region stalled); "
                         f"{store['stall_cuts']:,} left cut short (region stalled)"
                         if "stall_drops" in store else "")
                      + (f"; {store['misrouted']:,} misrouted (no such region), "
                         f"{store['header_errors']:,} header errors"
                         if "misrouted" in store else ""))
    if status.get("board"):
        table = Table(title="board (Ethernet MAC, UART bridge)")
        table.add_column("counter")
        table.add_column("value", justify="right")
        for name, value in status["board"].items():
            table.add_row(name, f"{value:,}")
        console.print(table)
    for section, reason in status["absent"].items():
        console.print(f"{section}: absent ({reason})")
    access = status.get("access")
    if access:
        denials = access.get("denials") or {}
        grants = access.get("tenants") or {}
        console.print(
            "access: " + (", ".join(f"{n:,} denied to {role}" for role, n in
                                    sorted(denials.items())) or "nothing denied")
            + "; tenant tokens: " + (", ".join(
                f"tenant {t} (regions {', '.join(map(str, g['regions']))})"
                for t, g in grants.items()) or "none"))
