"""Who is acting, as the system vouches for it: the operating-system account behind this process, or the
user an HTTP request authenticated as. A name typed on a command line (`--by`) is only a display name.

An identity is written `scheme:name`, optionally followed by ` (note)`: `unix:alice`,
`unix:alice (via sudo as root)`, `http:bob`, `proxy:carol (via http:sso)`. Two identities denote the same
principal when their names match without case, whatever the scheme (`unix:alice` is `http:alice`).

Rules for the OS identity: the account of the real uid (`pwd`; `#UID` when it has no entry), or
`SUDO_USER` when the real uid is 0 (root ran it through sudo; root could claim anything anyway). Under any
other account SUDO_USER proves nothing (every user can set it), so it is only noted.
"""

from __future__ import annotations

import base64
import binascii
import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass

_NAME = re.compile(r"[^\s()]{1,128}")
_SCHEME = re.compile(r"[a-z]{1,16}")


@dataclass(frozen=True)
class Actor:
    """A principal the system vouches for: how it was established (`scheme`), its name and a note."""

    scheme: str
    name: str
    note: str = ""

    def __post_init__(self) -> None:
        if not _SCHEME.fullmatch(self.scheme) or not _NAME.fullmatch(self.name):
            raise ValueError(f"not an identity: {self.scheme!r}:{self.name!r}")
        if not self.note.isprintable() or "(" in self.note or ")" in self.note:
            raise ValueError(f"identity note must be printable text without parentheses: {self.note!r}")

    def __str__(self) -> str:
        text = f"{self.scheme}:{self.name}"
        return f"{text} ({self.note})" if self.note else text

    @property
    def principal(self) -> str:
        """The name two identities are compared by (case folded)."""
        return self.name.casefold()


def parse_actor(text: str) -> Actor | None:
    """The identity written as `text` (see the module docstring); None for empty or malformed text."""
    head, _, rest = text.partition(" ")
    scheme, sep, name = head.partition(":")
    note = rest.strip()
    if note.startswith("(") and note.endswith(")"):
        note = note[1:-1]
    elif note:
        return None
    try:
        return Actor(scheme, name, note) if sep else None
    except ValueError:
        return None


def principal_of(text: str) -> str | None:
    """The principal of a written identity (None when it names none, as in records made before them)."""
    actor = parse_actor(text)
    return actor.principal if actor is not None else None


def account_name(uid: int) -> str:
    """The login name of `uid`, or `#UID` when the password database has no entry for it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"#{uid}"


def os_actor(environ: Mapping[str, str] | None = None, uid: int | None = None) -> Actor:
    """The person behind this process: SUDO_USER when the real uid is 0, else the real uid's account."""
    env = os.environ if environ is None else environ
    real_uid = os.getuid() if uid is None else uid
    login = account_name(real_uid)
    sudo_user = env.get("SUDO_USER", "")
    if sudo_user and not _NAME.fullmatch(sudo_user):
        return Actor("unix", login, "unreadable SUDO_USER ignored")
    if real_uid == 0 and sudo_user and sudo_user != login:
        return Actor("unix", sudo_user, f"via sudo as {login}")
    if sudo_user and sudo_user != login:
        return Actor("unix", login, f"SUDO_USER={sudo_user} not trusted")
    return Actor("unix", login)


def basic_auth_user(header: str | None) -> str | None:
    """The user name of an `Authorization: Basic ...` header (not checked here: the server checks it)."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:], validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    user, sep, _ = decoded.partition(":")
    return user if sep and user else None
