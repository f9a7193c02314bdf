"""The bench document as ratios, targets and a table; nothing here measures anything."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _get(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for part in path.split("."):
        value = value[part]
    return value


def _latency_source(latency: dict[str, Any]) -> str:
    """Deltas when the run produced some whose period an event closed, else every ranking (node-scores)."""
    return "delta" if latency["delta"]["finish_to_output"].get("n", 0) else "ranking"


def _over(numerator: float | None, denominator: float | None) -> float | None:
    """A ratio, or None (shown as "-", target not met) when a stage measured a rate of 0 or none: one figure
    missing must not cost the document every other figure."""
    return numerator / denominator if numerator is not None and denominator else None


def ratios(document: dict[str, Any]) -> dict[str, Any]:
    """Each figure divided by its floor, and the issue's targets with whether they are met."""
    decode = document["floors"]["google_events"]
    usage = document["floors"]["usage_series"]
    statistics = document["inprocess"]["statistics"]["pipeline_per_s"]
    nurd = document["inprocess"]["nurd"]["pipeline_per_s"]
    kafka = document["kafka"]
    consume = kafka["floors"]["consume_per_s"]
    latency = kafka["latency"]
    source = _latency_source(latency)
    result: dict[str, Any] = {
        "statistics_to_orjson_floor": _over(statistics, decode["orjson_loads_per_s"]),
        "statistics_to_orjson_records": _over(statistics, decode["orjson_records_per_s"]),
        "statistics_to_codec_floor": _over(statistics, decode["codec_decode_per_s"]),
        "nurd_path_to_orjson_floor": _over(nurd, usage["orjson_loads_per_s"]),
        "nurd_path_to_codec_floor": _over(nurd, usage["codec_decode_per_s"]),
        "nurd_batch_over_nurd": document["nurd_cost"]["batch_over_nurd"],
        # normalised (the progress marks), and ranked: through the whole pipeline (kafka.ProgressWatch)
        "one_worker_to_consume_floor": _over(kafka["one_worker"]["sustained_per_s"], consume),
        "two_workers_to_consume_floor": _over(kafka["two_workers"]["sustained_per_s"], consume),
        "two_workers_over_one": _over(kafka["two_workers"]["sustained_per_s"], kafka["one_worker"]["sustained_per_s"]),
        "one_worker_ranked_to_consume_floor": _over(_ranked(kafka["one_worker"]), consume),
        "two_workers_ranked_over_one": _over(_ranked(kafka["two_workers"]), _ranked(kafka["one_worker"])),
        "fastavro_over_avro_reference": decode["fastavro_vs_avro_reference"],
        "latency_source": source,
    }
    p99 = latency[source]["finish_to_output"].get("p99_s")
    limit = latency["period_wall_s"] + 1.0
    direct = kafka.get("direct")
    direct_targets: list[dict[str, Any]] = []
    if direct is not None:  # `laggard worker --engine direct` on the same records, its consume floor beside it
        one, two, live = direct["one_worker"], direct["two_workers"], direct["latency"]
        result["direct_one_worker_to_consume_floor"] = _over(one["sustained_per_s"], direct["consume_per_s"])
        result["direct_two_workers_over_one"] = _over(two["sustained_per_s"], one["sustained_per_s"])
        result["direct_over_faust_one_worker"] = _over(one["sustained_per_s"], kafka["one_worker"]["sustained_per_s"])
        result["direct_one_worker_ranked_to_consume_floor"] = _over(_ranked(one), direct["consume_per_s"])
        result["direct_two_workers_ranked_over_one"] = _over(_ranked(two), _ranked(one))
        direct_p99 = live[_latency_source(live)]["finish_to_output"].get("p99_s")
        direct_targets = [
            _target("direct: one worker, ranked / raw consume", result["direct_one_worker_ranked_to_consume_floor"],
                    0.25, "ratio"),
            _target("direct: two workers / one worker, ranked", result["direct_two_workers_ranked_over_one"], 1.5,
                    "times"),
            {"name": f"direct: p99 finish-to-{_latency_source(live)} latency (s)", "value": direct_p99,
             "target": f"<= {limit:.2f} (period + 1 s)", "met": direct_p99 is not None and direct_p99 <= limit},
        ]  # fmt: skip
    result["targets"] = [
        _target("one worker, ranked / raw consume", result["one_worker_ranked_to_consume_floor"], 0.25, "ratio"),
        _target("two workers / one worker, ranked", result["two_workers_ranked_over_one"], 1.5, "times"),
        _target("statistics + ranking / Avro codec decode", result["statistics_to_codec_floor"], 0.5, "ratio"),
        _target("nurd-batch / nurd cost per checkpoint", result["nurd_batch_over_nurd"], 20.0, "times"),
        {"name": f"p99 finish-to-{source} latency (s)", "value": p99, "target": f"<= {limit:.2f} (period + 1 s)",
         "met": p99 is not None and p99 <= limit},
        *direct_targets,
    ]  # fmt: skip
    return result


