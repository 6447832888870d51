"""Identities the system vouches for: the OS account (sudo rules), their written form, basic-auth names."""

from __future__ import annotations

import base64
import os
import pwd

import pytest

from foundation.identity import Actor, account_name, basic_auth_user, os_actor, parse_actor, principal_of


def test_the_os_identity_is_the_real_uid_account() -> None:
    assert os_actor({}, os.getuid()).name == pwd.getpwuid(os.getuid()).pw_name
    assert os_actor({}, 0) == Actor("unix", "root")


def test_sudo_user_counts_only_when_root_runs_it() -> None:
    assert os_actor({"SUDO_USER": "alice"}, 0) == Actor("unix", "alice", "via sudo as root")
    nobody = account_name(65534)
    forged = os_actor({"SUDO_USER": "alice"}, 65534)
    assert forged == Actor("unix", nobody, "SUDO_USER=alice not trusted")
    assert forged.principal == nobody.casefold()
    assert os_actor({"SUDO_USER": "root"}, 0) == Actor("unix", "root")
    assert os_actor({"SUDO_USER": "a b"}, 0) == Actor("unix", "root", "unreadable SUDO_USER ignored")


def test_an_account_without_a_name_is_its_uid() -> None:
    uid = next(u for u in range(4_000_000, 4_001_000) if not _has_entry(u))
    assert account_name(uid) == f"#{uid}"
    assert str(os_actor({}, uid)) == f"unix:#{uid}"


def _has_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


@pytest.mark.parametrize(
    "actor",
    [
        Actor("unix", "alice"),
        Actor("unix", "alice", "via sudo as root"),
        Actor("proxy", "bob", "via http:sso"),
    ],
)
def test_written_identities_read_back(actor: Actor) -> None:
    assert parse_actor(str(actor)) == actor


def test_principals_ignore_scheme_and_case() -> None:
    assert principal_of("unix:Alice (via sudo as root)") == principal_of("http:alice") == "alice"
    for text in ("", "alice", "unix:", "unix:a b", "unix:alice trailing", "UNIX:alice"):
        assert principal_of(text) is None, text
    with pytest.raises(ValueError):
        Actor("unix", "alice", "a (nested) note")


def test_basic_auth_user() -> None:
    header = "Basic " + base64.b64encode(b"carol:secret:with:colons").decode()
    assert basic_auth_user(header) == "carol"
    for bad in (None, "", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode()):
        assert basic_auth_user(bad) is None
