"""tests/order.py: the parallel suite's order, longest first, balanced over worksteal's first shares.
Items stand in for pytest's (a nodeid is all it reads). ~0.1 s."""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.order import arrange, shares


@dataclass(frozen=True)
class Item:
    nodeid: str


def _loads(order: list[Item], workers: int, cost: dict[str, float]) -> list[float]:
    out, start = [], 0
    for size in shares(len(order), workers):
        out.append(sum(cost[i.nodeid] for i in order[start : start + size]))
        start += size
    return out


def test_shares_are_what_worksteal_sends_first():
    # xdist 3.8 check_schedule: node i of k gets len(pending) // (k - i) of what is left
    assert shares(10, 4) == [2, 2, 3, 3]
    assert shares(1335, 4) == [333, 334, 334, 334]
    assert sum(shares(7, 3)) == 7


def test_long_modules_are_spread_and_start_first_and_a_module_stays_together():
    rng = random.Random(4)
    cost, items = {}, []
    for m in range(40):  # 4 long modules in a row (collection order would give one worker all), many short
        n = rng.randint(1, 6)
        for t in range(n):
            nodeid = f"tests/m{m:02d}.py::t{t}"
            cost[nodeid] = 200.0 / n if m < 4 else rng.uniform(0.01, 5)  # a long module: 200 s in all
            items.append(Item(nodeid))
    order = arrange(items, 4, lambda i: cost[i.nodeid], lambda i: False)
    assert sorted(i.nodeid for i in order) == sorted(i.nodeid for i in items)  # a permutation
    first = [order[start] for start in (0, *[sum(shares(len(items), 4)[:k]) for k in (1, 2, 3)])]
    assert sorted(i.nodeid.split("::")[0] for i in first) == [f"tests/m{m:02d}.py" for m in range(4)]
    in_collection = _loads(items, 4, cost)
    balanced = _loads(order, 4, cost)
    assert max(balanced) - min(balanced) < 60 < max(in_collection) - min(in_collection), (balanced, in_collection)
    # within a share, each module's tests are consecutive (its module fixtures run once); a module
    # is cut only where a share is full
    start, cuts = 0, 0
    for size in shares(len(order), 4):
        share = [i.nodeid.split("::")[0] for i in order[start : start + size]]
        runs = [m for k, m in enumerate(share) if k == 0 or share[k - 1] != m]
        assert len(runs) == len(set(runs)), share
        cuts += len(set(share))
        start += size
    assert cuts - 40 <= 3  # at most one module cut at each of the three inner edges
    assert arrange(items, 4, lambda i: cost[i.nodeid], lambda i: False) == order  # every worker: the same


def test_an_alone_test_goes_last_in_its_share():
    items = [Item(f"tests/a.py::t{k}") for k in range(3)] + [Item("tests/solo.py::t"), Item("tests/b.py::t")]
    cost = {i.nodeid: 10.0 for i in items}
    order = arrange(items, 1, lambda i: cost[i.nodeid], lambda i: i.nodeid == "tests/solo.py::t")
    assert order[-1].nodeid == "tests/solo.py::t"
