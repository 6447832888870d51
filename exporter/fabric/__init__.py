"""`ibpool fabric-exporter`: fabric-wide InfiniBand metrics read from one management host.

Discovery (`ibnetdiscover`, `iblinkinfo`), counter reads (`perfquery`, plus a small libibmad helper for
per-VL waits) and the background sweep live here; the metric names come from `exporter.catalog`.
"""
