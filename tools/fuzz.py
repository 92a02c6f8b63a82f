"""The parser fuzz campaign behind ``snic fuzz`` and ``snic bench fuzz``.

Frames from :mod:`supernic.sim.fuzz` (random header stacks plus mutations) go through the
generated parser on the virtual device and through the reference model; every metadata field
of every frame (on its first and its last beat, the ingress timestamp included) and its bytes
are compared. Work is split into chunks of :data:`CHUNK` frames: worker processes draw the
frames and run the model while this process runs the device, so the two cores both work.

Each chunk runs from a reset with its own idle and backpressure pattern, under a cycle cap
from its beat count: a chunk that does not drain is a hang, reported with the first frame that
did not come out. After each chunk the parser's own counters are read over AXI4-Lite, so the
account (frames in, frames out, bytes, malformed) is checked against the model as well.

A mismatch is written as a one-frame pcap named after the campaign seed and frame index, and
printed as the command that replays it (``snic fuzz --pcap FILE``). Coverage says which
mutations, flags, header paths and walk states (step, header, layer) the run reached, against
the states the reach analysis (hw/parser/reach.py) says a walk can be in.
"""

import math
import multiprocessing
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..desc.config import DesignConfig
from ..desc.meta import FLAGS, TAIL_FLAGS
from ..hw.parser.reach import walk_reach
from ..sim.fuzz import fuzz_frames
from ..sim.layout_codec import decode, diff, encode
from ..sim.parser_model import ParserModel, is_error

__all__ = ["CHUNK", "run_campaign", "parser_config", "expectations"]

#: Frames per chunk: one device run, one counter read, one unit of work for a worker.
CHUNK = 2000
#: (idle, backpressure) probabilities of successive chunks: back to back, random, a slow sink.
PATTERNS = ((0.0, 0.0), (0.3, 0.3), (0.05, 0.7))
#: A chunk may take this many cycles per beat (plus a constant) before it counts as a hang;
#: the slowest pattern needs about 1 / (1 - 0.7) = 3.3.
CYCLES_PER_BEAT_CAP = 12
#: Mismatching frames written as pcaps (all are counted).
MAX_SAVED = 20


def parser_config(config, width):
    """The parser alone with ``config``'s parser parameters at ``width`` bits."""
    return DesignConfig(data_width=width, header_bytes=config.header_bytes,
                        walk_steps=config.walk_steps, ext_headers=config.ext_headers,
                        header_checksum=config.header_checksum)


def _path(trace):
    """A header path as text: names in walk order, ``|`` where the walk enters a tunnel."""
    parts, layer = [], 0
    for _step, name, lay, _off in trace:
        if lay != layer:
            parts.append("|")
            layer = lay
        parts.append(name)
    return " ".join(parts)


def expectations(model, frames):
    """What the parser must give for each ``(mutation, frame)``: ``(mutation, frame, last,
    first, error)`` with the last- and first-beat metadata encoded (timestamp 0), and the
    coverage of the frames: mutations, flags, paths and walk states met."""
    layout = model.layout
    out = []
    cover = {"mutations": Counter(), "flags": Counter(), "paths": Counter(), "states": set()}
    for mutation, frame in frames:
        trace = []
        # An empty frame crosses AXI4-Stream as one beat with no byte kept, which breaks the
        # stream contract the parser checks (hw/parser/parser.py: a last beat keeps a byte).
        meta = model.parse(frame, keep_error=not frame, trace=trace)
        last = encode(layout, meta)
        error = is_error(meta)
        for flag in TAIL_FLAGS:
            meta["flags"][flag] = 0
        first = encode(layout, meta)
        out.append((mutation, frame, last, first, error))
        cover["mutations"][mutation] += 1
        for flag, v in decode(layout, last)["flags"].items():
            if v:
                cover["flags"][flag] += 1
        cover["paths"][_path(trace)] += 1
        cover["states"].update((step, name, lay) for step, name, lay, _ in trace)
    return out, cover


_MODELS = {}


