"""ibpool: observability and control for pooled NVIDIA GPUs on InfiniBand fabrics."""

__version__ = "0.1.0"
