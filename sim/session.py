"""Run the generated design's cocotb benches from Python (pytest, `snic demo`, `snic bench`).

cocotb runs each simulation in its own process; parameters go in as environment variables and
the bench writes a JSON summary that comes back as a dict. Callers that want a quiet console
(`snic demo`, `snic bench`) send the compilers' and simulator's output to a log with
:func:`quiet_fds`.
"""

import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .build import build_simulator, generated_component, generated_design
from ..cache import cache_root

__all__ = ["design_simulator", "run_bench", "quiet_fds", "passthrough_simulator",
           "task_simulator", "chain_simulator", "chain_design"]


@contextmanager
def quiet_fds(log_path):
    """Send file descriptors 1 and 2 (compilers, simulator, cocotb) to ``log_path``."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


#: Internal signals the NIC benches read (the parsers' cycle counters, the scheduler's
#: output); everything else stays private so Verilator can optimise the large NIC.
NIC_PUBLIC = ("now", "o__valid", "o__ready", "o__payload")


def design_simulator(config, progress=print):
    paths = generated_design(config, progress=progress)
    return build_simulator(paths["verilog"], config.name, paths["regmap"], progress=progress,
                           public=list(NIC_PUBLIC) if config.is_nic else None)


def task_simulator(kind, data_width, params=None, header_bytes=256, progress=print,
                   yieldable=False):
    """One network task alone in :class:`~supernic.hw.nt.shell.TaskShell`, built for cocotb.
    With ``yieldable`` the NT is transformed and the description holds its state map, each item
    named as in the Verilog (``state_map``): ``True`` or ``"boundary"`` the boundary state port
    (only the flip-flops live at a drained packet boundary), ``"full"`` every flip-flop."""
    from ..hw.nt.shell import TaskShell, shell_register_map
    from ..hw.nt.task import task_class

    task = task_class(kind)
    params = task.check_params(params or {})
    if yieldable is True:
        yieldable = "boundary"
    name = f"nt_{kind}_w{data_width}" + (f"_yield_{yieldable}" if yieldable else "")
    description = {
        "config": {"data_width": data_width, "header_bytes": header_bytes},
        "nt": {"kind": kind, "params": params, "block": "nt"},
        "registers": shell_register_map(task, params).to_json(),
    }
    convert = None
    if yieldable:
        from ..hw.transform.rtl import convert_with_state_maps

        def convert(shell, name):
            text, maps = convert_with_state_maps(shell, name, {"task": shell.task})
            return text, {"state_map": maps["task"].to_json()}
    paths = generated_component(
        name, {**description, "yieldable": yieldable},
        lambda: TaskShell(task, data_width, header_bytes, params, yieldable=yieldable),
        description, progress=progress, convert=convert)
    # The plain NT's benches drive and read its ports only, so its internals stay private and
    # Verilator optimises across them; the yield benches reach every flip-flop (they scramble
    # what the state map leaves out), so a yieldable shell keeps all of them public.
    return build_simulator(paths["verilog"], name, paths["regmap"], progress=progress,
                           public=None if yieldable else [])


def chain_design(spec_path, config=None, progress=print):
    """Verilog and description of the single-tenant design for the chain at ``spec_path``."""
    from ..desc.chain import load_chain
    from ..hw.chain.top import ChainTop
    from ..desc.config import DesignConfig

    spec_path = Path(spec_path).resolve()
    from ..desc.blocks import chain_register_map

    spec = load_chain(spec_path)
    config = (config or DesignConfig()).with_(name=f"chain_{spec.name}")
    description = {
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "build_id": config.build_id,
        "top": config.name,
        "chain": str(spec_path),
        "registers": chain_register_map(spec).to_json(),
    }
    key = {**description, "spec": spec_path.read_text()}
    name = f"{config.name}_w{config.data_width}"
    return generated_component(name, key, lambda: ChainTop(config, spec), description,
                               progress=progress), name


#: The one internal signal the chain bench reads: the parser's cycle counter (its timestamps).
CHAIN_PUBLIC = ("now",)


def chain_simulator(spec_path, config=None, progress=print):
    # Everything else private: the 64-bit monitoring chain's C++ halves (15.8 to 8.0 MB) and
    # its build takes 28 s instead of 77 s (verilate and make -j2, this machine).
    paths, name = chain_design(spec_path, config, progress)
    return build_simulator(paths["verilog"], name, paths["regmap"], progress=progress,
                           public=list(CHAIN_PUBLIC))


def passthrough_simulator(data_width, progress=print):
    """The baseline: the same AXI4-Stream shell around a plain FIFO, no parser."""
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    from amaranth.back import verilog
    from ..hw.passthrough import StreamPassthrough

    out = cache_root() / "gen" / f"passthrough{data_width}"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"passthrough{data_width}.v"
    text = verilog.convert(StreamPassthrough(data_width), name=f"passthrough{data_width}",
                           emit_src=False)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    regmap = out / "regmap.json"
    regmap.write_text(json.dumps({"config": {"data_width": data_width}}))
    return build_simulator(path, f"passthrough{data_width}", regmap, progress=progress)


def run_bench(sim, testcase, scenario=None, test_dir=None, module="supernic.sim.tb.parser_tb"):
    """Run one cocotb test with ``scenario`` (a JSON-serialisable dict of the bench's
    parameters, or an object with ``to_json()`` such as
    :class:`~supernic.sim.tb.scenario.NicScenario`); return its JSON summary. Raises if the
    test fails. The bench reads the scenario with :mod:`supernic.sim.tb.bench_env`."""
    if scenario is not None and hasattr(scenario, "to_json"):
        scenario = scenario.to_json()
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        env = {"SNIC_SCENARIO": json.dumps(scenario or {}), "SNIC_RESULT": str(result)}
        sim.test(module, testcase=[testcase], extra_env=env,
                 test_dir=test_dir or Path(tmp) / "run")
        return json.loads(result.read_text())
