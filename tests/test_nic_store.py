"""Packet store: the model's slicing rules, constructor errors, and the hardware (with stub
regions) against the model on Verilator at 64 bits: random sizes from 1 byte to past the store,
mixed header-only and full regions, wrong tags, misrouted packets, random idle, backpressure
and region stalls, and a store small enough to refuse packets."""

import pytest

from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.store import PacketStore
from supernic.sim.nic.store import PacketStoreModel
from supernic.sim.parser_model import ParserModel
from supernic.sim.session import run_bench
from supernic.sim.tb.store_tb import store_simulator, stub_region_fn

# 64 header bytes at 64 bits: H = 8 header beats; 3 regions leave region index 3 unused.
SHAPE = NicShape(data_width=64, header_bytes=64, tenants=4, ports=2, regions=3)
STORE_BEATS, REGION_FIFO_BEATS, IN_FLIGHT = 64, 16, 8
# Short, so the stalled-region test runs quickly; the random tests' region stalls (48 in 256
# per cycle and side) must still never reach it.
STALL_CYCLES = 64
MODULE = "supernic.sim.tb.store_tb"


def _model(header_only, store_beats=STORE_BEATS):
    return PacketStoreModel(SHAPE, store_beats, header_only,
                            lambda r, f: stub_region_fn(r, f, SHAPE.beat_bytes))


def _hdr():
    return ParserModel(SHAPE.header_bytes).parse(bytes(100))


def _tag(region, beats, seq=0):
    return {"tenant": 1, "port": 0, "seq": seq, "beats": beats, "region": region}


def test_model_header_only_reattaches_payload():
    model = _model([True, False, False])
    frame = bytes([0x10]) + bytes(range(1, 100))   # 13 beats: 8 header, 5 payload
    out = model.dispatch(frame, _hdr(), _tag(0, 13))
    assert out.region_frame == frame[:64]
    assert out.out_frame == bytes([0x11]) + frame[1:]
    assert out.droppable and not out.must_drop and not out.header_error
    full = model.dispatch(frame, _hdr(), _tag(1, 13))
    assert full.region_frame == frame and full.out_frame == bytes([0x12]) + frame[1:]
    assert not full.droppable


def test_model_partial_header_beat_is_an_error_not_a_gap():
    model = _model([True, True, True])
    frame = bytes([0x0F]) + bytes(99)          # the stub trims the last header byte
    out = model.dispatch(frame, _hdr(), _tag(0, 13))
    assert out.header_error and out.out_frame == bytes([0x10]) + bytes(62)
    assert out.out_hdr["flags"]["keep_error"] == 1


def test_model_wrong_tags():
    model = _model([True, True, True])
    frame = bytes(100)
    short = model.dispatch(frame, _hdr(), _tag(0, 10))      # 2 payload beats declared of 5
    assert short.out_frame == bytes([1]) + bytes(79) and short.out_hdr["flags"]["keep_error"]
    none = model.dispatch(frame, _hdr(), _tag(0, 8))        # nothing past the header declared
    assert none.out_frame == bytes([1]) + bytes(63) and not none.droppable
    assert none.out_hdr["flags"]["keep_error"]
    early = model.dispatch(bytes(30), _hdr(), _tag(0, 12))   # ends inside the header part
    assert early.out_frame == bytes([1]) + bytes(29) and early.out_hdr["flags"]["keep_error"]
    assert model.dispatch(frame, _hdr(), _tag(3, 13)).region is None
    huge = model.dispatch(bytes(1000), _hdr(), _tag(0, 125))
    assert huge.must_drop


@pytest.mark.parametrize("kwargs, message", [
    ({"store_beats": 100}, "Packet store store_beats must be a power of two, not 100"),
    ({"store_beats": 1}, "Packet store store_beats must be an integer from 2 to 65536, not 1"),
    ({"region_fifo_beats": 1},
     "Packet store region_fifo_beats must be an integer from 2 to 16383, not 1"),
    ({"in_flight": "8"}, "Packet store in_flight must be an integer from 2 to 4096, not '8'"),
    ({"stall_cycles": -1},
     "Packet store stall_cycles must be an integer from 0 to 16777216, not -1"),
    ({"region_fifo_beats": 4}, "Packet store region_fifo_beats (4) must hold a header part "
                               "(8 beats): the stall watchdog never cuts one"),
])
def test_constructor_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        PacketStore(SHAPE, **kwargs)
    assert str(info.value) == message


def test_constructor_needs_a_header_beat():
    with pytest.raises(ValueError, match="header bytes must cover at least one beat"):
        PacketStore(NicShape(data_width=512, header_bytes=32))


