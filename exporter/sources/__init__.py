"""Sources: read hardware (NVML, sysfs, verbs) into typed snapshots in base units."""
