"""One control-plane transaction: a plan of register steps, carried out with a journal and undone
backwards when a step fails.

Every operation of the control plane (:mod:`.control`: deploy, a deploy split over linked
regions, undeploy, migrate, switch, rebalance, scale out and in) is a plan of the steps below,
run by one :class:`Transaction`:

    tx = Transaction(registers)                   # a Registers over the device's bus
    try:
        await tx.run([Load(2, 1), Write("scheduler", "r2_cost", 0x180), ...,
                      Staged("tenant 0's flow table", writes, undo=put_back)])
    except Exception as e:
        problems = await tx.undo()                # [] when everything was put back

Steps
-----
:class:`Write` writes one register; :class:`Load` loads a personality into a region and polls
until it is online; :class:`Commit` polls a flow-table commit; :class:`Linked` polls a link;
:class:`Poll` waits for any condition; :class:`Staged` groups the writes that go through staging
registers and a strobe into write-only hardware (classifier slots, flow tables), with the steps
that put the old contents back; :class:`Action` runs a sequence of its own (a state move, a
context switch) with its own undo. An action may run further steps in the same transaction
(:meth:`Transaction.run` from inside it): they are journaled and undone like the rest.

The journal and the undo
------------------------
Before the first write of a read-write register the transaction reads it and keeps the value.
:meth:`Transaction.undo` walks the steps that started backwards: a :class:`Write` (and a
:class:`Load`'s ``load_index``) puts back the value its register had before the transaction;
a :class:`Staged` group runs its ``undo`` steps, which go through the journal too, so a staging
register they touch that the plan had not reached yet is put back as well; an :class:`Action`
runs its ``undo``. What the undo touched last is put back at the end. Reverse order matters:
a deploy's last step enables the tenant, so its undo first disables it, before its classifier
entries and flow table go.

Every undo step is tried, whatever failed before it (the failures are returned, one line each),
except when the transport is gone (:class:`~.transport.TransportLost`): nothing more can reach
the device, so the undo stops and :attr:`Transaction.gone` is set.

A transaction made with ``undoable=False`` keeps no journal (no reads before writes): an
operation that recovers by running again rather than backwards (undeploy) uses it.

What the journal cannot restore: a personality loaded stays loaded (the region's
``load_index`` is put back; loading the old personality again would cost another
reconfiguration, and the region is free), and strobed writes into an NT's own tables.
"""

import asyncio
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from ..desc.errors import SnicError
from .transport import TransportLost

__all__ = ["ControlError", "DeployRefused", "DeployFailed", "ControlTimeout", "Registers",
           "Write", "Load", "Commit", "Linked", "Poll", "Staged", "Action", "Transaction"]


class ControlError(SnicError):
    """A control-plane operation could not be carried out (one line); it failed on the device
    (exit code 1) unless refused (:class:`DeployRefused`, 2)."""
    exit_code = 1


class DeployRefused(ControlError):
    """Refused before any write: a bad request, unknown tenant, oversubscription, a key
    another tenant holds, a design this driver does not support."""
    exit_code = 2


class DeployFailed(ControlError):
    """The hardware failed mid-way (bus error, timeout); what was done has been undone."""


class ControlTimeout(ControlError):
    """A handshake (region load, table commit, drain) did not complete in time."""


async def _no_wait():
    await asyncio.sleep(0)


class Registers:
    """The registers of a described design by name, over ``bus``.

    ``description``: the design JSON (its ``registers``); ``wait``: an async callable run
    between two polls (a served virtual device only advances when asked); ``timeout``:
    seconds a poll may take."""

    def __init__(self, bus, description, wait=None, timeout=10.0):
        self.bus = bus
        self.wait = wait or _no_wait
        self.timeout = timeout
        self._info = {(b["name"], r["name"]): r for b in description["registers"]["blocks"]
                      for r in b["registers"]}

    def __contains__(self, key):
        return key in self._info

    def items(self):
        return self._info.items()

    def info(self, block, reg):
        try:
            return self._info[(block, reg)]
        except KeyError:
            raise DeployRefused(f"register {block}.{reg} is not in the design") from None

    def reset(self, block, reg):
        return self.info(block, reg)["reset"]

    async def read(self, block, reg):
        # Lo word first: the order the register file's latch needs for an atomic 64-bit value.
        info = self.info(block, reg)
        value = 0
        for part in range(info["words"]):
            value |= await self.bus.read32(info["address"] + 4 * part) << (32 * part)
        return value & ((1 << info["width"]) - 1)

    async def write(self, block, reg, value):
        info = self.info(block, reg)
        for part in range(info["words"]):
            await self.bus.write32(info["address"] + 4 * part, value >> (32 * part) & 0xFFFF_FFFF)

    def check(self, block, reg, value):
        """Refuse a write the design cannot take (before any write of a plan)."""
        info = self.info(block, reg)
        if info["access"] == "R":
            raise DeployRefused(f"register {block}.{reg} is read-only")
        if not isinstance(value, int) or isinstance(value, bool) \
                or not 0 <= value < 2 ** info["width"]:
            raise DeployRefused(f"value for {block}.{reg} must fit in {info['width']} bits, "
                                f"not {value!r}")

    async def poll(self, what, done):
        """Wait until ``await done()``; :class:`ControlTimeout` after :attr:`timeout` s."""
        deadline = time.monotonic() + self.timeout
        while not await done():
            if time.monotonic() > deadline:
                raise ControlTimeout(f"timed out after {self.timeout} s waiting for {what}")
            await self.wait()


