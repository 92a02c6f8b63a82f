"""Who may do what on a device server: the operator, and each tenant on its own blocks.

SuperNIC shares one NIC between tenants "efficiently and safely" (arXiv 2109.07744, section 1);
the data path isolates them, and this module makes the control path as strict. The device server
(:mod:`supernic.driver.server`) checks every request of every connection here, before the
device sees it:

* A connection presents a token (the ``auth`` op). Without one it may only say ``hello``.
* The **operator**'s token is made when the server starts and written to a file only its owner
  can read, beside the socket (:func:`token_file`), where the client library finds it, so the
  operator's commands need no flag. The operator may do everything.
* A **tenant**'s token is issued by the operator (``grant``, at deploy) and revoked by it
  (``revoke``, at undeploy; a connection holding it is refused from its next request). A tenant
  may read and write the register blocks of its own regions (``r<region>_...``, its chain
  instances' NTs), read the design's identity and its own registers in the blocks every tenant
  shares (``t<tenant>_...`` and ``r<region>_...`` of the scheduler, store and egress: its
  queue, dispatch and delivery counters), and ask the cycle. On the virtual device, a test
  harness, it may also send traffic, but only frames that carry one of its own keys (the
  VLAN ID or VXLAN VNI the classifier maps to it, as the parser model reads the frame: a frame
  with another tenant's key, or none, is refused whole), run the device and pop its own
  delivered packets (the server keeps the others' for them). Everything else is the
  operator's: other blocks (classifiers, region control, where state is captured and
  restored), ingress timestamps, idle and backpressure patterns, ``reset``, ``shutdown``,
  grants.
* A refusal is ``ok: false`` with a one-line reason starting ``denied:``; it changes nothing,
  the connection stays usable, and it is counted per role (the ``access`` op reports it).

Tokens are 256 random bits (:func:`secrets.token_hex`) and are compared in constant time
against every live token (:func:`hmac.compare_digest`), so a guess learns nothing from timing.
"""

import hmac
import os
import re
import secrets
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..desc.errors import SnicError
from .tenant_scope import RegisterScope, region_prefixes

__all__ = ["OPERATOR", "TENANT", "TENANT_OPS", "AccessDenied", "Role", "AccessControl",
           "new_token", "token_file", "tenant_token_file", "write_token", "read_token"]

OPERATOR, TENANT = "operator", "tenant"
#: Ops a connection may use before it presents a token.
ANONYMOUS_OPS = frozenset({"hello", "auth"})
#: Ops a tenant may use (reads and writes are checked address by address).
TENANT_OPS = frozenset({"hello", "auth", "access", "cycle", "read32", "write32", "push",
                        "push_batch", "run", "drain", "pop"})
#: Blocks every tenant shares whose per-tenant and per-region registers a tenant may read.
SHARED_COUNTER_BLOCKS = ("scheduler", "store", "egress")


class AccessDenied(SnicError):
    """A request its connection's role may not make (the message is the reply's one line)."""


def new_token():
    return secrets.token_hex(32)


@dataclass(eq=False)
class Role:
    """What one token allows: the operator's, or one tenant's ``scope`` over its ``regions``."""
    kind: str
    token: str
    tenant: int | None = None
    regions: tuple = ()
    scope: RegisterScope | None = None
    keys: frozenset = frozenset()
    revoked: bool = False
    denials: int = 0

    @property
    def name(self):
        return OPERATOR if self.kind == OPERATOR else f"tenant {self.tenant}"


def _own_registers(regmap_json, tenant, regions):
    """``(block, register)`` pairs of the shared blocks that hold this tenant's figures."""
    own = re.compile(r"(t%d|%s)_" % (tenant, "|".join(f"r{r}" for r in regions) or "(?!)"))
    return [(block["name"], register["name"]) for block in regmap_json["blocks"]
            if block["name"] in SHARED_COUNTER_BLOCKS
            for register in block["registers"] if own.match(register["name"])]