def _ranked(scenario: dict[str, Any]) -> float | None:
    """Events per second through the whole pipeline, from the first progress mark to the last ranking
    (``kafka.ranked_figures``); None when the ranking did not rank the last boundary before the watch ended (its
    rate then says how long the feed waited, not the ranking's pace: two such Faust rankings once made "two
    workers / one worker" 5x), and from a bench before session 22."""
    value = scenario.get("ranked_per_s")
    return None if value is None or not scenario.get("ranking_finished") else float(value)


def _target(name: str, value: float | None, floor: float, unit: str) -> dict[str, Any]:
    shown = f">= {floor:.0%}" if unit == "ratio" else f">= {floor:g}x"
    return {"name": name, "value": value, "target": shown, "met": value is not None and value >= floor}


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


ROWS: list[tuple[str, str, str, int]] = [
    # (section, label, path in the document, decimals)
    ("floors", "orjson.loads, Google events (rec/s)", "floors.google_events.orjson_loads_per_s", 0),
    ("floors", "orjson + dataclass (rec/s)", "floors.google_events.orjson_records_per_s", 0),
    ("floors", "Avro codec decode (rec/s)", "floors.google_events.codec_decode_per_s", 0),
    ("floors", "fastavro raw, no mapping (rec/s)", "floors.google_events.fastavro_raw_per_s", 0),
    ("floors", "avro reference package (rec/s)", "floors.google_events.avro_reference_per_s", 0),
    ("floors", "orjson.loads, usage checkpoints (rec/s)", "floors.usage_series.orjson_loads_per_s", 0),
    ("floors", "Avro codec, usage checkpoints (rec/s)", "floors.usage_series.codec_decode_per_s", 0),
    ("floors", "fastavro raw / avro, usage checkpoints", "floors.usage_series.fastavro_vs_avro_reference", 1),
    ("floors", "Kafka produce, pre-encoded (rec/s)", "kafka.floors.produce_per_s", 0),
    ("floors", "  the same, no compression (rec/s)", "kafka.floors.produce_per_s_by_compression.none", 0),
    ("floors", "  the same, gzip (rec/s)", "kafka.floors.produce_per_s_by_compression.gzip", 0),
    ("floors", "Kafka consume, kafka-python (rec/s)", "kafka.floors.consume_per_s", 0),
    ("in-process", "Google trace reader (ev/s)", "inprocess.statistics.read_per_s", 0),
    ("in-process", "statistics + ranking (ev/s)", "inprocess.statistics.pipeline_per_s", 0),
    ("in-process", "events through it", "inprocess.statistics.events", 0),
    ("in-process", "usage-series reader (ev/s)", "inprocess.nurd.read_per_s", 0),
    ("in-process", "Nurd path (ev/s)", "inprocess.nurd.pipeline_per_s", 0),
    ("in-process", "Nurd path (checkpoints/s)", "inprocess.nurd.checkpoints_per_s", 0),
    ("nurd cost", "nurd (us/checkpoint)", "nurd_cost.nurd_us_per_checkpoint", 1),
    ("nurd cost", "nurd-batch (us/checkpoint)", "nurd_cost.nurd_batch_us_per_checkpoint", 1),
    ("nurd cost", "checkpoints", "nurd_cost.checkpoints", 0),
    ("kafka", "1 worker, sustained (ev/s)", "kafka.one_worker.sustained_per_s", 0),
    ("kafka", "1 worker, events processed", "kafka.one_worker.processed", 0),
    ("kafka", "1 worker, ranked, mark to last (ev/s)", "kafka.one_worker.ranked_per_s", 0),
    ("kafka", "1 worker, ranking behind at end (s)", "kafka.one_worker.ranking_lag_s", 1),
    ("kafka", "1 worker, CPU %", "kafka.one_worker.worker_cpu_percent", 0),
    ("kafka", "2 workers, sustained (ev/s)", "kafka.two_workers.sustained_per_s", 0),
    ("kafka", "2 workers, events processed", "kafka.two_workers.processed", 0),
    ("kafka", "2 workers, ranked, mark to last (ev/s)", "kafka.two_workers.ranked_per_s", 0),
    ("kafka", "2 workers, CPU % (sum)", "kafka.two_workers.worker_cpu_percent", 0),
    ("kafka", "1 worker, ev per worker CPU s", "kafka.one_worker.processed_per_worker_cpu_s", 0),
    ("kafka", "stall restarts, 1 / 2 workers", "kafka.one_worker.restarts", 0),
    ("direct", "Kafka consume, beside it (rec/s)", "kafka.direct.consume_per_s", 0),
    ("direct", "1 worker, sustained (ev/s)", "kafka.direct.one_worker.sustained_per_s", 0),
    ("direct", "1 worker, events processed", "kafka.direct.one_worker.processed", 0),
    ("direct", "1 worker, ranked, mark to last (ev/s)", "kafka.direct.one_worker.ranked_per_s", 0),
    ("direct", "1 worker, ranking behind at end (s)", "kafka.direct.one_worker.ranking_lag_s", 1),
    ("direct", "1 worker, CPU %", "kafka.direct.one_worker.worker_cpu_percent", 0),
    ("direct", "1 worker, ev per worker CPU s", "kafka.direct.one_worker.processed_per_worker_cpu_s", 0),
    ("direct", "2 workers, sustained (ev/s)", "kafka.direct.two_workers.sustained_per_s", 0),
    ("direct", "2 workers, ranked, mark to last (ev/s)", "kafka.direct.two_workers.ranked_per_s", 0),
    ("direct", "2 workers, CPU % (sum)", "kafka.direct.two_workers.worker_cpu_percent", 0),
    ("direct", "stall restarts, 1 / 2 workers", "kafka.direct.one_worker.restarts", 0),
    ("direct", "delta: finish -> delta p99 (s)", "kafka.direct.latency.delta.finish_to_output.p99_s", 3),
    ("direct", "ranking: finish -> scores p99 (s)", "kafka.direct.latency.ranking.finish_to_output.p99_s", 3),
    ("direct", "delta: close -> delta p99 (s)", "kafka.direct.latency.delta.close_to_output.p99_s", 3),
    ("direct", "delta: period close wait p99 (s)", "kafka.direct.latency.delta.close_wait.p99_s", 3),
    ("latency", "period in wall time (s)", "kafka.latency.period_wall_s", 2),
    ("latency", "rankings / deltas seen", "kafka.latency.rankings", 0),
    ("latency", "delta: close -> delta p50 (s)", "kafka.latency.delta.close_to_output.p50_s", 3),
    ("latency", "delta: close -> delta p99 (s)", "kafka.latency.delta.close_to_output.p99_s", 3),
    ("latency", "delta: finish -> delta p50 (s)", "kafka.latency.delta.finish_to_output.p50_s", 3),
    ("latency", "delta: finish -> delta p99 (s)", "kafka.latency.delta.finish_to_output.p99_s", 3),
    ("latency", "delta: period close wait p99 (s)", "kafka.latency.delta.close_wait.p99_s", 3),
    ("latency", "ranking: close -> scores p50 (s)", "kafka.latency.ranking.close_to_output.p50_s", 3),
    ("latency", "ranking: close -> scores p99 (s)", "kafka.latency.ranking.close_to_output.p99_s", 3),
    ("latency", "ranking: finish -> scores p50 (s)", "kafka.latency.ranking.finish_to_output.p50_s", 3),
    ("latency", "ranking: finish -> scores p99 (s)", "kafka.latency.ranking.finish_to_output.p99_s", 3),
    ("latency", "ranking: period close wait p99 (s)", "kafka.latency.ranking.close_wait.p99_s", 3),
    ("scale", "ranking s/period, 10,000 nodes", "scale.by_nodes.10000.seconds_per_period", 3),
    ("scale", "ranking s/period, 100,000 nodes", "scale.by_nodes.100000.seconds_per_period", 3),
    ("scale", "ranking MB per 1,000 nodes", "scale.by_nodes.10000.mb_per_1000_nodes", 1),
    ("scale", "running: ranking s/period, {nodes} nodes", "scale.running_by_nodes.{size}.seconds_per_period", 3),
    ("scale", "running: mean period (s), {nodes} nodes", "scale.running_by_nodes.{size}.mean_seconds_per_period", 3),
    ("scale", "running: slowest period (s), {nodes} nodes", "scale.running_by_nodes.{size}.max_seconds_per_period", 3),
    ("scale", "running: task events s/period, {nodes} nodes",
     "scale.running_by_nodes.{size}.observe_seconds_per_period", 3),
    ("scale", "running: MB per 1,000 nodes", "scale.running_by_nodes.{size}.mb_per_1000_nodes", 1),
    ("scale", "running: peak MB per 1,000 nodes", "scale.running_by_nodes.{size}.peak_mb_per_1000_nodes", 1),
    ("memory", "floors stage peak (MB)", "floors.peak_mb", 0),
    ("memory", "in-process stage peak (MB)", "inprocess.peak_mb", 0),
    ("memory", "nurd cost stage peak (MB)", "nurd_cost.peak_mb", 0),
    ("memory", "kafka stage peak (MB)", "kafka.peak_mb", 0),
    ("memory", "worker peak, 1 worker (MB)", "kafka.one_worker.worker_peak_mb", 0),
    ("memory", "worker peak, live (MB)", "kafka.latency.worker_peak_mb", 0),
    ("memory", "broker peak (MB)", "kafka.broker_peak_mb", 0),
]


