"""One HTTP write of a line-protocol batch through influxdb-client, and what its outcome means.

`InfluxWriter` uses the client's synchronous `WriteApi` (POST /api/v2/write, precision ns) with urllib3
retries off: retrying, backoff and buffering are the pusher's. Outcomes:

- `ok`: 2xx.
- `reject`: 400, 413, 422 and other 4xx that sending again cannot fix (malformed or oversized data);
  the batch is dropped and counted.
- `retry`: connection errors, timeouts, 5xx, 429, and 401/403/404 (a token or bucket being fixed should
  not cost the data); `retry_after` carries the server's Retry-After.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

log = logging.getLogger(__name__)

Outcome = Literal["ok", "retry", "reject"]
_RETRY_4XX = frozenset({401, 403, 404, 408, 425, 429})


@dataclass(frozen=True)
class WriteResult:
    """What a write attempt came to."""

    outcome: Outcome
    status: int | None = None
    retry_after: float | None = None
    detail: str = ""


class Writer(Protocol):
    """Sends one payload of line protocol."""

    def write(self, payload: bytes) -> WriteResult:
        """Write `payload` (newline-terminated lines, ns timestamps); never raises for server trouble."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def outcome_of(status: int) -> Outcome:
    """How to treat an HTTP status."""
    if 200 <= status < 300:
        return "ok"
    if status >= 500 or status in _RETRY_4XX:
        return "retry"
    return "reject"


def retry_after_of(headers: Any) -> float | None:
    """Seconds of a Retry-After header given in seconds (the HTTP-date form is ignored)."""
    if not isinstance(headers, Mapping):
        try:
            headers = dict(headers or ())
        except (TypeError, ValueError):
            return None
    value = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class InfluxWriter:
    """Writes to an InfluxDB v2 API (`/api/v2/write`), e.g. InfluxDB 2 or VictoriaMetrics."""

    def __init__(
        self,
        url: str,
        bucket: str,
        *,
        org: str = "",
        token: str = "",
        timeout_seconds: float = 10.0,
        gzip: bool = False,
    ) -> None:
        # influxdb-client takes ~0.2 s to import: only an exporter that pushes pays it.
        from influxdb_client.client.influxdb_client import InfluxDBClient  # noqa: PLC0415
        from influxdb_client.client.write_api import SYNCHRONOUS  # noqa: PLC0415

        self._client = InfluxDBClient(
            url=url,
            token=token,
            org=org,
            timeout=int(timeout_seconds * 1000),
            enable_gzip=gzip,
            retries=False,
        )
        self._api = self._client.write_api(write_options=SYNCHRONOUS)
        self._bucket = bucket
        self._org = org

    def write(self, payload: bytes) -> WriteResult:
        """POST the payload; the outcome instead of an exception."""
        import urllib3  # noqa: PLC0415 (comes with influxdb-client, imported above)
        from influxdb_client.rest import ApiException  # noqa: PLC0415

        try:
            self._api.write(self._bucket, self._org, record=payload)  # precision: ns (the default)
        except ApiException as exc:
            status = int(exc.status or 0)
            body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or "")
            outcome = outcome_of(status) if status else "retry"
            return WriteResult(
                outcome, status, retry_after_of(exc.headers), f"{status} {exc.reason}: {body[:300]}"
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return WriteResult("retry", None, None, f"{type(exc).__name__}: {exc}")
        return WriteResult("ok", 204)

    def close(self) -> None:
        """Close the client's connection pool."""
        for close in (self._api.close, self._client.close):
            untyped: Any = close  # influxdb-client leaves these unannotated
            untyped()
