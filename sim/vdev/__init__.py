"""The virtual device: a generated design compiled by Verilator behind a C++ harness, driven
from Python in batches (packets in, cycles run, packets and registers out); imports
supernic.desc, hw/, sim/ and the driver (its transports, server)."""

from .build import BuildError, build_library
from .device import BusTimeout, Delivered, DeviceRegisterBus, DrainTimeout, VirtualDevice
from .ports import DesignPorts, PortError, read_ports

__all__ = ["VirtualDevice", "Delivered", "DeviceRegisterBus", "DrainTimeout", "BusTimeout",
           "BuildError", "build_library", "DesignPorts", "PortError", "read_ports"]