def _sized(document: dict[str, Any], label: str, path: str) -> tuple[str, str]:
    """A running-policy scale row at the largest cluster measured ({size} in its path, {nodes} in its label): --quick
    measures 1,000 nodes, not the full run's 10,000, and fixed rows showed '-' where its figures were."""
    if "{size}" not in path:
        return label, path
    try:
        sizes = list(_get(document, "scale.running_by_nodes"))
    except (KeyError, TypeError):
        sizes = []
    size = max(sizes, key=int) if sizes else "10000"
    return label.format(nodes=f"{int(size):,}"), path.format(size=size)


def _cell(document: dict[str, Any], path: str, digits: int) -> str:
    try:
        value = _get(document, path)
    except (KeyError, TypeError):
        return "-"
    if path == "kafka.latency.rankings":
        return f"{value} / {document['kafka']['latency']['deltas']}"
    if path.endswith("one_worker.restarts"):  # both scenarios of the engine in one cell
        return f"{value} / {_cell(document, path.replace('one_worker', 'two_workers'), digits)}"
    if isinstance(value, list):
        return " + ".join(_n(v, digits) for v in value)
    return _n(value, digits)


def render(document: dict[str, Any], console: Console) -> None:
    """The figures, then the targets, as tables."""
    machine = document["machine"]
    table = Table(title=f"laggard bench ({document['sizes']['name']}) on {machine['cpu_count']} cores, "
                        f"load average {machine['load_average_start'][0]} -> {machine['load_average_end'][0]}, "
                        f"{document['seconds']:.0f} s")  # fmt: skip
    for column in ("stage", "figure", "value"):
        table.add_column(column, justify="right" if column == "value" else "left")
    previous = None
    for section, row_label, row_path, digits in ROWS:
        label, path = _sized(document, row_label, row_path)
        table.add_row(section if section != previous else "", label, _cell(document, path, digits))
        previous = section
    console.print(table)
    targets = Table(title="targets of issue 18 (aims, not assertions)")
    for column in ("figure", "value", "target", "met"):
        targets.add_column(column)
    for target in document["ratios"]["targets"]:
        value = target["value"]
        shown = "-" if value is None else (f"{value:.1%}" if "%" in target["target"] else f"{value:.2f}")
        targets.add_row(target["name"], shown, target["target"], "yes" if target["met"] else "[red]no[/red]")
    console.print(targets)
    console.print(f"[dim]latency: {document['kafka']['latency']['definition']}[/dim]")
