"""The bottom layer every other package builds on: logging, settings and config errors, the metrics
HTTP server and text exposition, the collector registry and health, one subprocess runner, one
background loop, clocks, and the formats shared across layers (Slurm host lists, VL arbitration
tables, IB counters). It imports no other ibpool package (docs/architecture.md)."""
