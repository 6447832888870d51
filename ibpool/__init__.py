"""ibpool: observability and control for pooled NVIDIA GPUs on InfiniBand fabrics (the command on top)."""

from foundation.version import __version__

__all__ = ["__version__"]