def _chunk_work(args):
    """Worker: draw chunk frames and the model's answers."""
    seed, start, count, model_args = args
    model = _MODELS.get(model_args)
    if model is None:
        model = _MODELS[model_args] = ParserModel(*model_args)
    return expectations(model, fuzz_frames(seed, start, count, model, model_args[2]))


class _Campaign:
    def __init__(self, device, model, out_dir, seed, replay):
        self.device, self.model, self.out_dir = device, model, Path(out_dir)
        self.seed, self.replay = seed, replay
        layout = model.layout
        self.layout = layout
        self.ts_shift = dict(iter(layout))["ts"].offset
        self.lane_bytes = device.data_width // 8
        blocks = {b["name"]: {r["name"]: r for r in b["registers"]}
                  for b in device.regmap["registers"]["blocks"]}
        self.counters = {n: blocks["parser"][n]["address"] for n in ("packets", "bytes",
                                                                      "malformed")}
        self.figures = {
            "frames": 0, "delivered": 0, "mismatches": 0, "hangs": 0, "lost": 0, "cycles": 0,
            "bytes_in": 0, "model_errors": 0,
            "counted": {"packets": 0, "bytes": 0, "malformed": 0},
        }
        self.cover = {"mutations": Counter(), "flags": Counter(), "paths": Counter(),
                      "states": set()}
        self.saved, self.problems = [], []

    def _read64(self, address):
        return self.device.read32(address) | (self.device.read32(address + 4) << 32)

    def _save(self, index, mutation, frame, what):
        from ..sim.traffic import write_pcap
        if len(self.saved) >= MAX_SAVED:
            return None
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"fuzz-seed{self.seed}-frame{index}-{what}.pcap"
        write_pcap(path, [frame])
        self.saved.append({"frame": index, "mutation": mutation, "what": what,
                           "pcap": str(path), "replay": f"{self.replay} --pcap {path}"})
        return path

    def run_chunk(self, number, start, expected, cover):
        dev, f = self.device, self.figures
        for key in ("mutations", "flags", "paths"):
            self.cover[key].update(cover[key])
        self.cover["states"] |= cover["states"]
        dev.reset()
        idle, backpressure = PATTERNS[number % len(PATTERNS)]
        dev.set_idle(0, idle, seed=number + 1)
        dev.set_backpressure(backpressure, seed=number + 2)
        beats = 0
        for _mutation, frame, *_ in expected:
            dev.push(0, frame)
            beats += max(1, math.ceil(len(frame) / self.lane_bytes))
        f["frames"] += len(expected)
        f["bytes_in"] += sum(len(e[1]) for e in expected)
        f["model_errors"] += sum(e[4] for e in expected)
        hung = False
        from ..sim.vdev import DrainTimeout
        try:
            f["cycles"] += dev.run_until_drained(
                quiet=200, max_cycles=CYCLES_PER_BEAT_CAP * beats + 10_000)
        except DrainTimeout:
            hung = True
            f["cycles"] += dev.cycle
        out = dev.pop()
        accepted = dev.ingress_cycles(0)
        f["delivered"] += len(out)
        if hung or len(out) != len(expected):
            # The first frame that did not come out is the suspect.
            index = len(out)
            mutation, frame = expected[index][:2] if index < len(expected) else ("", b"")
            f["hangs" if hung else "lost"] += 1
            self._save(start + index, mutation, frame, "hang" if hung else "lost")
            self.problems.append(f"chunk {number}: {'hang' if hung else 'frames lost'} after "
                                 f"{len(out)} of {len(expected)} frames")
        for i, got in enumerate(out):
            mutation, frame, last, first, _error = expected[i]
            ts = (accepted[i] % 2 ** 32) << self.ts_shift
            bad = got.last_user != last | ts or got.data != frame or (
                got.beats > 1 and got.first_user != first | ts)
            if bad:
                f["mismatches"] += 1
                path = self._save(start + i, mutation, frame, "mismatch")
                self.problems.append(self.explain(start + i, mutation, frame, got, last, first,
                                                  ts, path))
        if not hung:
            for name, address in self.counters.items():
                f["counted"][name] += self._read64(address)

    def explain(self, index, mutation, frame, got, last, first, ts, path):
        want = decode(self.layout, last | ts)
        problems = diff(want, decode(self.layout, got.last_user))
        if got.beats > 1:
            problems += [f"first beat {p}" for p in
                         diff(decode(self.layout, first | ts), decode(self.layout, got.first_user))]
        if got.data != frame:
            problems.append(f"data differs ({len(got.data)} bytes out, {len(frame)} in)")
        where = f" (saved {path})" if path else ""
        return f"frame {index} ({mutation}, {len(frame)} bytes): {'; '.join(problems[:6])}{where}"

    def result(self):
        f = self.figures
        counted = f["counted"]
        f["balanced"] = (f["hangs"] == 0 and f["lost"] == 0 and f["delivered"] == f["frames"]
                         and counted["packets"] == f["frames"]
                         and counted["bytes"] == f["bytes_in"]
                         and counted["malformed"] == f["model_errors"])
        return f


