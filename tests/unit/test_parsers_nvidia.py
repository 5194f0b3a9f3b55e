"""nvidia-smi parsers on real output shapes (drivers 470-580): headers, units, [N/A]."""

# ruff: noqa: E501 - samples are real tool output, kept on their real (long) lines

from __future__ import annotations

from playbooks.gpu import gb, summarize
from playbooks.parsers.nvidia import (
    max_utilization,
    parse_compute_apps,
    parse_gpu_samples,
    parse_query_gpu,
)

# nvidia-smi --query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,name --format=csv
WITH_HEADER_AND_UNITS = """\
index, uuid, memory.used [MiB], memory.total [MiB], utilization.gpu [%], name
0, GPU-2f7fde02-c053-57bf-aa73-a22a1d39215b, 77600 MiB, 97887 MiB, 0 %, NVIDIA RTX PRO 6000 Blackwell Server Edition
1, GPU-9a1e5487-9e5e-5ede-a7a3-4be763225094, 77600 MiB, 97887 MiB, 0 %, NVIDIA RTX PRO 6000 Blackwell Server Edition
"""
NOUNITS = "0, GPU-a, 77600, 97887, 0, NVIDIA H100 80GB HBM3\n1, GPU-b, 3, 97887, 12, NVIDIA H100 80GB HBM3\n"
NOT_SUPPORTED = """\
0, GPU-a, [N/A], 81559, [Not Supported], NVIDIA A100-SXM4-80GB
1, GPU-b, 512, [N/A], [N/A], NVIDIA A100-SXM4-80GB
garbage line
2, GPU-c, [GPU requires reset], 81559, 0, NVIDIA A100-SXM4-80GB
"""


def test_header_and_units() -> None:
    rows = parse_query_gpu(WITH_HEADER_AND_UNITS)
    assert [(r.index, r.memory_used_mib, r.memory_total_mib, r.utilization_pct) for r in rows] == [
        (0, 77600, 97887, 0),
        (1, 77600, 97887, 0),
    ]
    assert rows[0].name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert rows[0].uuid == "GPU-2f7fde02-c053-57bf-aa73-a22a1d39215b"


def test_nounits_noheader() -> None:
    rows = parse_query_gpu(NOUNITS)
    assert [(r.index, r.memory_used_mib, r.utilization_pct) for r in rows] == [
        (0, 77600, 0),
        (1, 3, 12),
    ]
    assert rows[0].memory_fraction is not None and 0.79 < rows[0].memory_fraction < 0.8


def test_not_available_markers_become_none() -> None:
    rows = parse_query_gpu(NOT_SUPPORTED)
    assert [(r.index, r.memory_used_mib, r.memory_total_mib, r.utilization_pct) for r in rows] == [
        (0, None, 81559, None),
        (1, 512, None, None),
        (2, None, 81559, 0),
    ]
    assert rows[1].memory_fraction is None


def test_header_reorders_fields() -> None:
    text = "name, index, utilization.gpu [%], memory.used [MiB]\nTesla T4, 3, 55 %, 100 MiB\n"
    rows = parse_query_gpu(text)
    assert (rows[0].index, rows[0].utilization_pct, rows[0].memory_used_mib) == (3, 55, 100)


def test_samples_split_on_separator_and_repeated_index() -> None:
    loop = NOUNITS + "---\n" + NOUNITS.replace(", 0, NVIDIA", ", 40, NVIDIA") + NOUNITS
    samples = parse_gpu_samples(loop)
    assert len(samples) == 3 and all(len(s) == 2 for s in samples)
    assert max_utilization(samples, 0) == 40 and max_utilization(samples, 1) == 12
    assert max_utilization(samples, 7) is None


def test_summarize_folds_samples() -> None:
    stats = summarize(parse_gpu_samples(NOUNITS + "---\n" + NOUNITS.replace("77600", "70000")))
    assert [(s.index, s.memory_used_mib, s.max_util_pct, s.samples) for s in stats] == [
        (0, 77600, 0, 2),
        (1, 3, 12, 2),
    ]
    assert stats[0].held(1024) and not stats[1].held(1024)
    assert stats[0].idle(5) and not stats[1].idle(5)
    assert gb(77600) == "75.8 GiB"  # binary, as every message says it


def test_compute_apps_with_header_units_and_commas() -> None:
    text = """\
pid, gpu_uuid, used_gpu_memory [MiB], process_name
440, GPU-a, 77600 MiB, /usr/bin/python3
441, GPU-b, [N/A], python3 -m vllm, --port 8000
No running processes found
"""
    apps = parse_compute_apps(text)
    assert [(a.pid, a.gpu_uuid, a.used_memory_mib, a.process_name) for a in apps] == [
        (440, "GPU-a", 77600, "/usr/bin/python3"),
        (441, "GPU-b", None, "python3 -m vllm, --port 8000"),
    ]


def test_compute_apps_empty_and_na_pid() -> None:
    assert parse_compute_apps("") == []
    assert parse_compute_apps("No running processes found\n") == []
    apps = parse_compute_apps("[N/A], GPU-a, 100, [N/A]\n-5, GPU-a, 1, x\n")
    assert [(a.pid, a.used_memory_mib) for a in apps] == [(None, 100)]
