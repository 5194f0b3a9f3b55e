"""The shared vocabulary: one kind→playbook map, one host grammar, one job-id grammar."""

from __future__ import annotations

import pytest

from bot.domain.kinds import BUILTIN_KINDS, TRIAGE, playbook_for
from bot.domain.validate import new_job_id, valid_host, valid_job_id
from bot.ingest.mapping import Mapper
from playbooks import registry


def test_every_builtin_kind_runs_a_playbook_that_exists() -> None:
    for kind in BUILTIN_KINDS:  # `auto` (what `/ir diag` runs) picks one of them
        assert playbook_for(kind) in registry.names(), kind
    assert playbook_for("something_new") == TRIAGE


def test_ingest_knows_exactly_the_builtin_kinds() -> None:
    mapper = Mapper()
    assert all(mapper.known_kind(k) for k in BUILTIN_KINDS)
    assert not mapper.known_kind("not_a_kind")


@pytest.mark.parametrize("host", ["gpu-01", "10.1.230.174", "fe80::1", "a.example.com", "x" * 253])
def test_hosts_we_accept(host: str) -> None:
    assert valid_host(host)


@pytest.mark.parametrize("host", ["", "-gpu", "gpu 01", "gpu;rm", "[fe80::1]", "a/b", "x" * 254])
def test_hosts_we_refuse(host: str) -> None:
    assert not valid_host(host)


def test_job_ids_we_make_are_the_ones_we_accept() -> None:
    ids = {new_job_id() for _ in range(50)}
    assert len(ids) == 50 and all(valid_job_id(i) for i in ids)
    assert not valid_job_id("ex-1") and not valid_job_id("ex-0123456789ab;ls")
