"""A virtual device behind the device server (:mod:`supernic.driver.server`): what
``snic device serve`` runs, and what the benches and campaigns that drive a served NIC start."""

import asyncio
from pathlib import Path

from ...desc.config import ConfigError
from ...driver.server import DeviceServer, ServerError, check_endpoint_free, default_socket, serve
from ..build import generated_design
from ..parser_model import tenant_key_reader
from .build import BuildError
from .device import VirtualDevice
from .ports import PortError

__all__ = ["device_server", "serve_design"]


def device_server(device, regmap_path=None):
    """A :class:`~supernic.driver.server.DeviceServer` for the virtual device ``device``; the
    parser model reads the tenant key of each frame a tenant pushes."""
    return DeviceServer(device, device.regmap, regmap_path,
                        read_key=tenant_key_reader(device.regmap.get("config", {})))


def serve_design(config, socket_path=None, port=None, progress=print, announce=print):
    """Build ``config`` (a :class:`~supernic.desc.config.DesignConfig`) into a virtual device and
    serve it until shutdown, SIGINT or SIGTERM. Raises :class:`ServerError` if the endpoint is
    taken or the design fails to build; ``announce`` gets one line saying where it listens."""
    socket_path = None if port is not None else Path(socket_path or default_socket())
    # Fail before a build that may take minutes if the endpoint is already taken.
    check_endpoint_free(socket_path, port)
    try:
        paths = generated_design(config, progress=progress)
        device = VirtualDevice.build(paths["verilog"], paths["regmap"], progress=progress)
    except (ConfigError, BuildError, PortError) as e:
        raise ServerError(f"design {config.name} ({config.data_width}-bit) failed to build: "
                          f"{str(e).splitlines()[0]}") from None
    except Exception as e:  # noqa: BLE001: Amaranth elaboration errors have many types
        raise ServerError(f"design {config.name} ({config.data_width}-bit) failed to build: "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                          ) from None
    with device:
        if not device.has_registers:
            raise ServerError(f"design {config.name} has no register port to serve")
        asyncio.run(serve(device_server(device, paths["regmap"]), socket_path, port, announce))
