"""``laggard bench``: speed and cost of laggard measured beside their floors, in one process tree and one go.

Performance on shared machines is judged as ratios of figures measured in the same run. Each stage runs in a
subprocess of its own (``python -m laggard.bench.stage NAME``), so its peak resident memory is its own:

* ``floors``      -- decode rates of the same records: orjson, the Avro codec, fastavro raw, the reference
                     ``avro`` package (:mod:`laggard.bench.floors`).
* ``inprocess``   -- the statistics + ranking path and the Nurd path in-process (:mod:`laggard.bench.inprocess`).
* ``nurd_cost``   -- microseconds per checkpoint of ``nurd`` and ``nurd-batch`` (:mod:`laggard.bench.nurd_cost`).
* ``kafka``       -- a broker of its own: raw produce/consume floors, ``laggard worker`` throughput with one and
                     two workers, finish-to-delta latency on a live synthetic cluster (:mod:`laggard.bench.kafka`,
                     :mod:`laggard.bench.latency`).

:mod:`laggard.bench.runner` runs the stages and gathers their peak memory; :mod:`laggard.bench.output` turns the
document into a table and checks the issue's targets. Measuring code never prints to stdout.
"""
