"""Migrate a stopped region's chain to its Python model and back (Synergy's migration to
software): the state the driver captures (:class:`~supernic.driver.state.RegionState`) is
decoded by the state map and loaded into a :class:`~supernic.sim.chain_model.ChainModel`.

    model, snapshot = await to_model(region)   # the chain's Python model, holding the state
    await from_model(region, model, snapshot)  # and back, after the model ran packets
"""

from ..desc.chain import load_chain
from ..driver.state import StateError
from .chain_model import ChainModel

__all__ = ["to_model", "from_model", "chain_model"]


def chain_model(region, name, spec=None):
    """The Python model of personality ``name`` of ``region`` (a ``RegionState``), configured
    from ``spec``, by default the chain file the design was built from."""
    if spec is None:
        source = next(p["source"] for p in region.personalities if p["name"] == name)
        spec = load_chain(source)
    if spec.name != name:
        raise StateError(f"the chain spec is {spec.name!r}, region {region.region} has "
                         f"{name!r} selected")
    return ChainModel(spec, region.data_width, region.header_bytes)


async def to_model(region, spec=None):
    """Migrate the stopped personality of ``region`` to the Python model: capture its state
    and return ``(model, snapshot)``, a :class:`~supernic.sim.chain_model.ChainModel` of its
    chain holding the hardware's counters and tables, ready to process packets in software
    (``model.process(frame, meta)``). Stop at a packet boundary first: the model has no
    pipeline. Raises :class:`~supernic.sim.nt.base.StateBridgeError` for an NT whose model
    cannot take the state."""
    snapshot = await region.capture()
    model = chain_model(region, snapshot["personality"], spec)
    model.load_hw_state(region.maps[snapshot["personality"]].decode(snapshot["words"]))
    return model, snapshot


async def from_model(region, model, snapshot):
    """Migrate back: write ``model``'s state (from :func:`to_model`, and since then maybe run
    on packets in software) into the stopped personality; what the model does not keep (the
    empty pipeline) comes from ``snapshot``, the capture :func:`to_model` returned."""
    smap = region.maps[snapshot["personality"]]
    values = smap.decode(snapshot["words"])
    model.store_hw_state(values)
    await region.restore({**snapshot, "words": smap.encode(values)})
