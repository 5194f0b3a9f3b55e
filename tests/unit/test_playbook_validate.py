"""The identifier grammar: only these values ever become remote arguments."""

from __future__ import annotations

import pytest

from bot.domain import validate

GOOD_UNITS = [
    "vllm-kimi-k25-int4.service",
    "getty@tty1.service",
    "docker-" + "a" * 64 + ".scope",
    "system-systemd\\x2dfsck.slice",
    "nvidia-persistenced.service",
    "a:b_c.timer",
]
BAD_UNITS = [
    "",
    "vllm",
    "-x.service",
    ".x.service",
    "a b.service",
    "x;rm -rf /.service",
    "gpu-hog-$(touch /tmp/c).service",
    "x`id`.service",
    "foo@.service",
    "x.service\n",
    "x.services",
    "a" * 300 + ".service",
    "x/y.service",
    "é.service",
]


@pytest.mark.parametrize("name", GOOD_UNITS)
def test_units_accepted(name: str) -> None:
    assert validate.unit_name(name) == name


@pytest.mark.parametrize("name", BAD_UNITS)
def test_units_refused_with_reason(name: str) -> None:
    with pytest.raises(validate.InvalidIdentifier) as info:
        validate.unit_name(name)
    assert info.value.reason and info.value.kind == "unit"


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (440, "440"),
        ("440", "440"),
        ("4194304", "4194304"),
        ("1", None),
        ("0", None),
        ("-5", None),
        ("0440", None),
        ("44 0", None),
        ("4194305", None),
        (True, None),
        ("440;", None),
        (None, None),
    ],
)
def test_pids(value: object, ok: str | None) -> None:
    if ok is None:
        assert not validate.is_valid(validate.pid, value)
    else:
        assert validate.pid(value) == ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("/data/hidden_states", True),
        ("/shared/x/y.pt", True),
        ("/var/log/", True),
        ("/data", False),
        ("/data2/x", False),
        ("/etc/passwd", False),
        ("data/x", False),
        ("/data/../etc", False),
        ("/data//x", False),
        ("/data/./x", False),
        ("/data/x y", False),
        ("/data/$(id)", False),
        ("/data/-rf", False),
        ("/data/x\n", False),
    ],
)
def test_paths_under_prefixes(value: str, ok: bool) -> None:
    assert validate.is_valid(validate.path_under, value) is ok


def test_abs_path_and_sizes_and_params() -> None:
    assert validate.abs_path("/") == "/" and validate.abs_path("/mnt/data/") == "/mnt/data"
    assert not validate.is_valid(validate.abs_path, "/mnt/$(x)")
    assert validate.size("500M") == "500M"
    for bad in ("500", "0M", "500MB", "-1G", "1P", "5 G", "1234567G"):
        assert not validate.is_valid(validate.size, bad)
    assert validate.params({"unit": "a.service", "pid": 12, "path": "/data/x"}) == {
        "unit": "a.service",
        "pid": "12",
        "path": "/data/x",
    }
    with pytest.raises(validate.InvalidIdentifier, match="unknown parameter"):
        validate.params({"command": "rm -rf /"})
    with pytest.raises(validate.InvalidIdentifier, match="not under"):
        validate.params({"path": "/etc/x"}, path_prefixes=["/data"])
