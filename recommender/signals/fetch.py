"""A small HTTP GET for the sources (urllib; errors come out as OSError)."""

from __future__ import annotations

import urllib.request


def http_get(url: str, timeout: float) -> str:
    """The body of `url` as text; OSError (incl. HTTPError) on failure."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        data: bytes = answer.read()
    return data.decode("utf-8")
