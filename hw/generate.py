"""Turn a configuration into Verilog and a JSON register map."""

import json
import os
from pathlib import Path

from ..desc.config import DesignConfig
from .parser.meta import meta_layout
from .top import ParserTop

__all__ = ["generate_verilog", "write_design", "design_description", "top_component",
           "analyse_transformed"]


def top_component(config: DesignConfig):
    """The top level a configuration describes: the multi-tenant NIC if it has a ``[nic]``
    section with regions, else the parser alone."""
    if config.is_nic:
        from .nic.top import MultiTenantNic
        return MultiTenantNic(config)
    return ParserTop(config)


def generate_verilog(config: DesignConfig, top=None) -> str:
    # The built-in Yosys makes the output the same on every machine (toolchain notes).
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    from amaranth.back import verilog
    from .separate import separate_modules
    # Blocks the design holds more than once, or that are large, convert on their own in
    # parallel with the rest, each distinct one once (hw/separate.py).
    with separate_modules(config.name) as modules:
        text = verilog.convert(top or top_component(config), name=config.name, emit_src=False)
    return text + "".join(modules)


def design_description(config: DesignConfig, top=None):
    top = top or top_component(config)
    out = {
        "config": {k: getattr(config, k) for k in config.__dataclass_fields__
                   if k != "config_dir"},
        "build_id": config.build_id,
        "top": config.name,
        "meta_width": meta_layout(config.header_bytes).size,
        "registers": top.regmap.to_json(),
    }
    if config.is_nic:
        out["user_width"] = top.user_layout.size
        out["regions"] = [[{"name": s.name, "source": s.source, "header_only": s.header_only,
                            "keys": s.keys,
                            "cycles_per_beat": s.cycles_per_beat(config.data_width),
                            "nodes": [{"name": n.name, "nt": n.kind} for n in s.node_list()]}
                           for s in specs] for specs in top.personalities]
        if config.yieldable_regions:
            out["state_maps"] = state_maps(config, top)
    return out


def state_maps(config, top):
    """``{"region<r>": {personality: state map JSON}}`` of a NIC whose personalities are under
    the state-yielding transform: what each word of a region's state registers means."""
    from .nic.region import Personality
    from .transform import state_map_of
    maps = {}
    out = {}
    for r, specs in enumerate(top.personalities):
        if r not in config.yieldable_regions:
            continue
        out[f"region{r}"] = {s.name: maps.setdefault(s.name, state_map_of(
            Personality(top.shape, s), state=config.yieldable_state).to_json())
            for s in specs}
    return out


def analyse_transformed(config: DesignConfig, progress=None):
    """Run the liveness analyses of every personality the boundary transform will wrap, on
    every core, before the design is elaborated one personality after another (see
    transform/parallel.py); returns ``{network task: seconds}`` of those not yet cached."""
    if not (config.is_nic and config.yieldable_regions
            and config.yieldable_state == "boundary"):
        return {}
    from .nic.region import Personality
    from ..desc.nic.blocks import load_personalities, nic_shape
    from .transform.parallel import analyse_all
    shape = nic_shape(config)
    specs = {s.name: s for r, specs in enumerate(load_personalities(config))
             if r in config.yieldable_regions for s in specs}
    return analyse_all([Personality(shape, s) for s in specs.values()], progress=progress)


def _write(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)  # unchanged files keep their time: no needless rebuilds


def write_design(config: DesignConfig, out_dir, progress=None, personalities=False) -> dict:
    """Write ``<name>.v`` and ``<name>.regmap.json`` into ``out_dir``, and for every chain the
    configuration names ``<name>_<tenant>.v`` and its map; return the paths (chains under
    ``"chains"``, by tenant). With ``personalities`` (a NIC design), also each region
    personality as a stand-alone module ``<name>_personality_<chain>.v`` for a vendor
    partial-reconfiguration flow (under ``"personalities"``); with ``nic.yieldable`` each is
    the personality under the state-yielding transform, and ``<...>.statemap.json`` beside it
    maps its state words to names in that Verilog (under ``"state_maps"``)."""
    from amaranth.back import verilog
    from ..desc.chain import load_chain
    from .chain.top import ChainTop

    specs = [load_chain(p) for p in config.chain_paths()]  # validate all before writing any
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    verilog_path = out / f"{config.name}.v"
    regmap_path = out / f"{config.name}.regmap.json"
    analyse_transformed(config, progress)
    top = top_component(config)
    if progress:
        progress(f"converting {config.name} to Verilog...")
    _write(verilog_path, generate_verilog(config, top))
    regmap_path.write_text(json.dumps(design_description(config, top), indent=2) + "\n")
    paths = {"verilog": verilog_path, "regmap": regmap_path, "chains": {},
             "personalities": {}, "state_maps": {}}
    if personalities and config.is_nic:
        from .nic.region import Personality
        from ..desc.nic.blocks import nic_shape
        shape = nic_shape(config)
        transformed = {s.name for r, specs in enumerate(top.personalities)
                       if r in config.yieldable_regions for s in specs}
        for spec in {s.name: s for specs in top.personalities for s in specs}.values():
            if progress:
                progress(f"generating personality {spec.name}...")
            name = f"{config.name}_personality_{spec.name}"
            v = out / f"{name}.v"
            if spec.name in transformed:
                # The module the region holds: the personality under the transform, with its
                # state map named as in this Verilog.
                from .transform import Yieldable
                from .transform.rtl import convert_with_state_maps
                wrapped = Yieldable(Personality(shape, spec))
                text, maps = convert_with_state_maps(wrapped, name, {"p": wrapped})
                _write(v, text)
                m = out / f"{name}.statemap.json"
                m.write_text(json.dumps(maps["p"].to_json(), indent=1) + "\n")
                paths["state_maps"][spec.name] = m
            else:
                _write(v, verilog.convert(Personality(shape, spec), name=name, emit_src=False))
            paths["personalities"][spec.name] = v
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
                                                             "header_bytes", "walk_steps",
                                                             "ext_headers",
                                                             "header_checksum")},
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
