"""The boards ``snic build --board`` knows: an amaranth-boards platform and what of it the NIC
uses. Each has an Ethernet PHY on RGMII and a UART to the host."""

from dataclasses import dataclass

from ...desc.errors import SnicError

__all__ = ["Board", "BOARDS", "board_named", "board_config_path"]


@dataclass(frozen=True)
class Board:
    name: str
    doc: str
    platform_module: str        # amaranth_boards.<module>
    platform_class: str
    clock: str = "clk100"       # the oscillator resource
    clock_hz: float = 100e6
    reset: str | None = "rst"   # a reset button resource, or None
    ethernet: str = "eth_rgmii"
    uart: str = "uart"

    def platform(self):
        import importlib
        module = importlib.import_module(f"amaranth_boards.{self.platform_module}")
        return getattr(module, self.platform_class)()

    @property
    def device(self):
        import importlib
        module = importlib.import_module(f"amaranth_boards.{self.platform_module}")
        return getattr(module, self.platform_class).device


BOARDS = {b.name: b for b in (
    Board("ecpix5_85", "LambdaConcept ECPIX-5 (LFE5UM5G-85F): one RGMII gigabit PHY, UART "
          "over its FTDI", "ecpix5", "ECPIX585Platform"),
    Board("ecpix5_45", "LambdaConcept ECPIX-5 (LFE5UM5G-45F): one RGMII gigabit PHY, UART "
          "over its FTDI", "ecpix5", "ECPIX545Platform"),
)}


def board_named(name):
    try:
        return BOARDS[name]
    except KeyError:
        raise SnicError(f"no board {name!r} (boards: {', '.join(sorted(BOARDS))})") from None


def board_config_path(board_name):
    """The shipped NIC configuration of a board (chains/boards/<name>.toml), or None."""
    from ...desc.config import default_config_path
    path = default_config_path().parent / "boards" / f"{board_name}.toml"
    return path if path.exists() else None
