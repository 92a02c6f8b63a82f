"""The device server: one virtual device (or, later, a board) shared by several clients.

``snic device serve`` builds a design into a :class:`~supernic.sim.vdev.VirtualDevice` and
serves it on a Unix socket (default ``$SNIC_CACHE/run/device.sock``) or on TCP at 127.0.0.1.
Clients (:mod:`supernic.driver.client`, ``snic status``) attach, discover the design's register
blocks and read or write registers, push packets and pop what the design delivered.

Protocol (version 1)
--------------------
Every message, either way, is a 4-byte big-endian length followed by that many bytes of UTF-8
JSON holding one object. A client sends a request and waits for its reply; a connection
carries one request at a time, and several connections may be open at once. Requests from
all connections run one after another on the device, in arrival order.

Request: ``{"op": NAME, "id": ANY, ...arguments}``. Reply: ``{"id": ANY, "ok": true,
"result": {...}}`` or ``{"id": ANY, "ok": false, "error": "one line"}``; ``id`` is echoed.

============  ==========================================  ========================================
op            arguments                                   result
============  ==========================================  ========================================
hello         ``regmap`` (bool, default true)             ``protocol``, ``design``, ``build_id``,
                                                          ``data_width``, ``ports``, ``cycle``,
                                                          ``regmap_path``, ``regmap`` (the
                                                          design JSON, ``design_description``)
read32        ``address``                                 ``value``, ``response`` (AXI code, 0 OKAY)
write32       ``address``, ``value``, ``strobe`` (15)     ``response``
push          ``port``, ``frame`` (hex) or ``frame_b64``, ``queued`` (packets waiting on the port)
              ``at`` (cycle of its first beat, 0)
push_batch    ``ports``, ``frames_b64`` and ``at``:        ``queued`` (per port); all or nothing:
              lists of equal length (``at`` optional)     one bad entry and none is queued
run           ``cycles``                                  ``cycle``, ``queued`` (per port),
                                                          ``delivered`` (packets waiting to pop)
drain         ``quiet`` (200), ``max_cycles`` (10**7)     ``cycles`` run, ``cycle``
pop           (none)                                      ``packets``: list of ``data`` (hex),
                                                          ``first_user``/``last_user`` (hex),
                                                          ``first_cycle``, ``last_cycle``, ``beats``
ingress       ``port``                                    ``cycles``: accept cycle of each packet
cycle         (none)                                      ``cycle``
reset         ``cycles`` (4)                              ``cycle``
idle          ``port``, ``prob``, ``seed`` (0)            (empty)
backpressure  ``prob``, ``seed`` (0)                      (empty)
shutdown      (none)                                      (empty); the server then stops
auth          ``token``                                   ``role`` (``operator``, ``tenant``),
                                                          ``tenant``
grant         ``tenant``, ``regions``, ``keys`` (lists)   ``token`` (the tenant's, a new one)
revoke        ``tenant``                                  ``revoked`` (whether it had a token)
access        (none)                                      ``role``, ``denials`` (per role; a
                                                          tenant: its own), ``tenants`` / its
                                                          ``regions`` and ``blocks``
============  ==========================================  ========================================

Access (:mod:`supernic.driver.access`): every request is checked against its connection's role
before the device sees it. A connection presents a token with ``auth``; without one only
``hello`` and ``auth`` are answered. The operator's token is made at start and written beside
the socket, owner-only (the socket itself is owner-only too); tenants' tokens come from
``grant`` and stop working at ``revoke``. A refusal is ``ok: false`` with ``denied: ...`` and
changes nothing; the connection stays usable.

Register reads and writes report the bus response instead of failing, so a client's
:class:`~supernic.driver.transport.RegisterBus` sees DECERR and SLVERR as a local bus would. A
request the server cannot carry out (unknown op, bad argument, device error) gets ``ok: false``
and the connection stays usable; a message that is not a JSON object, or longer than
:data:`MAX_MESSAGE` bytes, gets an error reply and the connection is closed.
"""

import asyncio
import base64
import binascii
import concurrent.futures
import contextlib
import errno
import functools
import json
import os
import signal
import socket
import struct
from pathlib import Path

from ..desc.errors import SnicError

__all__ = ["PROTOCOL_VERSION", "MAX_MESSAGE", "ServerError", "DeviceServer", "default_socket",
           "check_endpoint_free", "read_message", "write_message", "serve_mapped", "serve",
           "serving_in_thread"]

