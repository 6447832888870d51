"""Errors of the cluster server (under the cluster model's root, ClusterError)."""

from __future__ import annotations

from simulator.cluster.errors import ClusterError


class ServeError(ClusterError):
    """Root of the cluster server's own errors."""


class RequestError(ServeError):
    """A control or fault request that is malformed or names something the model does not have."""
