"""The ``scenario:NAME,seed=N,key=value...`` trace spec: parsed and opened as a fault-scenario simulator.

The simulator itself is ``producers.scenarios`` (``ClusterSim``), the scenarios ``producers.scenario_suite``; this
module only reads the spec the trace registry hands over (``laggard run --trace scenario:cpu-2x,seed=3``).

>>> parse_spec("cpu-2x,seed=3,nodes=40")
('cpu-2x', 3, {'nodes': 40})
"""

from __future__ import annotations

from typing import Any

from producers.keyvalues import parse_key_values
from producers.scenario_suite import SCENARIOS
from producers.scenarios import ClusterSim


def parse_spec(text: str) -> tuple[str, int, dict[str, Any]]:
    """``"cpu-2x,seed=3,nodes=40"`` -> (name, seed, overrides); ValueError names what is wrong."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise ValueError("scenario: name a scenario, e.g. scenario:cpu-2x,seed=1")
    values = parse_key_values(parts[1:], "scenario", ("seed", "nodes", "hours", "rate", "checkpoints",
                                                       "progress_noise"),
                              lambda key, raw: float(raw))
    seed = int(values.pop("seed", 1))
    changes: dict[str, Any] = {key: int(v) if key == "nodes" else v for key, v in values.items()}
    name = parts[0]
    return name, seed, changes


def open_scenario(text: str) -> ClusterSim:
    """The open-loop simulator of ``scenario:NAME,seed=N,...``; ValueError for an unknown name or key.

    >>> sim = open_scenario("cpu-2x,seed=2,nodes=10,hours=0.2")
    >>> sim.scenario.nodes, sim.seed, len(sim.ground_truth["slow_nodes"])
    (10, 2, 2)
    """
    name, seed, changes = parse_spec(text)
    if name not in SCENARIOS:
        raise ValueError(f"scenario: unknown scenario {name!r} (known: {', '.join(SCENARIOS)})")
    try:
        return ClusterSim(SCENARIOS[name].scaled(**changes), seed)
    except ValueError as exc:
        raise ValueError(f"scenario: {exc}") from None