PROTOCOL_VERSION = 1
#: Longest message either side accepts: a pop of many jumbo frames fits, garbage does not.
MAX_MESSAGE = 256 * 1024 * 1024
_HEADER = struct.Struct(">I")


class ServerError(SnicError):
    """The server cannot start: its endpoint is taken or the design cannot be built."""


#: Ops the server answers itself, from its access control (no device call).
_ACCESS_OPS = frozenset({"auth", "grant", "revoke", "access"})


class ProtocolError(Exception):
    """A malformed message: the connection cannot continue."""


def default_socket():
    """``$SNIC_CACHE/run/device.sock`` (``~/.cache/supernic/run/device.sock``)."""
    from ..cache import cache_root
    return cache_root() / "run" / "device.sock"


#: Connections the kernel queues before the server accepts them. Python's default is 100,
#: which a burst of clients fills while the server is busy (a full Unix socket queue refuses
#: new connections; see client.open_unix).
LISTEN_BACKLOG = 1024


async def read_message(reader):
    """One message from ``reader``; ``None`` at a clean end of stream."""
    try:
        header = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise ProtocolError("connection closed inside a message header") from None
    (length,) = _HEADER.unpack(header)
    if length > MAX_MESSAGE:
        raise ProtocolError(f"message of {length} bytes is longer than {MAX_MESSAGE}")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ProtocolError("connection closed inside a message") from None
    try:
        message = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"message is not JSON: {e}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"message must be a JSON object, not {type(message).__name__}")
    return message


def write_message(writer, message):
    body = json.dumps(message, separators=(",", ":")).encode()
    writer.write(_HEADER.pack(len(body)) + body)


def _endpoint(socket_path, port):
    return f"127.0.0.1:{port}" if port is not None else f"{socket_path}"


def check_endpoint_free(socket_path=None, port=None):
    """Raise :class:`ServerError` if a server already listens on the endpoint. A Unix socket
    file nobody listens on (left by a killed server) is removed."""
    if port is not None:
        if port == 0:
            return
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise ServerError(f"another device is serving on 127.0.0.1:{port} "
                                      f"(or another program holds the port)") from None
                raise ServerError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}") from None
        return
    path = Path(socket_path)
    if not path.exists() and not path.is_symlink():
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)  # stale: its server died without cleaning up
            return
        except OSError as e:
            raise ServerError(f"cannot use socket {path}: {e.strerror}") from None
    raise ServerError(f"another device is serving on {path}")


