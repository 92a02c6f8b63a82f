"""`snic rack serve`: a rack of sNICs (:class:`~supernic.sim.rack.rack.Rack`, its sNICs Ray
actors) kept running for the driver CLI, which deploys, migrates and sends traffic to it.

    snic rack serve chains/racks/pool.toml &      # prints "serving rack pool on unix:..."
    snic rack deploy --all
    snic rack traffic --flow alice:rate=0.9 --cycles 20000
    snic rack migrate bob --to nic2
    snic rack status

The rack's simulated time moves only inside a ``traffic`` request (its flows offered for its
cycles, then the rack run until drained) and inside a migration (which runs windows until the
move is done): between requests it stands still, so what ``status`` shows is exact.

Protocol: the device server's (:mod:`supernic.driver.server`): a 4-byte big-endian length and
a JSON object each way, one request at a time per connection; requests from all connections
run one after another on the rack, on one worker thread (a long ``traffic`` does not stop the
server from accepting connections). Access: the socket is owner-only and a connection must
present a token before any op but ``hello`` and ``auth``: the operator's (written beside the
socket, ``<socket>.token``) may do everything; a tenant's (``grant``, which ``snic rack deploy``
asks for and writes to ``<socket>.<tenant>.token``) may send traffic of its own flows only and
sees its own part of ``status`` and of a traffic summary, as a tenant of one sNIC does on the
device server.

===========  =====================================  ==============================================
op           arguments                              result
===========  =====================================  ==============================================
hello        (none)                                 ``protocol``, ``kind`` ("rack"), ``rack``,
                                                    ``topology``, ``nics``, ``tenants``, ``cycle``
auth         ``token``                              ``role`` ("operator")
status       (none)                                 :func:`~supernic.sim.rack.run.summarize` over
                                                    every packet sent since the rack started
deploy       ``tenant`` or ``all`` (bool), ``nic``  ``placed``: list of ``tenant``, ``nic``,
             and ``instances`` (optional)           ``slot``, ``regions``
undeploy     ``tenant``, ``nic``                    (empty)
migrate      ``tenant``, ``to``                     the move's report (``from``, ``to``,
                                                    ``region``, ``held``, ``cycles``, ...)
traffic      ``flows`` ({tenant: [flow spec]}),     the summary over this request's packets
             ``cycles``, ``seed``
grant        ``tenant``                             ``token``: the tenant's (operator only)
shutdown     (none)                                 (empty); the server then stops
===========  =====================================  ==============================================
"""

import asyncio
import hmac
from pathlib import Path

from ...desc.errors import SnicError
from ...driver.access import new_token
from ...driver.rack_client import default_rack_socket, tenant_token_file
from ...driver.server import FramedServer, check_endpoint_free
from ...driver.traffic import parse_flow
from .pool import PoolControl, PoolPolicy
from .rack import Rack
from .run import DEFAULT_FLOW, summarize

__all__ = ["RackServer", "serve_rack", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1
_ANONYMOUS = frozenset({"hello", "auth"})
#: What a tenant's token may do: its own traffic and its own part of the status.
_TENANT_OPS = frozenset({"hello", "auth", "status", "traffic"})
#: A traffic request's largest cycle count: the request holds the rack until it is done.
MAX_TRAFFIC_CYCLES = 10_000_000


def _text(request, key, optional=False):
    value = request.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} must be a name, not {value!r}")
    return value


def _count(request, key, default, low, high):
    value = request.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{key!r} must be an integer from {low} to {high:,}, not {value!r}")
    return value


