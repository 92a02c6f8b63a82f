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
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__
                   if k != "config_dir"},
        "build_id": config.build_id,
        "top": config.name,
        "meta_width": meta_layout(config.header_bytes).size,
        "registers": register_map(config).to_json(),
    }


def _write(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)  # unchanged files keep their time: no needless rebuilds


def write_design(config: DesignConfig, out_dir, progress=None) -> dict:
    """Write ``<name>.v`` and ``<name>.regmap.json`` into ``out_dir``, and for every chain the
    configuration names ``<name>_<tenant>.v`` and its map; return the paths (chains under
    ``"chains"``, by tenant)."""
    from amaranth.back import verilog
    from .chain.spec import load_chain
    from .chain.top import ChainTop

    specs = [load_chain(p) for p in config.chain_paths()]  # validate all before writing any
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    verilog_path = out / f"{config.name}.v"
    regmap_path = out / f"{config.name}.regmap.json"
    _write(verilog_path, generate_verilog(config))
    regmap_path.write_text(json.dumps(design_description(config), indent=2) + "\n")
    paths = {"verilog": verilog_path, "regmap": regmap_path, "chains": {}}
    for spec in specs:
        if progress:
            progress(f"generating chain {spec.name}...")
        name = f"{config.name}_{spec.name}"
        chain_config = config.with_(name=name, chains=())
        top = ChainTop(chain_config, spec)
        v = out / f"{name}.v"
        _write(v, verilog.convert(top, name=name, emit_src=False))
        description = {
            "config": {k: getattr(chain_config, k) for k in ("name", "data_width",
                                                             "header_bytes", "walk_steps")},
            "build_id": chain_config.build_id, "top": name, "chain": spec.source,
            "tenant": {"name": spec.name, "doc": spec.doc, "keys": spec.keys,
                       "scope": spec.scope.value,
                       "nodes": [{"name": n.name, "nt": n.kind, "params": n.params}
                                 for n in spec.node_list()]},
            "registers": top.regmap.to_json(),
        }
        r = out / f"{name}.regmap.json"
        r.write_text(json.dumps(description, indent=2) + "\n")
        paths["chains"][spec.name] = {"verilog": v, "regmap": r}
    return paths