def _integer(request, key, low=0, high=None, default=None):
    value = request.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (
            high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{key} must be an integer {bound}, not {value!r}")
    return value


def _base64(text, what):
    try:
        return base64.b64decode(text, validate=True)
    except (TypeError, ValueError, binascii.Error):
        raise ValueError(f"{what} must be base64") from None


def _frame(request):
    if "frame" in request:
        try:
            return bytes.fromhex(request["frame"])
        except (TypeError, ValueError):
            raise ValueError("frame must be a string of hex digits") from None
    if "frame_b64" in request:
        return _base64(request["frame_b64"], "frame_b64")
    raise ValueError("push needs frame (hex) or frame_b64")


def _hex_user(value):
    return format(value, "x")


class FramedServer:
    """What every server of this protocol shares: listening on a Unix socket (owner-only) or
    on TCP 127.0.0.1, a task per connection reading length-prefixed JSON requests and writing
    one reply each, the operator's token written beside the endpoint, and a clean shutdown.
    A subclass answers in ``_reply(request, state) -> (reply, state)``, ``state`` being the
    connection's (whom it authenticated as; ``_initial_state`` at first), and runs blocking work
    on ``self._worker``, one thread, so that requests from all connections are serialised."""

    #: A connection's state before it authenticates.
    _initial_state = None
    #: What serves, for messages ("device", "rack").
    kind = "device"

    def __init__(self, worker_name):
        self.endpoint = None
        self.token_path = None
        self._server = None
        self._socket_path = None
        self._worker = concurrent.futures.ThreadPoolExecutor(1, worker_name)
        self._stopped = asyncio.Event()
        self._connections = set()

    def _default_socket(self):
        return default_socket()

    def _operator_token(self):
        raise NotImplementedError

    async def _reply(self, request, state):
        raise NotImplementedError

    async def _client(self, reader, writer):
        task = asyncio.current_task()
        self._connections.add(task)
        state = self._initial_state     # until the connection presents a token
        try:
            while True:
                try:
                    request = await read_message(reader)
                except ProtocolError as e:
                    write_message(writer, {"id": None, "ok": False, "error": str(e)})
                    await writer.drain()
                    break
                if request is None:
                    break
                reply, state = await self._reply(request, state)
                write_message(writer, reply)
                await writer.drain()
                if request.get("op") == "shutdown" and reply["ok"]:
                    self._stopped.set()
                    break
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def start(self, socket_path=None, port=None):
        """Listen on the Unix socket ``socket_path`` (default: ``_default_socket()``) or, with
        ``port``, on TCP 127.0.0.1 (0 picks a free port); set and return ``endpoint``."""
        if port is not None:
            try:
                self._server = await asyncio.start_server(self._client, "127.0.0.1", port,
                                                          backlog=LISTEN_BACKLOG)
            except OSError as e:
                if e.errno == errno.EADDRINUSE:
                    raise ServerError(f"another {self.kind} is serving on 127.0.0.1:{port} "
                                      f"(or another program holds the port)") from None
                raise ServerError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}") from None
            bound = self._server.sockets[0].getsockname()[1]
            self.endpoint = f"tcp:127.0.0.1:{bound}"
            self._write_token()
            return self.endpoint
        path = Path(socket_path or self._default_socket())
        path.parent.mkdir(parents=True, exist_ok=True)
        check_endpoint_free(path)
        # Owner-only from its creation: the socket file is made under this umask.
        mask = os.umask(0o077)
        try:
            self._server = await asyncio.start_unix_server(self._client, str(path),
                                                           backlog=LISTEN_BACKLOG)
        except OSError as e:
            raise ServerError(f"cannot listen on {path}: {e.strerror or e}") from None
        finally:
            os.umask(mask)
        self._socket_path = path
        self.endpoint = f"unix:{path}"
        self._write_token()
        return self.endpoint

    def _write_token(self):
        from .access import token_file, write_token
        self.token_path = write_token(token_file(self.endpoint), self._operator_token())

    def request_shutdown(self):
        self._stopped.set()

    async def serve(self):
        """Serve until a ``shutdown`` request or :meth:`request_shutdown`; then stop listening,
        end the open connections and remove the socket file."""
        try:
            await self._stopped.wait()
        finally:
            await self.close()

    async def close(self):
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                if task is not asyncio.current_task():
                    task.cancel()
            await self._server.wait_closed()
            self._server = None
        if self._socket_path is not None:
            self._socket_path.unlink(missing_ok=True)
            self._socket_path = None
        if self.token_path is not None:
            self.token_path.unlink(missing_ok=True)
            self.token_path = None
        self._worker.shutdown(wait=True)


