"""The simulated cluster: workload, GPUs, fabric and scheduler feeding the real code paths."""