# --- steps --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Write:
    block: str
    reg: str
    value: int


@dataclass(frozen=True)
class Load:
    """Load personality ``index`` into ``region`` and wait until it is online and active."""
    region: int
    index: int
    name: str = ""


@dataclass(frozen=True)
class Commit:
    """Wait until ``tenant``'s flow-table commit has taken effect (``commit_pending``)."""
    tenant: int


@dataclass(frozen=True)
class Linked:
    """Wait until ``region``'s link reads ``value`` (hw/nic/link.py: it closes once both
    regions of the pair are empty)."""
    region: int
    value: int


@dataclass(frozen=True)
class Poll:
    """Wait until ``await done()``; with ``give_up`` a timeout ends the wait and the plan goes
    on (a drain that a stalled region never finishes)."""
    what: str
    done: Callable[[], Awaitable[bool]]
    give_up: bool = False


@dataclass(frozen=True)
class Staged:
    """Writes through staging registers and a strobe into hardware that cannot be read back
    (classifier slots, flow tables): ``undo()`` returns the steps writing the old contents."""
    what: str
    steps: tuple
    undo: Callable[[], list] | None = None


@dataclass(frozen=True)
class Action:
    """A sequence of its own (``await run()``), undone by ``await undo()`` if given."""
    what: str
    run: Callable[[], Awaitable] = field(repr=False)
    undo: Callable[[], Awaitable] | None = field(default=None, repr=False)


class Transaction:
    """Runs plans of steps on :class:`Registers`, journaling, and undoes them (module
    docstring). ``started``: the steps begun, in order; ``completed``: those done; ``gone``: the undo found the transport
    lost; ``problems``: what the last undo could not put back."""

    def __init__(self, registers, undoable=True):
        self.regs = registers
        self.undoable = undoable
        self.journal = {}       # (block, register) -> value before the first write
        self.started = []
        self.completed = []
        self.problems = []
        self.gone = False

    def check(self, plan):
        """Refuse a plan with a write the design cannot take, before any write."""
        for step in plan:
            if isinstance(step, Write):
                self.regs.check(step.block, step.reg, step.value)
            elif isinstance(step, Staged):
                self.check(step.steps)

    async def run(self, plan):
        for step in plan:
            self.started.append(step)
            await self._do(step)
            self.completed.append(step)

    async def _do(self, step):
        regs = self.regs
        if isinstance(step, Write):
            await self._journal(step.block, step.reg)
            await regs.write(step.block, step.reg, step.value)
        elif isinstance(step, Load):
            block = f"region{step.region}"
            await self._journal(block, "load_index")
            await regs.write(block, "load_index", step.index)
            await regs.write(block, "load", 1)

            async def loaded():
                return (await regs.read(block, "online") == 1
                        and await regs.read(block, "active") == step.index)
            await regs.poll(f"region {step.region} to load personality {step.index}"
                            + (f" ({step.name})" if step.name else ""), loaded)
        elif isinstance(step, Commit):
            async def committed():
                return not await regs.read("scheduler", "commit_pending") >> step.tenant & 1
            await regs.poll(f"tenant {step.tenant}'s flow table commit", committed)
        elif isinstance(step, Linked):
            async def linked():
                return await regs.read(f"region{step.region}", "linked") == step.value
            await regs.poll(f"region {step.region}'s link to "
                            f"{'take effect' if step.value else 'open'}", linked)
        elif isinstance(step, Poll):
            try:
                await regs.poll(step.what, step.done)
            except ControlTimeout:
                if not step.give_up:
                    raise
        elif isinstance(step, Staged):
            for inner in step.steps:
                await self._do(inner)
        elif isinstance(step, Action):
            await step.run()
        else:
            raise TypeError(f"Not a plan step: {step!r}")

    async def _journal(self, block, reg):
        key = (block, reg)
        if self.undoable and key not in self.journal \
                and self.regs.info(block, reg)["access"] == "RW":
            self.journal[key] = await self.regs.read(block, reg)

    async def undo(self):
        """Undo the steps that started, backwards (module docstring); return what could not
        be undone, one line each."""
        if not self.undoable:
            raise TypeError("This transaction keeps no journal: it cannot be undone")
        problems = []
        restored = set()

        async def attempt(what, coroutine):
            if self.gone:
                coroutine.close()
                return
            try:
                await coroutine
            except TransportLost:
                self.gone = True
            except Exception as e:  # noqa: BLE001: keep undoing the rest
                problems.append(f"{what}: {e}")

        async def put_back(block, reg):
            key = (block, reg)
            if key in self.journal and key not in restored:
                restored.add(key)
                await attempt(f"restoring {block}.{reg}",
                              self.regs.write(block, reg, self.journal[key]))

        started, self.started = self.started, []
        for step in reversed(started):
            if isinstance(step, Write):
                await put_back(step.block, step.reg)
            elif isinstance(step, Load):
                await put_back(f"region{step.region}", "load_index")
            elif isinstance(step, Staged) and step.undo is not None:
                await attempt(f"putting back {step.what}", self.run(step.undo()))
            elif isinstance(step, Action) and step.undo is not None:
                await attempt(f"undoing {step.what}", step.undo())
        for block, reg in reversed(list(self.journal)):
            await put_back(block, reg)
        self.started = []
        self.problems = problems
        return problems