class RackServer(FramedServer):
    """Serves ``rack`` (a :class:`Rack`); every request runs on one worker thread."""

    kind = "rack"
    _initial_state = False      # a connection has not shown the operator's token yet

    def __init__(self, rack):
        super().__init__("snic-rack")
        self.rack = rack
        self.sent = {name: [] for name in rack.tenants}     # every packet since the start
        self._traffic_runs = 0
        self.token = new_token()
        self.tenant_tokens = {}         # tenant name -> its token (grant)

    # --- requests --------------------------------------------------------------------------

    def handle(self, request):
        op = request.get("op")
        handler = getattr(self, f"_op_{op}", None) if isinstance(op, str) else None
        if handler is None:
            raise ValueError(f"unknown op {op!r} (known: {', '.join(self.ops())})")
        return handler(request)

    @classmethod
    def ops(cls):
        return sorted(name[4:] for name in dir(cls) if name.startswith("_op_")) + ["auth"]

    def _op_hello(self, request):
        rack = self.rack
        return {"protocol": PROTOCOL_VERSION, "kind": "rack", "rack": rack.config.name,
                "topology": rack.config.topology, "nics": list(rack.nics),
                "tenants": list(rack.tenants), "cycle": rack.now}

    def _op_status(self, request):
        return summarize(self.rack, self.sent)

    def _op_deploy(self, request):
        if request.get("all"):
            return {"placed": self.rack.deploy_all()}
        instances = request.get("instances")
        if instances is not None:
            instances = _count(request, "instances", None, 1, 64)
        return {"placed": [self.rack.deploy(_text(request, "tenant"),
                                            _text(request, "nic", optional=True), instances)]}

    def _op_undeploy(self, request):
        self.rack.undeploy(_text(request, "tenant"), _text(request, "nic"))
        return {}

    def _op_migrate(self, request):
        return self.rack.migrate(_text(request, "tenant"), _text(request, "to"))

    def _op_traffic(self, request):
        rack = self.rack
        cycles = _count(request, "cycles", 20_000, 1, MAX_TRAFFIC_CYCLES)
        seed = _count(request, "seed", 1, 0, 2**31)
        given = request.get("flows") or {}
        if not isinstance(given, dict):
            raise ValueError("'flows' must map tenants to lists of flow specs")
        unknown = sorted(set(given) - set(rack.tenants))
        if unknown:
            raise SnicError(f"no tenant {unknown[0]!r} in rack {rack.config.name} (its "
                            f"tenants: {', '.join(rack.tenants)})")
        # Every flow is checked before any is offered: a bad one leaves the rack untouched.
        flows = {}
        for name, specs in given.items():
            if not isinstance(specs, list) or not all(isinstance(x, str) for x in specs):
                raise ValueError(f"flows of {name!r} must be a list of flow specs")
            flows[name] = [parse_flow(f"tenant=0,{spec}" if spec else "tenant=0")
                           for spec in specs]
        if not flows:      # none given: every deployed tenant at the default rate
            flows = {name: [parse_flow(f"tenant=0,{DEFAULT_FLOW}")]
                     for name, t in rack.tenants.items() if t.instances}
        if not flows:
            raise SnicError(f"rack {rack.config.name} runs no tenant yet (snic rack deploy)")
        for name in flows:
            if not rack.tenants[name].instances:
                raise SnicError(f"tenant {name} is not deployed (snic rack deploy {name})")
        # Each request its own seeds: the same flows twice are not the same packets twice.
        base = seed + 7919 * self._traffic_runs
        self._traffic_runs += 1
        sent = {}
        for k, name in enumerate(sorted(flows)):
            sent[name] = rack.send(name, flows[name], cycles=cycles, seed=base + 101 * k)
            self.sent[name] += sent[name]
        rack.run(cycles)
        rack.run_until_drained()
        return summarize(rack, sent)

    def _op_shutdown(self, request):
        return {}

    def _op_grant(self, request):
        name = _text(request, "tenant")
        if name not in self.rack.tenants:
            raise SnicError(f"no tenant {name!r} in rack {self.rack.config.name}")
        token = self.tenant_tokens.setdefault(name, new_token())
        return {"token": token}

    @staticmethod
    def _own_part(summary, tenant):
        """A summary as a tenant sees it: its own figures and the rack-wide account."""
        return {**{k: summary[k] for k in ("rack", "topology", "cycles", "window_cycles")
                   if k in summary},
                "nics": {}, "tenants": {tenant: summary["tenants"][tenant]}
                if tenant in summary["tenants"] else {},
                "moves": [m for m in summary.get("moves", []) if m.get("tenant") == tenant],
                "account": summary["account"], "role": "tenant", "tenant": tenant}

    # --- connections ---------------------------------------------------------------------

    async def _reply(self, request, role):
        """``role``: False before a token, True for the operator, a tenant's name for it."""
        reply = {"id": request.get("id")}
        op = request.get("op")
        try:
            if op == "auth":
                token = request.get("token")
                if not isinstance(token, str):
                    raise PermissionError("denied: not a token of this rack")
                if hmac.compare_digest(token, self.token):
                    role, result = True, {"role": "operator"}
                else:
                    name = next((n for n, t in self.tenant_tokens.items()
                                 if hmac.compare_digest(token, t)), None)
                    if name is None:
                        raise PermissionError("denied: not a token of this rack")
                    role, result = name, {"role": "tenant", "tenant": name}
            elif op not in _ANONYMOUS and role is False:
                raise PermissionError(f"denied: {op!r} needs a token (the operator's is in the "
                                      f"file beside the rack's socket)")
            elif isinstance(role, str) and op not in _TENANT_OPS:
                raise PermissionError(f"denied: {op!r} is the operator's; tenant {role} may "
                                      f"send its traffic and read its status")
            elif isinstance(role, str) and op == "traffic" and (
                    set(request.get("flows") or {}) - {role} or not request.get("flows")):
                raise PermissionError(f"denied: tenant {role} may send its own flows only")
            else:
                result = await asyncio.get_running_loop().run_in_executor(
                    self._worker, self.handle, request)
                if isinstance(role, str) and op in ("status", "traffic"):
                    result = self._own_part(result, role)
            reply.update(ok=True, result=result)
        except Exception as e:  # noqa: BLE001: any failure goes back to the client, one line
            text = str(e).splitlines()[0] if str(e) else type(e).__name__
            reply.update(ok=False, error=text)
        return reply, role

    def _default_socket(self):
        return default_rack_socket()

    async def close(self):
        # Tenants' tokens die with the server: their files (snic rack deploy wrote them) go.
        endpoint = self.endpoint
        await super().close()
        if endpoint is not None:
            for name in self.tenant_tokens:
                tenant_token_file(endpoint, name).unlink(missing_ok=True)

    def _operator_token(self):
        return self.token


