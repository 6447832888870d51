"""SlurmConfig: defaults, and every bad key reported at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler_hooks.errors import HookConfigError
from scheduler_hooks.slurm.config import SlurmConfig


def test_from_mapping() -> None:
    config = SlurmConfig.from_mapping(
        {
            "slurm_conf": "/etc/slurm/slurm.conf",
            "bin_dir": "/usr/bin",
            "persist": True,
            "poll_interval_seconds": 2,
        }
    )
    assert config.slurm_conf == Path("/etc/slurm/slurm.conf")
    assert config.bin_dir == Path("/usr/bin")
    assert config.persist and config.poll_interval_seconds == 2
    assert config.backup_path == Path("/etc/slurm/slurm.conf.ibpool-prev")
    assert config.drain_deadline_seconds == 3600.0
    assert config.on_drain_deadline == "give_up"
    assert config.reclaims == "as_drain"  # killing work is opted into


def test_reclaims_allow_or_as_drain_only_reported_with_the_rest() -> None:
    config = SlurmConfig.from_mapping({"slurm_conf": "/s.conf", "reclaims": "allow"})
    assert config.reclaims == "allow"
    with pytest.raises(HookConfigError) as caught:
        SlurmConfig.from_mapping(
            {"slurm_conf": "s.conf", "reclaims": "yes", "on_drain_deadline": "kill", "colour": 1}
        )
    assert caught.value.problems == [
        "slurm.colour: unknown key",
        "slurm.slurm_conf: must be an absolute path, got 's.conf'",
        "slurm.on_drain_deadline: must be one of give_up, requeue, got 'kill'",
        "slurm.reclaims: must be one of allow, as_drain (allow: requeue the jobs on a proposal's reclaimed "
        "nodes at once), got 'yes'",
    ]
    with pytest.raises(HookConfigError, match="reclaims: must be one of allow, as_drain"):
        SlurmConfig(Path("/s.conf"), reclaims="always")


def test_on_drain_deadline_requeue_or_give_up_only() -> None:
    config = SlurmConfig.from_mapping({"slurm_conf": "/s.conf", "on_drain_deadline": "requeue"})
    assert config.on_drain_deadline == "requeue"
    with pytest.raises(HookConfigError) as caught:
        SlurmConfig.from_mapping({"slurm_conf": "/s.conf", "on_drain_deadline": "kill", "persist": 1})
    assert caught.value.problems == [
        "slurm.persist: must be true or false, got 1",
        "slurm.on_drain_deadline: must be one of give_up, requeue, got 'kill'",
    ]


def test_every_bad_key_at_once() -> None:
    with pytest.raises(HookConfigError) as caught:
        SlurmConfig.from_mapping(
            {"bin_dir": 3, "persist": "yes", "command_timeout_seconds": "10", "colour": 1}
        )
    assert caught.value.problems == [
        "slurm.colour: unknown key",
        "slurm.slurm_conf: missing",
        "slurm.bin_dir: must be a path, got 3",
        "slurm.persist: must be true or false, got 'yes'",
        "slurm.command_timeout_seconds: must be a number of seconds, got '10'",
    ]


def test_values_are_checked_after_types() -> None:
    with pytest.raises(HookConfigError) as caught:
        SlurmConfig.from_mapping(
            {"slurm_conf": "slurm.conf", "poll_interval_seconds": 0, "drain_deadline_seconds": -1}
        )
    assert caught.value.problems == [
        "slurm.slurm_conf: must be an absolute path, got 'slurm.conf'",
        "slurm.poll_interval_seconds: must be a positive number of seconds, got 0",
        "slurm.drain_deadline_seconds: must be a number of seconds >= 0 (0: do not wait), got -1",
    ]


def test_a_zero_deadline_means_do_not_wait() -> None:
    assert SlurmConfig(Path("/s.conf"), drain_deadline_seconds=0).drain_deadline_seconds == 0


def test_not_a_mapping() -> None:
    with pytest.raises(HookConfigError, match="must be a mapping"):
        SlurmConfig.from_mapping(["slurm_conf"], where="hooks.slurm")


def test_an_unknown_key_does_not_hide_the_value_errors() -> None:
    with pytest.raises(HookConfigError) as caught:
        SlurmConfig.from_mapping(
            {"slurm_conf": "slurm.conf", "colour": 1, "persist": "yes", "poll_interval_seconds": -1}
        )
    assert caught.value.problems == [
        "slurm.colour: unknown key",
        "slurm.persist: must be true or false, got 'yes'",
        "slurm.slurm_conf: must be an absolute path, got 'slurm.conf'",
        "slurm.poll_interval_seconds: must be a positive number of seconds, got -1",
    ]