class DeviceServer(FramedServer):
    """Serves ``device`` (a :class:`~supernic.sim.vdev.VirtualDevice`) whose design JSON is
    ``description``, read from ``regmap_path``.

    Device calls run on one worker thread, under one lock: requests from all clients are
    serialised, and a long ``run`` or ``drain`` does not stop the event loop from accepting
    connections (the device library's calls release the GIL)."""

    def __init__(self, device, description, regmap_path=None, access=None, read_key=None):
        from .access import AccessControl
        super().__init__("snic-device")
        if not isinstance(description, dict) or "registers" not in description:
            raise TypeError(f"Description must be a design JSON object with registers, "
                            f"not {description!r}")
        self.device = device
        self.description = description
        #: Roles, grants and denials (:mod:`supernic.driver.access`).
        self.access = access or AccessControl(description)
        self._held = []         # delivered packets popped from the device, not yet by their tenant
        # The tenant key of a frame, or None (what a tenant may push is checked on it): the
        # parser model's reading (supernic.sim.parser_model.tenant_key_reader) for a virtual
        # device; without one a tenant may push nothing.
        self._read_key = read_key
        self.regmap_path = str(regmap_path) if regmap_path else None
        self._lock = asyncio.Lock()

    # --- requests ----------------------------------------------------------------------------

    def handle(self, request):
        """Carry out one request on the device (blocking); return the result object."""
        op = request.get("op")
        handler = getattr(self, f"_op_{op}", None) if isinstance(op, str) else None
        if handler is None:
            raise ValueError(f"unknown op {op!r} (known: {', '.join(self.ops())})")
        return handler(request)

    @classmethod
    def ops(cls):
        return sorted([name[4:] for name in dir(cls) if name.startswith("_op_")]
                      + list(_ACCESS_OPS))

    def _op_hello(self, request):
        result = {"protocol": PROTOCOL_VERSION, "design": self.description.get("top"),
                  "build_id": self.description.get("build_id"),
                  "data_width": self.device.data_width, "ports": self.device.port_count,
                  "cycle": self.device.cycle, "regmap_path": self.regmap_path}
        if request.get("regmap", True):
            result["regmap"] = self.description
        return result

    def _op_read32(self, request):
        value, response = self.device.access(False, _integer(request, "address", 0, 2**32 - 4))
        return {"value": value, "response": int(response)}

    def _op_write32(self, request):
        _, response = self.device.access(
            True, _integer(request, "address", 0, 2**32 - 4),
            _integer(request, "value", 0, 2**32 - 1), _integer(request, "strobe", 0, 15, 15))
        return {"response": int(response)}

    def _op_push(self, request):
        port = _integer(request, "port", 0, self.device.port_count - 1)
        self.device.push(port, _frame(request), _integer(request, "at", default=0))
        return {"queued": self.device.queued(port)}

    def _batch(self, request):
        """``(port, frame, at)`` of each packet of a ``push_batch``, all checked first."""
        ports, frames = request.get("ports"), request.get("frames_b64")
        at = request.get("at", [0] * len(ports) if isinstance(ports, list) else None)
        if not all(isinstance(x, list) for x in (ports, frames, at)) \
                or not len(ports) == len(frames) == len(at):
            raise ValueError("push_batch needs lists ports, frames_b64 (and at) of one length")
        high = self.device.port_count - 1
        return [(_integer({"port": p}, "port", 0, high), _base64(f, "frames_b64 entries"),
                 _integer({"at": a}, "at")) for p, f, a in zip(ports, frames, at)]

    def _op_push_batch(self, request):
        for port, frame, cycle in self._batch(request):
            self.device.push(port, frame, cycle)
        return {"queued": [self.device.queued(p) for p in range(self.device.port_count)]}

    def _op_run(self, request):
        self.device.run(_integer(request, "cycles"))
        return {"cycle": self.device.cycle,
                "queued": [self.device.queued(p) for p in range(self.device.port_count)],
                # Held packets (popped from the device by a tenant, not theirs) wait too.
                "delivered": self.device.delivered_waiting() + len(self._held)}

    def _op_drain(self, request):
        cycles = self.device.run_until_drained(
            quiet=_integer(request, "quiet", 1, default=200),
            max_cycles=_integer(request, "max_cycles", 1, default=10_000_000))
        return {"cycles": cycles, "cycle": self.device.cycle}

    def _op_pop(self, request, role=None):
        """Every delivered packet to the operator; a tenant's own to a tenant (the rest are
        held for whoever pops next)."""
        self._held += self.device.pop()
        if role is None or role.tenant is None:
            mine, self._held = self._held, []
        else:
            tenants = self._tenants_of(self._held)
            mine = [d for d, t in zip(self._held, tenants) if t == role.tenant]
            self._held = [d for d, t in zip(self._held, tenants) if t != role.tenant]
        return {"packets": [{"data": d.data.hex(), "first_user": _hex_user(d.first_user),
                             "last_user": _hex_user(d.last_user), "first_cycle": d.first_cycle,
                             "last_cycle": d.last_cycle, "beats": d.beats}
                            for d in mine]}

    def _tenants_of(self, packets):
        """The NIC tag's tenant of each delivered packet (a design with no tenants: none)."""
        if not packets or "user_width" not in self.description:
            return [None] * len(packets)
        from .traffic import delivered_tags
        return [int(t) for t in delivered_tags(packets, self.description)["tenant"]]

    def _frame_keys(self, request):
        """The tenant key of each frame a push carries (``None`` for a frame with none): what
        a tenant may send is checked on these."""
        frames = ([_frame(request)] if request.get("op") == "push"
                  else [frame for _, frame, _ in self._batch(request)])
        return [self._read_key(frame) for frame in frames]

    def _op_ingress(self, request):
        port = _integer(request, "port", 0, self.device.port_count - 1, 0)
        return {"cycles": self.device.ingress_cycles(port)}

    def _op_cycle(self, request):
        return {"cycle": self.device.cycle}

    def _op_reset(self, request):
        self.device.reset(_integer(request, "cycles", 1, default=4))
        return {"cycle": self.device.cycle}

    def _op_idle(self, request):
        self.device.set_idle(_integer(request, "port", 0, self.device.port_count - 1),
                             request.get("prob"), _integer(request, "seed", default=0))
        return {}

    def _op_backpressure(self, request):
        self.device.set_backpressure(request.get("prob"), _integer(request, "seed", default=0))
        return {}

    def _op_shutdown(self, request):
        return {}

    # --- access: answered by the server, not the device --------------------------------------

    def _access_op(self, role, request):
        """``(role, result)`` of an access op; ``role`` is the connection's from now on."""
        op = request["op"]
        if op == "auth":
            found = self.access.login(role, request.get("token"))
            result = {"role": found.kind}
            if found.tenant is not None:
                result["tenant"] = found.tenant
            return found, result
        if op == "grant":
            granted = self.access.grant(request.get("tenant"), request.get("regions"),
                                        request.get("keys", []))
            return role, {"token": granted.token}
        if op == "revoke":
            tenant = _integer(request, "tenant")
            return role, {"revoked": self.access.revoke(tenant)}
        return role, self.access.report(role)

    # --- connections -------------------------------------------------------------------------

    async def _reply(self, request, role=None):
        """``(reply, role)``: the request checked against the connection's ``role`` and, if
        allowed, carried out; ``auth`` may change the role."""
        reply = {"id": request.get("id")}
        try:
            if request.get("op") in ("push", "push_batch"):
                # A tenant's frames are read by the parser model (about 160 us each): on the
                # worker, so a large batch does not stop the loop serving other connections.
                await asyncio.get_running_loop().run_in_executor(
                    self._worker, functools.partial(
                        self.access.check, role, request,
                        key_of=self._frame_keys if self._read_key is not None else None))
            else:
                self.access.check(role, request)
            if request.get("op") in _ACCESS_OPS:
                role, result = self._access_op(role, request)
            else:
                handle = self.handle
                if request.get("op") == "pop":
                    handle = functools.partial(self._op_pop, role=role)
                async with self._lock:
                    result = await asyncio.get_running_loop().run_in_executor(
                        self._worker, handle, request)
            reply.update(ok=True, result=result)
        except Exception as e:  # noqa: BLE001: any failure goes back to the client, one line
            text = str(e).splitlines()[0] if str(e) else type(e).__name__
            reply.update(ok=False, error=text)
        return reply, role

    def _operator_token(self):
        return self.access.operator.token