def _coverage(cover, model):
    steps = walk_reach(model.header_bytes, model.walk_steps, model.ext_headers)
    reachable = {(i, name, layer) for i, s in enumerate(steps)
                 for name, layers in s.layers.items() for layer in layers}
    hit = cover["states"] & reachable
    return {
        "mutations": dict(sorted(cover["mutations"].items())),
        "flags": {flag: cover["flags"].get(flag, 0) for flag in FLAGS},
        "flags_never_set": [flag for flag in FLAGS if not cover["flags"].get(flag)],
        "paths": len(cover["paths"]),
        "top_paths": dict(cover["paths"].most_common(12)),
        "walk_states_reachable": len(reachable),
        "walk_states_hit": len(hit),
        "walk_states_missed": sorted(f"step {s} {n} layer {l}" for s, n, l in reachable - hit),
        "unreachable_states_hit": sorted(f"step {s} {n} layer {l}"
                                         for s, n, l in cover["states"] - reachable),
    }


def run_campaign(config, frames, seed=1, width=64, workers=2, out_dir=None, pcap=None,
                 replay="snic fuzz", progress=None, model_class=ParserModel):
    """Run the campaign; return its figures. ``pcap``: frames from this file instead of drawn
    ones. ``workers``: processes drawing frames and running the model (0: this process, with
    ``model_class``, which tests replace with a broken model). ``progress(done, total, f)``
    is called after each chunk."""
    from ..sim.build import generated_design
    from ..cache import cache_root
    from ..sim.vdev import VirtualDevice
    cfg = parser_config(config, width)
    out_dir = Path(out_dir) if out_dir else cache_root() / "fuzz"
    model_args = (cfg.header_bytes, cfg.walk_steps, cfg.ext_headers, cfg.header_checksum)
    model = model_class(*model_args)
    t0 = time.monotonic()
    paths = generated_design(cfg, progress=lambda *a: None)
    device = VirtualDevice.build(paths["verilog"], paths["regmap"], progress=lambda *a: None)
    build_s = time.monotonic() - t0
    if pcap is not None:
        from ..sim.traffic import read_pcap
        drawn = [("pcap", f) for f in read_pcap(pcap)]
        frames = len(drawn)
    chunks = [(start, min(CHUNK, frames - start)) for start in range(0, frames, CHUNK)]
    campaign = _Campaign(device, model, out_dir, seed, replay)
    t1 = time.monotonic()
    with device:
        if pcap is not None or workers == 0:
            for number, (start, count) in enumerate(chunks):
                batch = (drawn[start:start + count] if pcap is not None else
                         fuzz_frames(seed, start, count, model, cfg.ext_headers))
                campaign.run_chunk(number, start, *expectations(model, batch))
                if progress:
                    progress(start + count, frames, campaign.figures)
        else:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")
                                     ) as pool:
                ahead = 2 * workers
                futures = [pool.submit(_chunk_work, (seed, s, c, model_args))
                           for s, c in chunks[:ahead]]
                for number, (start, count) in enumerate(chunks):
                    if number + ahead < len(chunks):
                        s, c = chunks[number + ahead]
                        futures.append(pool.submit(_chunk_work, (seed, s, c, model_args)))
                    expected, cover = futures[number].result()
                    futures[number] = None
                    campaign.run_chunk(number, start, expected, cover)
                    if progress:
                        progress(start + count, frames, campaign.figures)
    seconds = time.monotonic() - t1
    result = {"benchmark": "fuzz", "seed": seed, "width": width,
              "header_bytes": cfg.header_bytes, "walk_steps": cfg.walk_steps,
              "ext_headers": cfg.ext_headers, **campaign.result(),
              "coverage": _coverage(campaign.cover, model),
              "saved": campaign.saved, "problems": campaign.problems[:50],
              "seconds": round(seconds, 1), "build_seconds": round(build_s, 1),
              "frames_per_s": round(campaign.figures["frames"] / max(seconds, 1e-9)),
              "device_cycles_per_s": round(campaign.figures["cycles"] / max(seconds, 1e-9))}
    if pcap is not None:
        result["pcap"] = str(pcap)
    return result



