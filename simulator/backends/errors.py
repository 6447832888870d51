"""Errors of the real-system backends (under the cluster model's root, ClusterError)."""

from __future__ import annotations

from simulator.cluster.errors import ClusterError


class BackendError(ClusterError):
    """Root of the backends' own errors."""


class ConsoleError(BackendError):
    """ibsim's console did not take a command, or did not answer in time."""


class QosReadError(BackendError):
    """The VL arbitration tables could not be read from opensm.conf or `smpquery vlarb`."""


class SlurmReadError(BackendError):
    """Slurm's partitions or node states could not be read, or name nodes the model does not have."""


class ProcessError(BackendError):
    """A real program did not start, answer or stop as expected."""


class IbsimError(ProcessError):
    """ibsim or OpenSM did not start, answer or stop as expected."""


class SlurmError(ProcessError):
    """The local Slurm cluster (munged, slurmctld, slurmd) did not start, or a command against it failed."""