class AccessControl:
    """The roles of one device server: the operator's token and the tenants' grants, the
    check every request passes, and the denials counted per role."""

    def __init__(self, description, operator_token=None):
        if not isinstance(description, dict) or "registers" not in description:
            raise TypeError(f"Description must be a design JSON object with registers, "
                            f"not {description!r}")
        self.regmap_json = description["registers"]
        self.tenants = description.get("config", {}).get("tenants")
        self.operator = Role(OPERATOR, operator_token or new_token())
        self._grants = {}           # tenant -> Role
        self.denials = Counter()    # "operator", "tenant", "anonymous"

    # --- grants ------------------------------------------------------------------------------
    def grant(self, tenant, regions, keys=()):
        """A new token for ``tenant`` over the blocks of ``regions``, sending frames with
        ``keys``; an earlier grant of the tenant is revoked (its token stops working)."""
        if not isinstance(tenant, int) or isinstance(tenant, bool) or tenant < 0 or (
                self.tenants is not None and tenant >= self.tenants):
            bound = f" below {self.tenants}" if self.tenants is not None else ""
            raise ValueError(f"tenant must be an integer from 0{bound}, not {tenant!r}")
        if not isinstance(regions, list) or not regions:
            raise ValueError(f"regions must be a non-empty list of region numbers, "
                             f"not {regions!r}")
        if not isinstance(keys, (list, tuple)) or not all(
                isinstance(k, int) and not isinstance(k, bool) and 0 <= k < 2 ** 24
                for k in keys):
            raise ValueError(f"keys must be a list of tenant keys (0 to 2**24-1), not {keys!r}")
        prefixes = region_prefixes(regions)
        self.revoke(tenant)
        scope = RegisterScope(self.regmap_json, tenant, prefixes,
                              readable_registers=_own_registers(self.regmap_json, tenant,
                                                                regions))
        role = Role(TENANT, new_token(), tenant, tuple(regions), scope, frozenset(keys))
        self._grants[tenant] = role
        return role

    def revoke(self, tenant):
        """Revoke ``tenant``'s token; whether it had one."""
        role = self._grants.pop(tenant, None)
        if role is not None:
            role.revoked = True
        return role is not None

    def grants(self):
        return dict(self._grants)

    def authenticate(self, token):
        """The role ``token`` belongs to, or ``None``. Every live token is compared, in
        constant time, whatever matches first."""
        if not isinstance(token, str):
            return None
        found = None
        candidate = token.encode()
        for role in [self.operator, *self._grants.values()]:
            if hmac.compare_digest(candidate, role.token.encode()):
                found = role
        return found

    def login(self, role, token):
        """The role ``token`` gives a connection whose role is ``role`` now; an unknown (or
        revoked) token is a denial, counted against ``role``."""
        found = self.authenticate(token)
        if found is None:
            self._deny(role, "unknown or revoked token")
        return found

    # --- the check ---------------------------------------------------------------------------
    def check(self, role, request, key_of=None):
        """Raise :class:`AccessDenied` (and count it) unless ``role`` (``None``: no token yet)
        may make ``request``. ``key_of(request)`` gives the tenant keys of the frames a push
        carries (``None`` for a frame with none); without it a tenant may not push."""
        reason = self._reason(role, request, key_of)
        if reason is not None:
            self._deny(role, reason)

    def _deny(self, role, reason):
        self.denials["anonymous" if role is None else role.kind] += 1
        if role is not None:
            role.denials += 1
        raise AccessDenied(f"denied: {reason}")

    def _reason(self, role, request, key_of):
        op = request.get("op")
        if role is None:
            if op in ANONYMOUS_OPS:
                return None
            return (f"{op!r} needs a token (the operator's is in the file beside the device's "
                    f"socket; a tenant's comes from the operator)")
        if role.revoked:
            return f"the token of {role.name} was revoked (undeployed)"
        if role.kind == OPERATOR:
            return None
        if op not in TENANT_OPS:
            return f"{role.name} may not {op!r} (the operator's)"
        if op in ("read32", "write32"):
            address = request.get("address")
            if not isinstance(address, int) or isinstance(address, bool):
                return f"{role.name} gave no integer address"
            allowed = (role.scope.may_read(address) if op == "read32"
                       else role.scope.may_write(address))
            if not allowed:
                return role.scope.refusal("read" if op == "read32" else "write", address)
        if op in ("push", "push_batch"):
            if key_of is None:
                return (f"{role.name} may not push here: this server cannot read frames' "
                        f"tenant keys")
            for key in key_of(request):
                if key not in role.keys:
                    what = "no tenant key" if key is None else f"key {key}"
                    return (f"{role.name} may send only frames with its own keys "
                            f"({', '.join(map(str, sorted(role.keys))) or 'none'}); "
                            f"a frame has {what}")
        return None

    def report(self, role):
        """What the ``access`` op answers: all of it to the operator, its own to a tenant."""
        if role.kind == OPERATOR:
            return {"role": OPERATOR, "denials": dict(self.denials),
                    "tenants": {str(t): {"regions": list(r.regions), "keys": sorted(r.keys),
                                         "denials": r.denials}
                                for t, r in sorted(self._grants.items())}}
        return {"role": TENANT, "tenant": role.tenant, "regions": list(role.regions),
                "keys": sorted(role.keys), "blocks": list(role.scope.blocks),
                "denials": role.denials}


# --- token files ------------------------------------------------------------------------------
def token_file(endpoint):
    """Where the operator's token of the server at ``endpoint`` lives: ``<socket>.token``
    beside a Unix socket, ``tcp-<port>.token`` beside the default socket for TCP."""
    from .server import default_socket
    text = str(endpoint)
    for prefix in ("unix:", "tcp:"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    match = re.fullmatch(r"[\w.-]+:(\d+)", text)
    if match:
        return default_socket().parent / f"tcp-{match.group(1)}.token"
    path = Path(text)
    return path.with_name(path.name + ".token")


def tenant_token_file(endpoint, tenant):
    """Where ``snic deploy`` writes tenant ``tenant``'s token for the server at ``endpoint``."""
    base = token_file(endpoint)
    return base.with_name(base.name[:-len(".token")] + f".tenant{tenant}.token")


def write_token(path, token):
    """Write ``token`` to ``path``, readable and writable by its owner only (created so, never
    widened for a moment)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return path


def read_token(path):
    """The token in ``path``, or ``None`` if there is no such file or it cannot be read."""
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None
