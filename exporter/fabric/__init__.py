"""`ibpool fabric-exporter`: fabric-wide InfiniBand metrics read from one management host.

Discovery (`ibnetdiscover`, `iblinkinfo`), counter reads (`perfquery`, plus a small libibmad helper for
per-VL waits), VL arbitration tables (`smpquery vlarb`, parsed by `vlarb.py`, which the OpenSM hook shares;
`--fabric.vlarb-ports off|first|all`) and the background sweep live here; the metric names come from
`exporter.catalog`.
"""
