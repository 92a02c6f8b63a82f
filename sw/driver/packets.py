"""What a device's packet port gives back: the same record from a virtual device, a served
one (:mod:`supernic.driver.client`) or a board."""

from dataclasses import dataclass

__all__ = ["Delivered"]


@dataclass(frozen=True)
class Delivered:
    """A packet that left ``m_axis``: its bytes (lanes with ``tkeep`` set), ``tuser`` on its
    first and last beat as ints, and the cycles its first and last beat left."""
    data: bytes
    first_user: int
    last_user: int
    first_cycle: int
    last_cycle: int
    beats: int
