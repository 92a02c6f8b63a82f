"""Liveness seeds (hw/transform/seeds.py): a seed is checked before the analysis starts from
it, never trusted, and the seeds shipped with the package still hold for the library's NTs."""

import pytest
from amaranth.hdl import Fragment

from supernic.hw.nt.task import task_classes
from supernic.hw.transform.inventory import rewrite_prints, take_inventory
from supernic.hw.transform.liveness import analyse, seed_holds
from supernic.hw.transform.seeds import load_shipped, seed_key


def _fresh(cls, width):
    component = cls(width)
    fragment = Fragment.get(component, None)
    return fragment, component, take_inventory(fragment, rewrite_prints(fragment))


def _analysed(cls, width, seed):
    fragment, component, inventory = _fresh(cls, width)
    return analyse(fragment, component, inventory, (), True, seed=seed)


def _names(lv):
    return sorted(".".join((*path, sig.name)) for path, _f, sig in lv.live)


def test_a_seed_is_checked_not_trusted():
    """A correct seed gives the cold search's result; one that makes a live register dead
    (the realigner's shift state) or names a register that does not exist is refused, and
    the search from nothing gives the same result again."""
    cls = task_classes()["vlan_pop"]
    cold = _analysed(cls, 64, None)
    assert not cold.seeded and cold.seed
    seeded = _analysed(cls, 64, cold.seed)
    assert seeded.seeded
    assert _names(seeded) == _names(cold)
    assert seeded.seed == cold.seed

    # The realigner's live shift state, claimed dead under the realigner's own guard (a
    # candidate of its fragment, so only the checks can refuse it).
    lying = {**cold.seed, "realign.c_s": ["phase"]}
    assert "realign.c_s" in _names(cold)
    assert not seed_holds(*_fresh(cls, 64), lying, contract=True)
    refused = _analysed(cls, 64, lying)
    assert not refused.seeded
    assert _names(refused) == _names(cold)

    assert not seed_holds(*_fresh(cls, 64), {**cold.seed, "no_such_register": ["phase"]},
                          contract=True)
    assert seed_holds(*_fresh(cls, 64), cold.seed, contract=True)


def _shipped_cases():
    by_key = {}
    for cls in task_classes().values():
        by_key[f"{cls.__module__}.{cls.__qualname__}"] = cls
    cases = []
    for key, seed in sorted(load_shipped().items()):
        name, width, how = key.split("/")
        if name in by_key and seed:
            cases.append(pytest.param(by_key[name], int(width[1:]), how == "part", seed,
                                      id=key.rsplit(".", 1)[-1]))
    return cases


def test_every_nt_has_shipped_seeds():
    """The default design (512 bits) and the tests (64) start from a shipped seed for every
    NT of the library: a new NT without one would make a fresh machine's first build search
    (``python -m supernic.tools.liveness_seeds`` adds it)."""
    shipped = load_shipped()
    for kind, cls in task_classes().items():
        for width in (64, 512):
            component = cls(width)
            assert seed_key(component, True) in shipped or \
                seed_key(component, False) in shipped, (kind, width)


@pytest.mark.parametrize("cls,width,contract,seed", _shipped_cases())
def test_shipped_seed_holds(cls, width, contract, seed):
    fragment, component, inventory = _fresh(cls, width)
    assert seed_key(component, contract).startswith(f"{cls.__module__}.{cls.__qualname__}")
    assert seed_holds(fragment, component, inventory, seed, contract), (
        f"the shipped liveness seed of {cls.__name__} at {width} bits no longer holds: "
        f"regenerate with `python -m supernic.tools.liveness_seeds --only {cls.kind}`")