def serve_rack(config, socket_path=None, port=None, address=None, ray=True, policy=True,
               interval=5_000, deploy=False, progress=print, announce=print):
    """Start ``config``'s rack (a local Ray unless ``address``; no Ray with ``ray=False``),
    the pool's policy acting every ``interval`` cycles of traffic (``policy``), every tenant
    deployed first with ``deploy``; serve it until a ``shutdown`` request or Ctrl-C."""
    if port is None:
        # Refused before Ray starts and the sNICs are built, not minutes later.
        check_endpoint_free(Path(socket_path or default_rack_socket()))
    else:
        check_endpoint_free(port=port)
    with Rack(config, address=address, ray=ray, progress=progress) as rack:
        if rack.pool and policy:
            rack.policy = PoolPolicy(PoolControl(rack), interval=interval)
        if deploy:
            for p in rack.deploy_all():
                progress(f"deployed {p['tenant']} on {p['nic']} (regions "
                         f"{', '.join(map(str, p['regions']))})")

        async def main():
            server = RackServer(rack)
            endpoint = await server.start(socket_path, port)
            announce(f"serving rack {config.name} on {endpoint} ({len(rack.nics)} sNICs, "
                     f"{rack.config.topology}; operator token {server.token_path})")
            await server.serve()
        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            pass
