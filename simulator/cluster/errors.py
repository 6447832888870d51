"""The cluster model's exceptions (one root, meaningful subclasses)."""

from __future__ import annotations


class ClusterError(Exception):
    """Root of every error the cluster model raises."""


class SpecError(ClusterError):
    """A cluster spec that is malformed; the message lists every problem with its key."""


class ControlError(ClusterError):
    """A control request (weights, SL map, partition list, drain) that the model refuses."""


class FaultError(ClusterError):
    """A fault request that names an unknown node, GPU, port or link."""


class TraceError(ClusterError):
    """A trace file that cannot be read or mapped onto the spec's pools."""
