"""The online calibration: its refusal rate holds on a light and a heavy cluster alike (a fixed threshold's
does not), it spends saved tokens on a burst of bad placements, it says where a chance ranks, and the
extender filters by it over HTTP and keeps it across a restart."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
from pathlib import Path

import aiohttp
from aiohttp import web

from adapters.extender import BlacklistFile, Extender, LiveStatus
from streams.core.avoidance.adviser import Adviser
from streams.core.avoidance.budget import refusals
from streams.core.avoidance.calibration import CalibratedBudget, restore_budget
from streams.core.avoidance.evaluation import hindsight_ceilings
from streams.core.avoidance.status import NodeStatus, NodeStatusTracker
from streams.core.avoidance.trees import CartTrees


def _cluster(load: float, seed: int, n: int = 6000) -> tuple[list[float], list[bool]]:
    """Straggling chances (heavier clusters: higher) and stragglers drawn with that chance."""
    rng = random.Random(seed)
    chances = [min(1.0, rng.random() ** 3 * load) for _ in range(n)]
    return chances, [rng.random() < c for c in chances]


def _refused_and_avoided(chances: list[float], stragglers: list[bool], budget: CalibratedBudget | None,
                         threshold: float) -> tuple[float, float]:  # fmt: skip
    refused = refusals(chances, ["a"] * len(chances), list(range(len(chances))), {"a": threshold}, budget)
    avoided = sum(r and s for r, s in zip(refused, stragglers, strict=True)) / sum(stragglers)
    return sum(refused) / len(refused), avoided


def test_the_calibrated_refusal_rate_holds_on_light_and_heavy_clusters_where_a_fixed_threshold_does_not() -> None:
    light, heavy = _cluster(1.0, 1), _cluster(3.0, 2)
    fixed = [_refused_and_avoided(*run, None, 0.75)[0] for run in (light, heavy)]
    assert fixed[0] < 0.10 < 0.3 < fixed[1]  # one threshold: right for the light cluster, far over on the heavy
    for chances, stragglers in (light, heavy):
        budget = CalibratedBudget(share=0.08, top=0.10, window=2000, burst=200, least=0.10)
        refused, avoided = _refused_and_avoided(chances, stragglers, budget, 0.0)
        assert 0.06 <= refused <= 0.08 + 1e-9  # within its rate on both, and it does refuse
        random_avoided = refused  # refusing that share at random avoids that share of stragglers
        assert avoided > 2 * random_avoided
        assert avoided <= hindsight_ceilings(chances, [True] * len(chances), stragglers, refused)[1] + 0.05


def test_saved_tokens_pay_for_a_burst_of_bad_placements_a_small_bucket_cannot() -> None:
    rng = random.Random(3)
    calm = [rng.random() * 0.3 for _ in range(3000)]
    burst = [0.9 + rng.random() * 0.1 for _ in range(300)]
    found = {}
    for size in (5, 500):
        budget = CalibratedBudget(share=0.05, top=0.10, window=5000, burst=size, least=0.10)
        for ts, value in enumerate(calm):
            budget.place(ts, value, False)  # calm hours: nothing above its floor, the tokens are saved
        found[size] = sum(budget.place(3000 + ts, value, True) for ts, value in enumerate(burst))
    assert found[5] < 30 < 100 < found[500]
    assert found[500] <= 0.05 * 3300 + 1e-9  # never more than the tokens the requests earned


def test_with_few_tokens_left_only_the_worst_are_refused() -> None:
    budget = CalibratedBudget(share=0.1, top=0.3, window=100, burst=10, least=0.05)
    for k in range(100):
        budget.observe(k / 100, earn=k >= 95)  # 100 scores 0.00-0.99; half a token saved
    assert budget.current_top() == 0.05 + 0.25 * 0.05
    assert not budget.wants(0.80) and budget.wants(0.95)  # the top 20 % is not bad enough now
    budget.tokens = 10.0
    assert budget.wants(0.80)  # with the bucket full, the top 30 % is


def test_a_restored_calibration_decides_as_the_one_it_was_taken_of() -> None:
    budget = CalibratedBudget(share=0.1, top=0.2, window=50, burst=20, least=0.05)
    for ts in range(200):
        budget.place(ts, (ts * 7) % 11 / 10, True)
    copy = restore_budget(json.loads(json.dumps(budget.snapshot())))
    assert isinstance(copy, CalibratedBudget)
    later = [(200 + ts, (ts * 5) % 13 / 10) for ts in range(100)]
    assert [copy.place(ts, v, True) for ts, v in later] == [budget.place(ts, v, True) for ts, v in later]


def _trees() -> CartTrees:
    trees = CartTrees(max_depth=2, min_samples_leaf=1)
    trees.fit("map", [{"running": float(r)} for r in range(20)], [0.0] * 10 + [0.1] * 5 + [0.7] * 5)
    return trees


def _warm(budget: CalibratedBudget) -> CalibratedBudget:
    for r in range(200):  # 200 recent requests on mostly calm nodes, earning tokens
        budget.observe([0.0, 0.0, 0.0, 0.1, 0.7][r % 5] if r % 10 else 0.1, earn=True)
    return budget


def test_the_adviser_says_where_the_chance_ranks_and_refuses_only_the_top() -> None:
    adviser = Adviser(_trees(), 0.0, budget=_warm(CalibratedBudget(0.1, 0.12, 500, 50, least=0.12)), label="p")
    busy = adviser.place("n1", "map", NodeStatus("n1", 0, running=18))
    assert busy.verdict == "avoid"
    assert busy.reason.startswith("running tasks 18 > ")
    assert "straggling chance 0.70, 0 % of the last 200 requests scored higher (refused below 12 %)" in busy.reason
    middling = adviser.place("n2", "map", NodeStatus("n2", 1, running=12))
    assert middling.verdict == "allow" and "chance 0.10, 20 % of the last 201 requests scored higher" in middling.reason
    assert adviser.priority(middling) > adviser.priority(busy)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_extender_filters_by_the_calibration_over_http_and_keeps_it_across_a_restart(tmp_path: Path) -> None:
    live = LiveStatus(NodeStatusTracker(), budget=_warm(CalibratedBudget(0.1, 0.12, 500, 50, least=0.12)))
    adviser = Adviser(_trees(), 0.0, budget=live.budget, label="p")
    running = {"node-calm": 2, "node-busy": 18}
    extender = Extender(adviser, lambda node, kind: NodeStatus(node, 0, running=running[node]),
                        BlacklistFile(None), live.lock)  # fmt: skip
    args = {"Pod": {"metadata": {"name": "p", "annotations": {"laggard.io/task-type": "map"}}, "spec": {}},
            "NodeNames": ["node-calm", "node-busy"]}  # fmt: skip
    port, loop = _free_port(), asyncio.new_event_loop()
    runner = web.AppRunner(extender.app())
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def post() -> tuple[int, dict[str, object]]:
        async with aiohttp.ClientSession() as session, session.post(
                f"http://127.0.0.1:{port}/filter", data=json.dumps(args)) as response:  # fmt: skip
            return response.status, await response.json()

    try:
        status, result = asyncio.run(post())
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
    assert status == 200 and result["NodeNames"] == ["node-calm"]
    assert "requests scored higher" in str(result["FailedNodes"])
    path = tmp_path / "state.json"
    live.save(path)
    again = LiveStatus.load(path)
    assert again is not None and isinstance(again.budget, CalibratedBudget)
    assert again.budget.snapshot() == live.budget.snapshot()
