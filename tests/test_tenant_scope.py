"""Register access scoped per tenant (sw/driver/tenant_scope.py), over the in-memory buses of
sw/driver/transport.py with the register file's reference model behind them."""

import asyncio

import pytest

from supernic.driver.discovery import discover, read_register, write_register
from supernic.driver.tenant_scope import TenantScopedBus, TenantView, region_prefixes
from supernic.driver.transport import MemoryBus
from supernic.desc.registers import RW, Register, RegisterBlock, RegisterMap
from supernic.sim.csr_model import RegisterFileModel

ID_TYPE, PARS_TYPE, NT_TYPE = 0x534E4943, 0x50415253, 0x4E540001


def nt_block(name):
    return RegisterBlock(name, NT_TYPE, 0x0001_0000, [
        Register("packets", 64), Register("enable", 1, RW, reset=1), Register("limit", 32, RW)])


def nic_map():
    """Regions 0, 1 and 10: a tenant with region 1 must not reach region 10 by prefix."""
    return RegisterMap([
        RegisterBlock("id", ID_TYPE, 0x0001_0000, [Register("build")]),
        RegisterBlock("parser", PARS_TYPE, 0x0001_0000, [Register("malformed", 64)]),
        nt_block("r0_web_acl"), nt_block("r0_web_nat"),
        nt_block("r1_dns_acl"), nt_block("r10_web_acl"),
    ])


def setup(prefixes=("r1",), tenant=2):
    regmap = nic_map()
    model = RegisterFileModel(regmap)
    bus = MemoryBus(model)
    return regmap, model, TenantScopedBus(bus, regmap.to_json(), tenant, prefixes)


def run(coroutine):
    return asyncio.run(coroutine)


def test_blocks_by_prefix():
    regmap, _, scoped = setup(("r1",))
    assert scoped.blocks == ("r1_dns_acl",)
    assert setup(("r0", "r10"))[2].blocks == ("r0_web_acl", "r0_web_nat", "r10_web_acl")
    assert setup(("r0_web_n",))[2].blocks == ()
    assert setup(("r0_web_",))[2].blocks == ("r0_web_acl", "r0_web_nat")
    assert region_prefixes([1, 10]) == ("r1", "r10")


def test_own_block_reads_and_writes():
    regmap, model, scoped = setup()
    json = regmap.to_json()
    model.set_input("r1_dns_acl", "packets", 0x1_2345_6789)
    assert run(read_register(scoped, json, "r1_dns_acl", "packets")) == 0x1_2345_6789
    run(write_register(scoped, json, "r1_dns_acl", "limit", 77))
    assert model.get("r1_dns_acl", "limit") == 77
    # The header words are the tenant's too.
    assert run(scoped.read32(regmap.address_of("r1_dns_acl", "type"))) == NT_TYPE


def test_shared_block_is_read_only():
    regmap, _, scoped = setup()
    address = regmap.address_of("id", "type")
    assert run(scoped.read32(address)) == ID_TYPE
    with pytest.raises(PermissionError) as info:
        run(scoped.write32(address, 0))
    assert str(info.value) == "Tenant 2 may not write 0x00000000 (block 'id', shared read-only)"


@pytest.mark.parametrize("block", ["r10_web_acl", "r0_web_nat", "parser"])
def test_other_blocks_are_refused_and_untouched(block):
    regmap, model, scoped = setup()
    address = regmap.address_of(block, "type")
    with pytest.raises(PermissionError) as info:
        run(scoped.read32(address))
    assert str(info.value) == (f"Tenant 2 may not read {address:#010x} "
                               f"(block {block!r}, not one of its blocks)")
    if block != "parser":
        limit = regmap.address_of(block, "limit")
        with pytest.raises(PermissionError, match=f"may not write {limit:#010x}"):
            run(scoped.write32(limit, 5))
        assert model.get(block, "limit") == 0


def test_address_in_no_block_is_refused():
    regmap, _, scoped = setup()
    gap = regmap.bases["id"] + regmap.block("id").size     # between id and parser
    with pytest.raises(PermissionError) as info:
        run(scoped.read32(gap))
    assert str(info.value) == f"Tenant 2 may not read {gap:#010x} (no register block)"
    with pytest.raises(PermissionError, match="no register block"):
        run(scoped.read32(regmap.size + 0x1000))


def test_discovery_walk_is_refused():
    _, _, scoped = setup()
    with pytest.raises(PermissionError, match="block 'parser', not one of its blocks"):
        run(discover(scoped))


def test_view_by_name():
    regmap, model, _ = setup()
    view = TenantView(MemoryBus(model), regmap.to_json(), "acme", region_prefixes([0]))
    assert view.blocks == ("r0_web_acl", "r0_web_nat") and view.tenant == "acme"
    run(view.write("r0_web_nat", "enable", 0))
    assert model.get("r0_web_nat", "enable") == 0
    assert run(view.read("r0_web_nat", "enable")) == 0
    model.set_input("id", "build", 0x2024)
    assert run(view.read("id", "build")) == 0x2024
    with pytest.raises(PermissionError) as info:
        run(view.write("r1_dns_acl", "limit", 1))
    assert str(info.value) == ("Tenant 'acme' may not write block 'r1_dns_acl' "
                               "(not one of its blocks)")
    with pytest.raises(PermissionError, match="may not write block 'id' \\(shared read-only\\)"):
        run(view.write("id", "build", 1))
    with pytest.raises(PermissionError, match="may not read block 'nonexistent'"):
        run(view.read("nonexistent", "packets"))
    with pytest.raises(KeyError, match="No register named 'nope' in block 'r0_web_acl'"):
        run(view.read("r0_web_acl", "nope"))
    assert model.get("r1_dns_acl", "limit") == 0


def test_wraps_a_plain_memory_bus():
    """Any RegisterBus: here plain memory, where the scope still decides before the bus."""
    regmap = nic_map()
    memory = {address: 0 for address in range(0, regmap.size, 4)}
    scoped = TenantScopedBus(MemoryBus(memory), regmap.to_json(), 0, ["r0"])
    address = regmap.address_of("r0_web_acl", "limit")
    run(scoped.write32(address, 0xABCD))
    assert memory[address] == 0xABCD
    with pytest.raises(PermissionError):
        run(scoped.write32(regmap.address_of("r1_dns_acl", "limit"), 1))


@pytest.mark.parametrize("args, error, message", [
    (({}, {"blocks": []}, 0, ["r0"]), TypeError, "Scoped bus must wrap a RegisterBus, not {}"),
    ((MemoryBus(), {}, 0, ["r0"]), TypeError, "Register map must be the JSON of a RegisterMap, "
                                              "not {}"),
    ((MemoryBus(), {"blocks": []}, None, ["r0"]), ValueError,
     "Tenant must be an integer or a name, not None"),
    ((MemoryBus(), {"blocks": []}, 0, "r0"), ValueError,
     "Allowed prefixes must be a sequence of strings, not 'r0'"),
    ((MemoryBus(), {"blocks": []}, 0, ["r0", ""]), ValueError,
     "Allowed prefixes must be a sequence of non-empty strings, not ('r0', '')"),
])
def test_errors(args, error, message):
    with pytest.raises(error) as info:
        TenantScopedBus(*args)
    assert str(info.value) == message
    with pytest.raises(ValueError, match="Region must be a non-negative integer, not -1"):
        region_prefixes([-1])
