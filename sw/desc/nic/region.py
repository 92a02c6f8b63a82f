"""A region's register block: loading personalities, its counters, the state port of the
state-yielding transform and the link registers; and the names of its NTs' blocks."""

from ..registers import R, RW, W1P, Register, RegisterBlock

__all__ = ["region_block", "region_register_blocks", "personality_block_name", "REGION_TYPE",
           "DEFAULT_RECONFIG_CYCLES", "STATE_REGISTERS", "link_registers"]

REGION_TYPE = 0x5245474E  # 'REGN'
#: A partial bitstream of a few MB over ICAP at 400 MB/s takes milliseconds; scaled down so
#: that simulations see a reconfiguration within thousands of cycles. Software sets the real
#: figure for its board.
DEFAULT_RECONFIG_CYCLES = 2000


def personality_block_name(region, chain, node):
    return f"r{region}_{chain}_{node}"


#: Registers of a region whose personalities are under the state-yielding transform
#: (hw/transform): the state port of the personality ``state_select`` names. Writing
#: ``state_addr`` moves the port to an address; each read of ``state_rdata`` returns the word
#: there and moves on, each write of ``state_wdata`` writes it and moves on, in the state
#: map's address order: a capture or a restore is one bus transaction a word.
#: ``state_stopped`` is 0 until a stop is done, and while a move into the scan chain turns it.
#: The words' meaning is the personality's state map.
STATE_REGISTERS = (
    Register("state_select", 8, RW, doc="Personality the state registers reach"),
    Register("state_stop", 1, RW, doc="1: stop the selected personality; 0: resume it"),
    Register("state_at_boundary", 1, RW, reset=1,
             doc="1: stop at the next packet boundary after draining; 0: stop at once"),
    Register("state_stopped", 1, R, doc="1 when the selected personality is stopped"),
    Register("state_trapped", 1, R,
             doc="1 when a Print of the selected personality trapped (see its state map)"),
    Register("state_addr", 32, RW, strobe=True,
             doc="Write: move the state port to this address (see the state map)"),
    Register("state_rdata", 32, R, strobe=True,
             doc="The state word at the port's address; a read moves to the next"),
    Register("state_wdata", 32, RW, strobe=True,
             doc="Write: write this word at the port's address and move to the next"),
)


def link_registers(branch):
    """Registers of a region that is the primary of a link (hw/nic/link.py)."""
    return (
        Register("link", 1, RW, doc=f"1: run the secondary branches in region {branch} "
                 f"(takes effect once both regions are empty)"),
        Register("linked", 1, R, doc="1 while the link is in effect"),
        Register("link_branch", 8, R, doc="The branch region of this link"),
    )


def region_block(index, personalities, yieldable=False, link_branch=None):
    # 1.1: the link registers. 2.0: the state port moves on by itself (access strobes).
    # 2.1: inject_stall.
    return RegisterBlock(f"region{index}", REGION_TYPE, 0x0002_0001, [
        Register("personalities", 8, R, doc="Number of chain personalities built in"),
        Register("active", 8, R, doc="Personality loaded now"),
        Register("online", 1, R, doc="1 when the region takes packets (not reconfiguring)"),
        Register("header_only", 1, R, doc="1 when the active personality takes header beats"),
        Register("load_index", 8, RW, doc="Personality the next load strobe loads"),
        Register("load", 1, W1P, doc="Write 1: drain, then load personality load_index"),
        Register("reconfig_cycles", 32, RW, reset=DEFAULT_RECONFIG_CYCLES,
                 doc="Cycles a load keeps the region offline after draining"),
        Register("loads", 32, R, doc="Completed loads"),
        Register("packets_in", 64, R, doc="Packets that entered the region"),
        Register("packets_out", 64, R, doc="Packets that left the region"),
        Register("offline_cycles", 64, R, doc="Cycles spent offline (draining or loading)"),
        Register("inject_stall", 1, RW,
                 doc="Fault injection: 1 makes the chain stop dead (no beat taken or offered, "
                     "and the scheduler is not told), to check that a stalled chain costs "
                     "the other tenants nothing; 0 lets it run on"),
        *(STATE_REGISTERS if yieldable else ()),
        *(link_registers(link_branch) if link_branch is not None else ()),
    ], doc="Region: " + ", ".join(s.name for s in personalities))


def region_register_blocks(index, personalities, yieldable=False, link_branch=None):
    """The region's block, then one per NT of each personality."""
    blocks = [region_block(index, personalities, yieldable, link_branch)]
    for spec in personalities:
        blocks += [n.task.register_block(personality_block_name(index, spec.name, n.name),
                                         n.params)
                   for n in spec.node_list()]
    return blocks
