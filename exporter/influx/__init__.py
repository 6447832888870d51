"""InfluxDB push: the exporter's samples as line protocol, batched, retried, spilled to disk, drained.

Modules: `pusher` (threads), `lineproto` (encoding), `buffer` (memory tier, ordering), `spill` and
`segments` (the on-disk queue), `replay`, `backoff`, `writer` (the HTTP write through influxdb-client),
`metrics` (self metrics), `settings` and `config` (configuration). The design, and why it has its own
batcher: docs/long-term-store.md, "The exporter's push".
"""
