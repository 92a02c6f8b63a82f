"""A client of the device server (:mod:`supernic.driver.server`, protocol in its docstring),
and :class:`SocketBus`, the driver's register bus over it.

    client = await DeviceClient.connect(socket_path)      # or port=N for TCP on 127.0.0.1
    info = await client.hello()                            # design name, build id, design JSON
    bus = SocketBus(client)                                # discovery, read_register, ... on it
    await client.push(0, frame); await client.drain(); packets = await client.pop()
"""

import asyncio
import base64
import itertools
import os
import socket
from pathlib import Path

from ..desc.errors import SnicError
from .packets import Delivered
from .server import ProtocolError, default_socket, read_message, write_message
from .transport import RegisterBus, Response, TransportLost

__all__ = ["DeviceClient", "DeviceError", "DeviceRefused", "DeviceUnavailable", "SocketBus", "Delivered"]


class DeviceUnavailable(TransportLost):
    """No device server answers at the endpoint, or it went away."""


class DeviceError(SnicError):
    """The server failed a request (its one-line reason is the message)."""
    exit_code = 1


class DeviceRefused(DeviceError):
    """The server refused a request before the device saw it: no or a bad token, or a request
    the connection's role may not make (``denied: ...``), or a token file that cannot be read.
    A refusal, so the CLI exits 2 as for bad usage."""
    exit_code = 2


def _token(endpoint, token):
    """``(token, where it came from)`` for a connection to ``endpoint`` (see
    :meth:`DeviceClient.connect`)."""
    from .access import read_token, token_file
    if token is not None:
        return token, "the caller"
    named = os.environ.get("SNIC_TOKEN_FILE")
    if named:
        found = read_token(named)
        if found is None:
            raise DeviceRefused(f"cannot read a token from $SNIC_TOKEN_FILE ({named})")
        return found, named
    path = token_file(endpoint)
    return read_token(path), str(path)


#: Seconds a connect waits for a device server whose listen queue is full.
BUSY_PATIENCE = 10.0