def failed(result):
    """True if the campaign found anything wrong."""
    return bool(result["mismatches"] or result["hangs"] or result["lost"]
                or not result["balanced"])


def run_with_progress(config, frames, console, **kw):
    """:func:`run_campaign` under a rich progress bar (frames done, mismatches, hangs)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn)
    columns = (TextColumn("fuzzing the parser"), BarColumn(), MofNCompleteColumn(),
               TextColumn("mismatches {task.fields[mismatches]}, hangs {task.fields[hangs]}"),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("fuzz", total=frames or None, mismatches=0, hangs=0)

        def progress(done, total, figures):
            bar.update(task, completed=done, total=total, mismatches=figures["mismatches"],
                       hangs=figures["hangs"])
        return run_campaign(config, frames, progress=progress, **kw)


def show(result, console):
    """The campaign's outcome as tables: the account, then coverage, then what went wrong."""
    from rich.table import Table
    ok = not failed(result)
    source = f"pcap {result['pcap']}" if "pcap" in result else f"seed {result['seed']}"
    console.print(f"[bold]{'PASS' if ok else 'FAIL'}[/bold]: {result['frames']:,} frames "
                  f"({source}) through the {result['width']}-bit parser and the model in "
                  f"{result['seconds']} s ({result['frames_per_s']:,} frames/s)")
    table = Table(title="account")
    table.add_column("frames")
    table.add_column("", justify="right")
    table.add_column("the parser's counters")
    table.add_column("", justify="right")
    c = result["counted"]
    rows = ((("in", result["frames"]), ("packets", c["packets"])),
            (("delivered", result["delivered"]), ("bytes", c["bytes"])),
            (("mismatches", result["mismatches"]), ("malformed", c["malformed"])),
            (("hangs", result["hangs"]), ("model's errors", result["model_errors"])),
            (("lost", result["lost"]), ("bytes in", result["bytes_in"])))
    for (a, x), (b, y) in rows:
        table.add_row(a, f"{x:,}", b, f"{y:,}")
    console.print(table)
    cov = result["coverage"]
    table = Table(title=f"coverage: {cov['walk_states_hit']} of {cov['walk_states_reachable']} "
                        f"reachable walk states, {cov['paths']:,} header paths")
    table.add_column("mutation")
    table.add_column("frames", justify="right")
    table.add_column("flag")
    table.add_column("frames", justify="right")
    muts, flags = list(cov["mutations"].items()), list(cov["flags"].items())
    for i in range(max(len(muts), len(flags))):
        m = muts[i] if i < len(muts) else ("", "")
        f = flags[i] if i < len(flags) else ("", "")
        table.add_row(m[0], f"{m[1]:,}" if m[1] != "" else "", f[0],
                      f"{f[1]:,}" if f[1] != "" else "")
    console.print(table)
    if cov["walk_states_missed"]:
        console.print("walk states never reached: " + ", ".join(cov["walk_states_missed"]))
    for line in result["problems"][:20]:
        console.print(f"[red]{line}[/red]")
    for saved in result["saved"]:
        console.print(f"replay frame {saved['frame']} ({saved['what']}): {saved['replay']}")
