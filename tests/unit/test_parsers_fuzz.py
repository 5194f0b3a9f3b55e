"""Hypothesis: no input crashes any parser (host text is arbitrary, possibly hostile)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.domain import validate
from playbooks.parsers import (
    common,
    disk,
    host,
    kernel,
    nvidia,
    nvidia_xml,
    ps,
    smi_errors,
    systemd,
)

PARSERS: list[Callable[[str], Any]] = [
    nvidia.parse_query_gpu,
    nvidia.parse_gpu_samples,
    nvidia.parse_compute_apps,
    nvidia.unread_lines,
    nvidia_xml.parse_query_xml,
    smi_errors.parse_smi_errors,
    kernel.parse_kernel_log,
    kernel.bus_key,
    systemd.parse_show,
    systemd.parse_show_many,
    systemd.parse_list_units,
    systemd.parse_list_unit_files,
    systemd.unit_from_status,
    systemd.unit_from_cgroup,
    systemd.docker_id_from_scope,
    ps.parse_ps,
    ps.parse_pids,
    ps.parse_cgroups,
    ps.parse_states,
    ps.server_kind,
    ps.notable_flags,
    disk.parse_df,
    disk.parse_df_inodes,
    disk.parse_du,
    disk.parse_lsof,
    disk.parse_journal_usage,
    disk.parse_findmnt,
    host.parse_list_boots,
    host.ended_cleanly,
    host.parse_uptime_since,
    host.parse_load,
    host.parse_free,
    host.parse_crontab,
    host.parse_docker_inspect,
    host.parse_clock,
    host.tail,
    common.number,
    common.integer,
    common.size_bytes,
]
VALIDATORS: list[Callable[[object], str]] = [
    validate.unit_name,
    validate.pid,
    validate.abs_path,
    validate.path_under,
    validate.size,
    validate.container_id,
]

# Text built from the pieces real tool output is made of, so the fuzzer reaches deep paths.
TOKENS = st.sampled_from(
    [
        ", ",
        ",",
        " ",
        "\n",
        "\t",
        "---",
        "[N/A]",
        "[Not Supported]",
        "MiB",
        "%",
        "0",
        "440",
        "-1",
        "index",
        "pid",
        "uuid",
        "GPU-a",
        "=",
        "Id=",
        "●",
        ".service",
        ".scope",
        "0::/",
        "system.slice/",
        "docker-",
        "ab" * 6,
        "/data",
        "(deleted)",
        "take up 2.6G in",
        "Mem:",
        "@reboot",
        "2026-11-29 11:47:32",
        "+0100",
        "load average: 1, 2, 3",
        "[",
        "]",
        "{",
        "}",
        '"',
        "'",
        "$(",
        "`",
        "é",
        "\x00",
        "\x1b[31m",
        "9" * 30,
        "1e309",
        "nan",
        "inf",
        ".",
        "/",
    ]
)
SHAPED = st.lists(TOKENS | st.text(max_size=8), max_size=60).map("".join)


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: f"{p.__module__}.{p.__name__}")
@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=400) | SHAPED)
def test_parsers_never_raise(parser: Callable[[str], Any], text: str) -> None:
    parser(text)


@pytest.mark.parametrize("check", VALIDATORS, ids=lambda c: c.__name__)
@settings(max_examples=100, deadline=None)
@given(value=st.text(max_size=80) | SHAPED | st.integers() | st.none())
def test_validators_accept_or_refuse_cleanly(check: Callable[[object], str], value: object) -> None:
    try:
        out = check(value)
    except validate.InvalidIdentifier as exc:
        assert exc.reason
        return
    # whatever passes is free of shell syntax and whitespace
    assert not any(c in out for c in " \t\n'\"$`;|&<>()*?[]{}!#~\\") or check is validate.unit_name
    assert "\n" not in out and " " not in out