async def open_unix(path, patience=BUSY_PATIENCE):
    """``(reader, writer)`` of a connection to the Unix socket ``path``.

    A Unix socket whose listen queue is full refuses a non-blocking connect with EAGAIN.
    asyncio's ``open_unix_connection`` takes that for a connect in progress and hands back a
    connection that was never made, so it fails at the first write with "Connection lost".
    CI saw exactly that after 200 connections flooded a busy server. So the connect is made
    here and retried while the queue is full, up to ``patience`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(path))
        except BlockingIOError:
            sock.close()
            if loop.time() >= deadline:
                raise DeviceUnavailable(f"the device on {path} accepts no connection: its "
                                        f"queue stayed full for {patience:g} s") from None
            await asyncio.sleep(0.02)
            continue
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_unix_connection(sock=sock)


class DeviceClient:
    """One connection to a device server. Requests on one client are sent one at a time (a
    lock keeps concurrent coroutines from interleaving); open several clients for parallel
    work, which the server serialises on the device."""

    def __init__(self, reader, writer, endpoint):
        self._reader, self._writer = reader, writer
        self.endpoint = endpoint
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._lost = None       # why the connection is unusable, once it is
        #: What the server made of the token: ``{"role": ...}`` (``None``: none presented).
        self.role = None

    @classmethod
    async def connect(cls, socket_path=None, port=None, host="127.0.0.1", token=None):
        """Connect to the server on the Unix socket ``socket_path`` (default
        ``$SNIC_CACHE/run/device.sock``) or, with ``port``, on TCP ``host``, and present a
        token (:mod:`supernic.driver.access`): ``token``, else the one in the file
        ``$SNIC_TOKEN_FILE`` names (a tenant's), else the operator's beside the socket if this
        user may read it. With none, the connection may only say ``hello``."""
        if port is not None:
            endpoint = f"{host}:{port}"
            opener = asyncio.open_connection(host, port)
        else:
            endpoint = str(Path(socket_path or default_socket()))
            opener = open_unix(endpoint)
        try:
            reader, writer = await opener
        except (FileNotFoundError, ConnectionRefusedError):
            raise DeviceUnavailable(f"no device is serving on {endpoint} (start one with "
                                    f"`snic device serve`)") from None
        except OSError as e:
            raise DeviceUnavailable(f"cannot connect to {endpoint}: {e.strerror or e}") from None
        client = cls(reader, writer, endpoint)
        token, source = _token(endpoint, token)
        if token is not None:
            try:
                client.role = await client.request("auth", token=token)
            except DeviceError as e:
                await client.close()
                raise DeviceRefused(f"the device on {endpoint} refused the token from {source} "
                                  f"({e})") from None
        return client

    @property
    def role_kind(self):
        """``"operator"``, ``"tenant"``, or ``None`` when the connection presented no token."""
        return (self.role or {}).get("role")

    async def close(self):
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, BrokenPipeError):
            pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def request(self, op, **arguments):
        """Send one request; return its result object or raise :class:`DeviceError`."""
        async with self._lock:
            if self._lost is not None:
                # Writing again to a dead socket only makes asyncio log warnings.
                raise DeviceUnavailable(self._lost)
            message_id = next(self._ids)
            try:
                write_message(self._writer, {"op": op, "id": message_id, **arguments})
                await self._writer.drain()
                reply = await read_message(self._reader)
            except (ConnectionError, ProtocolError) as e:
                self._lose(f"connection to the device on {self.endpoint} lost ({e}); is the "
                           f"device server still running?")
            if reply is None:
                self._lose(f"the device on {self.endpoint} closed the connection; is the "
                           f"device server still running?")
            if not reply.get("ok"):
                error = reply.get("error", "request failed")
                raise (DeviceRefused if error.startswith("denied:") else DeviceError)(error)
            if reply.get("id") != message_id:
                raise DeviceUnavailable(f"reply to request {reply.get('id')!r} arrived for "
                                        f"request {message_id}")
            return reply.get("result", {})

    def _lose(self, reason):
        self._lost = reason
        self._writer.transport.abort()
        raise DeviceUnavailable(reason) from None

    async def hello(self, regmap=True):
        return await self.request("hello", regmap=regmap)

    async def read_word(self, address):
        result = await self.request("read32", address=address)
        return result["value"], Response(result["response"])

    async def write_word(self, address, value, strobe=0b1111):
        result = await self.request("write32", address=address, value=value, strobe=strobe)
        return Response(result["response"])

    async def push(self, port, frame, at=0):
        """Queue ``frame`` on ingress ``port``, its first beat no earlier than cycle ``at``;
        return the packets waiting on that port."""
        if not isinstance(frame, (bytes, bytearray, memoryview)):
            raise TypeError(f"Frame must be bytes, not {type(frame).__name__}")
        frame_b64 = base64.b64encode(bytes(frame)).decode()
        return (await self.request("push", port=port, frame_b64=frame_b64, at=at))["queued"]

    async def push_batch(self, packets, chunk=20_000):
        """Queue ``packets``, ``(port, frame, at)`` triples, in messages of ``chunk`` packets
        (one round trip each instead of one per packet); return the packets waiting per
        port."""
        queued = None
        for i in range(0, len(packets), chunk):
            part = packets[i:i + chunk]
            queued = (await self.request(
                "push_batch", ports=[p for p, _, _ in part],
                frames_b64=[base64.b64encode(bytes(f)).decode() for _, f, _ in part],
                at=[a for _, _, a in part]))["queued"]
        return queued

    async def run(self, cycles):
        return (await self.request("run", cycles=cycles))["cycle"]

    async def run_status(self, cycles):
        """Run ``cycles``; return ``{"cycle", "queued" (per port), "delivered" (waiting to
        pop)}``."""
        return await self.request("run", cycles=cycles)

    async def drain(self, quiet=200, max_cycles=10_000_000):
        """Run until the design has drained; return the cycles run."""
        return (await self.request("drain", quiet=quiet, max_cycles=max_cycles))["cycles"]

    async def pop(self):
        """Every packet delivered since the last pop (by any client), oldest first."""
        packets = (await self.request("pop"))["packets"]
        return [Delivered(bytes.fromhex(p["data"]), int(p["first_user"], 16),
                          int(p["last_user"], 16), p["first_cycle"], p["last_cycle"],
                          p["beats"]) for p in packets]

    async def ingress_cycles(self, port=0):
        return (await self.request("ingress", port=port))["cycles"]

    async def cycle(self):
        return (await self.request("cycle"))["cycle"]

    async def reset(self, cycles=4):
        return (await self.request("reset", cycles=cycles))["cycle"]

    async def set_idle(self, port, prob, seed=0):
        await self.request("idle", port=port, prob=prob, seed=seed)

    async def set_backpressure(self, prob, seed=0):
        await self.request("backpressure", prob=prob, seed=seed)

    async def shutdown(self):
        """Ask the server to stop (it removes its socket file) and close this connection."""
        await self.request("shutdown")
        await self.close()


class SocketBus(RegisterBus):
    """The driver's register bus over a :class:`DeviceClient`: discovery, ``read_register``
    and the rest run unchanged against a served device."""

    def __init__(self, client):
        if not isinstance(client, DeviceClient):
            raise TypeError(f"Client must be a DeviceClient, not {client!r}")
        self.client = client

    async def read_word(self, address):
        return await self.client.read_word(address)

    async def write_word(self, address, value, strobe=0b1111):
        return await self.client.write_word(address, value, strobe)
