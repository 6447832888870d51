"""The ibpool node exporter: GPU (NVML) and InfiniBand (sysfs, verbs) metrics for Prometheus."""
