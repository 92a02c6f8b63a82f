"""A client of a served rack (``snic rack serve``, :mod:`supernic.sim.rack.serve`): what
``snic rack status``, ``deploy``, ``undeploy``, ``migrate``, ``traffic`` and ``stop`` use.

    with rack_connection() as rack:       # $SNIC_CACHE/run/rack.sock, its operator token
        rack.request("deploy", tenant="alice")
"""

import asyncio
import contextlib
import os
from pathlib import Path

from ..desc.errors import SnicError
from .access import read_token, token_file
from .client import open_unix
from .server import ProtocolError, read_message, write_message

__all__ = ["RackClient", "RackError", "RackUnavailable", "rack_connection",
           "default_rack_socket", "tenant_token_file"]


def default_rack_socket():
    """``$SNIC_CACHE/run/rack.sock`` (beside the device server's socket)."""
    from ..cache import cache_root
    return cache_root() / "run" / "rack.sock"


def tenant_token_file(endpoint, tenant):
    """Where ``snic rack deploy`` keeps a tenant's token: ``<socket>.<tenant>.token``."""
    path = token_file(endpoint)
    return path.with_name(path.name[:-len(".token")] + f".{tenant}.token")


class RackError(SnicError):
    """The rack refused or failed a request (one line, from the server)."""
    exit_code = 2


class RackUnavailable(SnicError):
    """No rack is serving on the endpoint, or the connection was lost."""
    exit_code = 2


class RackClient:
    """One connection to a served rack; every call runs its request to completion."""

    def __init__(self, socket_path=None, port=None):
        self.endpoint = (f"tcp:127.0.0.1:{port}" if port is not None
                         else f"unix:{Path(socket_path or default_rack_socket())}")
        self._loop = asyncio.new_event_loop()
        self._ids = 0
        try:
            self._reader, self._writer = self._loop.run_until_complete(
                asyncio.open_connection("127.0.0.1", port) if port is not None
                else open_unix(self.endpoint[len("unix:"):]))
        except (FileNotFoundError, ConnectionRefusedError):
            self._loop.close()
            raise RackUnavailable(f"no rack is serving on {self.endpoint.split(':', 1)[1]} "
                                  f"(start one with `snic rack serve rack.toml`)") from None
        except OSError as e:
            self._loop.close()
            raise RackUnavailable(f"cannot connect to the rack on {self.endpoint}: "
                                  f"{e.strerror or e}") from None
        # A tenant's token where $SNIC_TOKEN_FILE names one (snic rack deploy wrote it), else
        # the operator's beside the socket, as for the device server.
        self.role = None
        named = os.environ.get("SNIC_TOKEN_FILE")
        token = read_token(named) if named else read_token(token_file(self.endpoint))
        if named and token is None:
            self.close()
            raise RackError(f"cannot read a token from $SNIC_TOKEN_FILE ({named})")
        if token is not None:
            self.role = self.request("auth", token=token)

    def request(self, op, **arguments):
        """Send one request; return its result or raise :class:`RackError`."""
        self._ids += 1
        try:
            reply = self._loop.run_until_complete(self._exchange(
                {"op": op, "id": self._ids, **arguments}))
        except (ConnectionError, ProtocolError) as e:
            raise RackUnavailable(f"connection to the rack on {self.endpoint} lost ({e}); is "
                                  f"`snic rack serve` still running?") from None
        if reply is None:
            raise RackUnavailable(f"the rack on {self.endpoint} closed the connection; is "
                                  f"`snic rack serve` still running?")
        if not reply.get("ok"):
            raise RackError(reply.get("error", "request failed"))
        return reply.get("result", {})

    async def _exchange(self, message):
        write_message(self._writer, message)
        await self._writer.drain()
        return await read_message(self._reader)

    def close(self):
        self._writer.close()
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(self._writer.wait_closed())
        self._loop.close()


@contextlib.contextmanager
def rack_connection(socket_path=None, port=None):
    client = RackClient(socket_path, port)
    try:
        yield client
    finally:
        client.close()
