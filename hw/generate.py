"""Turn a configuration into Verilog and a JSON register map."""

import json
import os
from pathlib import Path

from .config import DesignConfig
from .parser.meta import meta_layout
from .top import SuperNicTop, register_map

__all__ = ["generate_verilog", "write_design", "design_description"]


def generate_verilog(config: DesignConfig) -> str:
    # The built-in Yosys makes the output the same on every machine (toolchain notes).
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    from amaranth.back import verilog
    return verilog.convert(SuperNicTop(config), name=config.name, emit_src=False)


def design_description(config: DesignConfig):
    return {
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
        "build_id": config.build_id,
        "top": config.name,
        "meta_width": meta_layout(config.header_bytes).size,
        "registers": register_map(config).to_json(),
    }


def write_design(config: DesignConfig, out_dir) -> dict:
    """Write ``<name>.v`` and ``<name>.regmap.json`` into ``out_dir``; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    verilog_path = out / f"{config.name}.v"
    regmap_path = out / f"{config.name}.regmap.json"
    text = generate_verilog(config)
    if not verilog_path.exists() or verilog_path.read_text() != text:
        verilog_path.write_text(text)  # unchanged files keep their time: no needless rebuilds
    regmap_path.write_text(json.dumps(design_description(config), indent=2) + "\n")
    return {"verilog": verilog_path, "regmap": regmap_path}