@pytest.fixture(scope="module")
def simulator():
    return store_simulator(SHAPE, STORE_BEATS, REGION_FIFO_BEATS, IN_FLIGHT, STALL_CYCLES)


def _check_accounting(result):
    assert result["mismatches"] == 0
    assert (result["packets_out"] + result["store_drops"] + result["misrouted"]
            == result["packets_in"])
    assert result["store_used"] == 0 and result["region_in_flight"] == [0, 0, 0]
    assert result["stall_drops"] == result["stall_cuts"] == result["region_stalled"] == 0
    assert result["region_free"] == [REGION_FIFO_BEATS] * 3 and result["region_empty"] == 7
    assert 0 < result["store_peak"] <= STORE_BEATS
    # Region time: each beat into a region takes at least a cycle of valid.
    assert sum(result["region_cycles"]) == sum(result["region_busy"])
    assert all(c >= b for c, b in zip(result["region_busy"], result["region_beats"]))
    assert all(c >= b for c, b in zip(result["region_cycles"], result["tenant_beats"]))


@pytest.mark.parametrize("header_only, idle, backpressure", [
    (0b011, "random", "random"),
    (0b101, "bursty", "bursty"),
])
def test_hardware_matches_model(simulator, header_only, idle, backpressure, tmp_path):
    result = run_bench(simulator, "random_traffic", {
        "seed": header_only, "packets": 3000, "header_only": header_only,
        "idle": idle, "backpressure": backpressure, "stall": 48,
    }, test_dir=tmp_path, module=MODULE)
    _check_accounting(result)
    assert result["store_drops"] > 0 and result["misrouted"] > 0
    assert result["with_payload"] > 100 and result["header_errors"] > 0


@pytest.mark.parametrize("size, header_only", [(64, 0b000), (200, 0b111), (60, 0b111)])
def test_saturation_has_no_bubbles(simulator, size, header_only, tmp_path):
    """Structural: packets back to back, round robin across regions, no gaps once primed."""
    result = run_bench(simulator, "saturation", {
        "size": size, "packets": 200, "header_only": header_only,
    }, test_dir=tmp_path, module=MODULE)
    assert result["packets_out"] == 200 and result["store_drops"] == 0
    assert result["in_beats_per_cycle"] > 0.95 and result["out_beats_per_cycle"] > 0.95


def test_a_stalled_region_does_not_hold_the_others(simulator, tmp_path):
    """Region 0 stops with a packet twice its buffer half-way in: after ``STALL_CYCLES`` the
    packet is cut and counted, region 1's packets behind it pass, and region 0 serves again
    once it thaws. Then region 1 stops half-way through giving a packet back: the packet
    leaves cut short and flagged, region 0's packet behind it passes, and region 1 serves
    again once it thaws; the same with a packet half-way in as well as out, which is cut once
    (the bench checks every packet's bytes against the stub's model)."""
    result = run_bench(simulator, "stalled_region", {}, test_dir=tmp_path, module=MODULE)
    assert result["passed_while_frozen"] == [3, 4]
    assert result["delivered"] == [3, 4, 1, 6, 7, 8, 9, 10, 11, 12]
    assert result["final"]["stall_drops"] == 2 and result["final"]["stall_cuts"] == 2
    assert result["final"]["region_stalled"] == 0


def test_full_side_fifo_closes_the_region():
    """With ``in_flight`` packets inside region 0 (which never takes a beat), region 0 reads
    no room and not empty, and the next packet for it waits on ``i``; region 1 stays open."""
    from amaranth.sim import Simulator

    store = PacketStore(SHAPE, STORE_BEATS, REGION_FIFO_BEATS, in_flight=2)
    seen = {}

    async def bench(ctx):
        ctx.set(store.i.p.meta.tag.beats, 1)
        ctx.set(store.i.p.last, 1)
        ctx.set(store.i.p.keep, 0xFF)
        ctx.set(store.i.valid, 1)
        taken = 0
        for _ in range(8):
            _, _, ready = await ctx.tick().sample(store.i.ready)
            taken += ready
        seen["taken"] = taken
        seen["ready"] = ctx.get(store.i.ready)
        seen["free"] = [ctx.get(store.region_free[r]) for r in range(3)]
        seen["empty"] = ctx.get(store.region_empty)
        seen["in_flight"] = ctx.get(store.region_in_flight[0])

    sim = Simulator(store)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["taken"] == 2 and seen["ready"] == 0 and seen["in_flight"] == 2
    assert seen["free"] == [0, REGION_FIFO_BEATS, REGION_FIFO_BEATS]
    assert seen["empty"] == 0b110
