"""A tenant's chain or DAG of NTs as one component, built from a :class:`ChainSpec`.

Stages connect back to back, stream to stream, with nothing in between: a chain adds exactly
the latency of its NTs and runs at the rate of its slowest NT. A :class:`Parallel` stage is a
:class:`~.fork.PacketFork` into its branches and a :class:`~.join.PacketJoin` after them.

``tasks`` maps node names to the NT instances, built in the constructor so that a parent can
connect each NT's ``csr`` port to its register block (the block is named after the node).
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..parser.meta import meta_layout
from ..nt.task import task_class
from ..stream import PacketSignature
from .fork import PacketFork
from .join import PacketJoin
from ...desc.chain import ChainSpec, Parallel

__all__ = ["TaskGraph"]


class TaskGraph(wiring.Component):
    def __init__(self, spec: ChainSpec, data_width, header_bytes=256):
        self.spec = spec
        self.data_width = data_width
        self.meta_layout = meta_layout(header_bytes)
        self.tasks = {n.name: task_class(n.kind)(data_width, header_bytes, **n.params)
                      for n in spec.node_list()}
        sig = PacketSignature(data_width, self.meta_layout)
        super().__init__({"i": In(sig), "o": Out(sig)})

    def register_blocks(self):
        return [n.task.register_block(n.name, n.params) for n in self.spec.node_list()]

    def elaborate(self, platform):
        m = Module()
        for name, task in self.tasks.items():
            m.submodules[name] = task
        prev = wiring.flipped(self.i)
        for index, stage in enumerate(self.spec.stages):
            if isinstance(stage, Parallel):
                n = len(stage.branches)
                fork = PacketFork(self.data_width, self.meta_layout, n)
                join = PacketJoin(self.data_width, self.meta_layout, n, stage.primary)
                m.submodules[f"fork{index}"] = fork
                m.submodules[f"join{index}"] = join
                wiring.connect(m, prev, fork.i)
                for out, inp, branch in zip(fork.outputs(), join.inputs(), stage.branches):
                    cur = out
                    for node in branch:
                        task = self.tasks[node.name]
                        wiring.connect(m, cur, task.i)
                        cur = task.o
                    wiring.connect(m, cur, inp)
                prev = join.o
            else:
                task = self.tasks[stage.name]
                wiring.connect(m, prev, task.i)
                prev = task.o
        wiring.connect(m, prev, wiring.flipped(self.o))
        return m