@contextlib.contextmanager
def serving_in_thread(server, socket_path, timeout=30.0):
    """Serve ``server`` (a :class:`DeviceServer`) on ``socket_path`` from a thread of its own
    while the block runs, for a caller in this process that talks to it through the socket
    (tests, benches); it stops when the block ends."""
    import threading
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start(socket_path))
        started.set()
        loop.run_until_complete(server.serve())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        if not started.wait(timeout):
            raise ServerError(f"the device server did not start on {socket_path} within "
                              f"{timeout} s")
        yield server
    finally:
        loop.call_soon_threadsafe(server.request_shutdown)
        thread.join(timeout)


def serve_mapped(bar, regmap_path, socket_path=None, port=None, size=None, announce=print,
                 serial=None, baud=None):
    """Serve a board's registers, the BAR ``bar`` (or with ``serial`` the UART bridge on that
    port) that ``regmap_path`` (the design JSON) describes, until shutdown, SIGINT or SIGTERM
    (:mod:`supernic.driver.board`)."""
    from .board import MappedDevice
    from .transport import MmapBus
    socket_path = None if port is not None else Path(socket_path or default_socket())
    check_endpoint_free(socket_path, port)
    try:
        description = json.loads(Path(regmap_path).read_text())
    except (OSError, ValueError) as e:
        raise ServerError(f"cannot read the design description {regmap_path}: {e}") from None
    if not isinstance(description, dict) or "registers" not in description:
        raise ServerError(f"{regmap_path} is not a design description (no registers)")
    if serial is not None:
        from .serial_bus import SerialBus
        bus = SerialBus(serial, **({"baud": baud} if baud else {}))
    else:
        try:
            bus = MmapBus(bar, size=size)
        except (OSError, ValueError) as e:
            raise ServerError(f"cannot map {bar}: {e}") from None
    with bus:
        asyncio.run(serve(DeviceServer(MappedDevice(bus, description), description,
                                        regmap_path), socket_path, port, announce))


async def serve(server, socket_path, port, announce):
    """Run ``server`` on its endpoint until shutdown, SIGINT or SIGTERM; ``announce`` gets one
    line saying where it listens."""
    endpoint = await server.start(socket_path, port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.request_shutdown)
    description = server.description
    announce(f"serving {description.get('top')} ({server.device.data_width}-bit, build "
             f"{description.get('build_id', 0):#010x}, pid {os.getpid()}) on {endpoint}")
    try:
        await server.serve()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
