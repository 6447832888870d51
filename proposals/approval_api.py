"""The approval endpoint's routes: list and show proposals, approve and reject them as the authenticated user.

Who acts is never taken from the request body: it is the basic-auth user the server verified
(`http:<user>`), or the user a trusted proxy names in a configured header (`proxy:<user>`), and that name
is the approver (`who`) too. Every route needs an authenticated user (401 otherwise). Writes are POSTs
with a JSON body and `Content-Type: application/json`: a browser cannot send that cross-site without a
CORS preflight, which this server never answers, so a page elsewhere cannot approve with a user's cached
credentials. One Store per request (the server is threaded). Answers are JSON; status: 200 done, 400 bad
request, 401 not authenticated, 403 refused (the four-eyes rule, limits, not a person's name), 404 no such
proposal, 409 not pending, expired or an ambiguous id, 415 not JSON, 503 store missing or damaged.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.exposition import CONTENT_TYPE, MetricFamily, MetricSpec, render
from foundation.http_server import MetricsHTTPServer, Request, Response, Route
from foundation.identity import Actor, basic_auth_user
from proposals import approval
from proposals.approval_config import ApprovalConfig
from proposals.errors import (
    AmbiguousIdError,
    ApprovalRefusedError,
    RefusedError,
    StoreDamagedError,
    StoreError,
    UnknownProposalError,
)
from proposals.states import STATES
from proposals.store import Store

log = logging.getLogger(__name__)

API = "/api/v1"
MAX_REASON_CHARS = 1000
REQUESTS = MetricSpec(
    "ibpool_approval_requests_total",
    "counter",
    "Approval endpoint requests by action and HTTP status.",
    ("action", "status"),
)


@dataclass(frozen=True)
class Authenticator:
    """Who sent a request, as the server vouches for it.

    `basic_auth`: the server checks basic auth on every request (so the header's user is verified).
    `trusted_header`: the (lower-case) header a trusted proxy sets to the authenticated user; only
    honoured when configured, and then required.
    """

    basic_auth: bool
    trusted_header: str | None = None

    def actor(self, request: Request) -> Actor | None:
        """The verified identity behind `request`, or None."""
        user = basic_auth_user(request.headers.get("authorization")) if self.basic_auth else None
        try:
            if self.trusted_header is not None:
                named = request.headers.get(self.trusted_header, "").strip()
                return Actor("proxy", named, f"via http:{user}" if user else "") if named else None
            return Actor("http", user) if user else None
        except ValueError:
            return None


class _HttpError(Exception):
    def __init__(self, status: int, message: str, reasons: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reasons = reasons or []


class ApprovalApi:
    """The routes over one store and one approval policy."""

    def __init__(self, store_path: Path, config: ApprovalConfig, authenticator: Authenticator) -> None:
        self.store_path = store_path
        self.config = config
        self.authenticator = authenticator
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def install(self, server: MetricsHTTPServer, telemetry_path: str = "/metrics") -> None:
        """Serve the API, a landing page, /healthz and the request counts at `telemetry_path`."""
        server.route("GET", f"{API}/proposals", self._wrap("list", self._list))
        server.route("GET", f"{API}/proposal", self._wrap("show", self._show))
        server.route("POST", f"{API}/approve", self._wrap("approve", self._approve))
        server.route("POST", f"{API}/reject", self._wrap("reject", self._reject))
        server.route("GET", "/healthz", self._healthz)
        server.route("GET", telemetry_path, self._metrics)
        server.route("GET", "/", _landing)

    def families(self) -> list[MetricFamily]:
        """The request counts."""
        family = MetricFamily(REQUESTS)
        with self._lock:
            for (action, status), count in sorted(self._counts.items()):
                family.add((action, status), count)
        return [family]

    def _wrap(self, action: str, handler: Callable[[Request, Actor], dict[str, Any]]) -> Route:
        def route(request: Request) -> Response:
            try:
                actor = self.authenticator.actor(request)
                if actor is None:
                    raise _HttpError(401, "not authenticated")
                status, body = 200, handler(request, actor)
            except _HttpError as exc:
                status, body = exc.status, {"error": str(exc)}
                if exc.reasons:
                    body["reasons"] = exc.reasons
            with self._lock:
                self._counts[(action, str(status))] += 1
            headers = {"WWW-Authenticate": 'Basic realm="ibpool"'} if status == 401 else {}
            text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
            return Response(status, text.encode(), "application/json", headers)

        return route

    def _store(self, *, read_only: bool, actor: Actor | None = None) -> Store:
        try:
            return Store(
                self.store_path,
                create=False,
                read_only=read_only,
                verify=False,  # checked at start; a damaged page is still refused when read
                actor=str(actor) if actor is not None else None,
            )
        except StoreError as exc:
            raise _failure(exc) from None

    def _list(self, request: Request, _: Actor) -> dict[str, Any]:
        state = request.query.get("state", [None])[-1]
        if state is not None and state not in STATES:
            raise _HttpError(400, f"unknown state {state!r}; states are {', '.join(STATES)}")
        with self._store(read_only=True) as store:
            try:
                rows = store.list_proposals(state)
            except StoreError as exc:
                raise _failure(exc) from None
        return {"proposals": [row.to_dict() for row in rows]}

    def _show(self, request: Request, _: Actor) -> dict[str, Any]:
        wanted = request.query.get("id", [""])[-1]
        with self._store(read_only=True) as store:
            try:
                stored = store.get(store.resolve(wanted))
                data = stored.to_dict()
                data["audit"] = [entry.to_dict() for entry in store.audit(stored.id)]
                data["steps"] = [step.to_dict() for step in store.steps(stored.id)]
            except (UnknownProposalError, AmbiguousIdError, StoreError) as exc:
                raise _failure(exc) from None
        return data

    def _approve(self, request: Request, actor: Actor) -> dict[str, Any]:
        body = _json_body(request)
        who = _person(actor)
        with self._store(read_only=False, actor=actor) as store:
            try:
                stored = approval.approve(store, store.resolve(_text(body, "id")), who, self.config)
            except (RefusedError, UnknownProposalError, AmbiguousIdError, StoreError) as exc:
                raise _failure(exc) from None
        log.info("proposal %s approved by %s", stored.id[:12], actor)
        return {"id": stored.id, "state": stored.state, "who": who, "actor": str(actor)}

    def _reject(self, request: Request, actor: Actor) -> dict[str, Any]:
        body = _json_body(request)
        who = _person(actor)
        reason = body.get("reason", "")
        if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS or not reason.isprintable():
            raise _HttpError(400, f"reason: printable text of at most {MAX_REASON_CHARS} characters")
        with self._store(read_only=False, actor=actor) as store:
            try:
                stored = approval.reject(store, store.resolve(_text(body, "id")), who, reason)
            except (RefusedError, UnknownProposalError, AmbiguousIdError, StoreError) as exc:
                raise _failure(exc) from None
        log.info("proposal %s rejected by %s", stored.id[:12], actor)
        return {"id": stored.id, "state": stored.state, "who": who, "actor": str(actor)}

    def _healthz(self, _: Request) -> Response:
        try:
            with Store(self.store_path, create=False, read_only=True, verify=False) as store:
                counts = store.counts()
        except StoreError as exc:
            body = {"healthy": False, "reasons": [str(exc)]}
            return Response(503, json.dumps(body).encode() + b"\n", "application/json")
        body = {"healthy": True, "proposals": counts}
        return Response(200, json.dumps(body).encode() + b"\n", "application/json")

    def _metrics(self, _: Request) -> Response:
        return Response(200, render(self.families()).encode(), CONTENT_TYPE)


def _landing(_: Request) -> Response:
    text = (
        "ibpool approvals\n\n"
        f"GET  {API}/proposals[?state=pending]\nGET  {API}/proposal?id=ID\n"
        f'POST {API}/approve  {{"id": "ID"}}\nPOST {API}/reject   {{"id": "ID", "reason": "..."}}\n'
        "(JSON bodies with Content-Type: application/json; you act as the user you authenticated as)\n"
    )
    return Response(200, text.encode())


def _json_body(request: Request) -> dict[str, Any]:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise _HttpError(415, "send a JSON body with Content-Type: application/json")
    try:
        body = json.loads(request.body)
    except (ValueError, RecursionError):
        raise _HttpError(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise _HttpError(400, "the body must be a JSON object")
    unknown = sorted(set(body) - {"id", "reason"})
    if unknown:
        raise _HttpError(400, f"unknown keys: {', '.join(map(str, unknown))}")
    return body


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise _HttpError(400, f"{key}: required, a string")
    return value


def _person(actor: Actor) -> str:
    try:
        approval.check_person(actor.name)
    except ValueError as exc:
        raise _HttpError(403, f"the authenticated user cannot act as a person: {exc}") from None
    return actor.name


def _failure(exc: Exception) -> _HttpError:
    if isinstance(exc, ApprovalRefusedError):
        return _HttpError(403, f"refused: {exc}", list(exc.reasons))
    if isinstance(exc, RefusedError):  # not pending, expired
        return _HttpError(409, str(exc))
    if isinstance(exc, UnknownProposalError):
        return _HttpError(404, str(exc))
    if isinstance(exc, AmbiguousIdError):
        return _HttpError(409, str(exc))
    if isinstance(exc, StoreDamagedError):
        log.error("%s", exc)
    return _HttpError(503, str(exc))
