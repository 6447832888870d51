"""Source: an InfluxDB 2 bucket through influxdb-client's query API (Flux), as a `SeriesSource`.

The bucket holds the one schema (docs/long-term-store.md): measurement = metric name, one field `value`,
tags = labels. A selector becomes Flux (`flux_select`): the measurement and field, one `filter` per
matcher, `aggregateWindow(every: step, fn: last)`: the last value in each step, stamped at the step's end
(PromQL's `query_range` also carries a value up to 5 minutes into a gap; this does not). The names come
from `schema.measurements` over the window (`flux_names`). Strings in Flux are quoted and escaped (`\\`,
`"`, `${`). Each answer table is one series; its labels are the columns that are not Flux's own
(`result`, `table`, `_start`, `_stop`, `_time`, `_value`, `_field`, `_measurement`).

Not run against a live InfluxDB 2 server: the tests answer with recorded annotated-CSV responses
(tests/postmortem/test_influxdb.py) so that influxdb-client's own request and parsing code runs.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from postmortem.model import InputError, Point
from postmortem.source import Selector, Series

FLUX_COLUMNS = frozenset({"result", "table", "_start", "_stop", "_time", "_value", "_field", "_measurement"})
FIELD = "value"


def flux_string(text: str) -> str:
    """A Flux string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    return f'"{escaped}"'


def flux_time(unix: float) -> str:
    """A Flux time literal (RFC 3339, UTC, to the millisecond when needed)."""
    moment = datetime.fromtimestamp(unix, UTC)
    spec = "seconds" if moment.microsecond == 0 else "milliseconds"
    return moment.isoformat(timespec=spec).replace("+00:00", "Z")


def flux_duration(seconds: float) -> str:
    """A Flux duration literal (`60s`, `1500ms`)."""
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def flux_select(bucket: str, selector: Selector, start: float, end: float, step: float) -> str:
    """The Flux query for one selector (see the module docstring)."""
    match = f"r._measurement == {flux_string(selector.name)} and r._field == {flux_string(FIELD)}"
    lines = [
        f"from(bucket: {flux_string(bucket)})",
        f"  |> range(start: {flux_time(start)}, stop: {flux_time(end)})",
        f"  |> filter(fn: (r) => {match})",
    ]
    lines += [
        f"  |> filter(fn: (r) => r[{flux_string(k)}] == {flux_string(v)})" for k, v in selector.matchers
    ]
    lines.append(f"  |> aggregateWindow(every: {flux_duration(step)}, fn: last, createEmpty: false)")
    return "\n".join(lines) + "\n"


def flux_names(bucket: str, start: float, end: float) -> str:
    """The Flux query for the measurements with points in [start, end]."""
    return (
        'import "influxdata/influxdb/schema"\n\n'
        f"schema.measurements(bucket: {flux_string(bucket)}, start: {flux_time(start)}, "
        f"stop: {flux_time(end)})\n"
    )


class FluxSource:
    """Series from an InfluxDB 2 bucket (influxdb-client's `QueryApi`); `close()` releases the client."""

    def __init__(
        self, url: str, bucket: str, *, org: str = "", token: str = "", timeout_s: float = 60.0
    ) -> None:
        # influxdb-client takes ~0.2 s to import: only a report from InfluxDB pays it.
        from influxdb_client.client.influxdb_client import InfluxDBClient  # noqa: PLC0415

        self.url = url
        self.bucket = bucket
        self.org = org
        self._client = InfluxDBClient(url=url, token=token, org=org, timeout=int(timeout_s * 1000))
        self._api = self._client.query_api()

    @property
    def where(self) -> str:
        """The store, for the report."""
        return f"InfluxDB 2 at {self.url}, bucket {self.bucket}"

    def _query(self, flux: str) -> Any:
        import urllib3  # noqa: PLC0415 (comes with influxdb-client, imported in __init__)
        from influxdb_client.client.flux_csv_parser import (  # noqa: PLC0415 (as above)
            FluxCsvParserException,
            FluxQueryException,
        )
        from influxdb_client.rest import ApiException  # noqa: PLC0415 (as above)

        try:
            return self._api.query(flux, org=self.org or None)
        except ApiException as exc:
            raise InputError(f"InfluxDB at {self.url}: HTTP {exc.status}: {exc.message}") from None
        except FluxQueryException as exc:
            raise InputError(f"InfluxDB at {self.url}: query failed: {exc.message}") from None
        except FluxCsvParserException as exc:
            raise InputError(f"InfluxDB at {self.url}: unreadable answer: {exc}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise InputError(f"cannot query InfluxDB at {self.url}: {exc}") from None

    def names(self, start: float, end: float) -> set[str]:
        """Measurement names with points in [start, end]."""
        tables = self._query(flux_names(self.bucket, start, end))
        return {str(record.get_value()) for table in tables for record in table.records}

    def select(self, selector: Selector, start: float, end: float, step: float) -> Series:
        """One Flux query: (labels, points) per answer table, NaN left out."""
        series: dict[tuple[tuple[str, str], ...], list[Point]] = {}
        for table in self._query(flux_select(self.bucket, selector, start, end, step)):
            for record in table.records:
                values = record.values
                labels = {
                    str(k): str(v) for k, v in values.items() if k not in FLUX_COLUMNS and v not in (None, "")
                }
                labels["__name__"] = str(values.get("_measurement", selector.name))
                value = record.get_value()
                if value is None:
                    continue
                number = float(value)
                if math.isnan(number):
                    continue
                key = tuple(sorted(labels.items()))
                series.setdefault(key, []).append((record.get_time().timestamp(), number))
        return [(dict(key), sorted(points)) for key, points in sorted(series.items())]

    def close(self) -> None:
        """Close the client's connection pool."""
        untyped: Any = self._client.close  # influxdb-client leaves this unannotated
        untyped()
