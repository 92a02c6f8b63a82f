"""The state-yielding transform (Synergy, ASPLOS 2021, without its run-time cost): any
Amaranth component can stop, expose and restore all its state, and resume; imports
supernic.desc (the state map) and hw/."""

from .inventory import TransformError, take_inventory
from ...desc.statemap import StateItem, StateMap
from .yieldable import Yieldable, YieldSignature, state_map_of

__all__ = ["Yieldable", "YieldSignature", "StateMap", "StateItem", "TransformError",
           "take_inventory", "state_map_of"]
