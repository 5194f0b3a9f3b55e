"""df, du, lsof, journalctl, uptime, free, crontab and docker parsers on real shapes."""

# ruff: noqa: E501 - samples are real tool output, kept on their real (long) lines

from __future__ import annotations

import json

from playbooks.parsers.common import human, number, size_bytes
from playbooks.parsers.disk import (
    parse_df,
    parse_df_inodes,
    parse_du,
    parse_journal_usage,
    parse_lsof,
)
from playbooks.parsers.host import (
    ended_cleanly,
    parse_clock,
    parse_crontab,
    parse_docker_inspect,
    parse_free,
    parse_list_boots,
    parse_load,
    parse_uptime_since,
)

DF = """\
Filesystem     Type       1B-blocks           Used        Avail Capacity Mounted on
/dev/sda1      ext4    214748364800   204010946560            0     100% /
/dev/nvme1n1   ext4  16492674416640 16492674416640            0     100% /data
tmpfs          tmpfs   540092137472   194347270144 345744867328      36% /dev/shm
10.1.230.20:/shared nfs4 109951162777600 67070209294336 42880953483264 62% /mnt/my share
"""


def test_df_bytes_real_and_pseudo() -> None:
    fs = parse_df(DF)
    assert [f.mount for f in fs] == ["/", "/data", "/dev/shm", "/mnt/my share"]
    assert fs[0].used_pct == 100.0 and fs[0].real and not fs[2].real
    assert fs[2].used_pct is not None and 35 < fs[2].used_pct < 37


def test_df_inodes_and_dash() -> None:
    text = "Filesystem Type Inodes IUsed IFree IUse% Mounted on\n/dev/sda1 ext4 100 95 5 95% /\nnfs:/x nfs4 0 0 0 - /x\n"
    rows = parse_df_inodes(text)
    assert rows[0].used_pct == 95.0 and rows[1].used_pct is None


def test_du_sorted_largest_first() -> None:
    text = "2638827906662\t/data/checkpoints\n10775213952204\t/data/hidden_states\n15613065114419\t/data\n4.0K\t/data/x y\n"
    entries = parse_du(text)
    assert [e.path for e in entries] == [
        "/data",
        "/data/hidden_states",
        "/data/checkpoints",
        "/data/x y",
    ]
    assert entries[-1].size == 4096


def test_lsof_deleted_files_and_blank_size() -> None:
    text = """\
COMMAND  PID USER  FD TYPE DEVICE     SIZE/OFF NLINK    NODE NAME
python3 1312 root 17w  REG  259,1 442381631488     0 1000017 /data/tmp/shard-0007.tmp (deleted)
$(touch { 666 root 7w REG 259,1 10737418240 0 5 /data/$(touch /x/CANARY)/x.pt (deleted)
nvidia-pe 415 nvidia-p mem  CHR 195,255           414 /dev/nvidiactl
"""
    rows = parse_lsof(text)
    assert [(r.pid, r.size, r.deleted) for r in rows] == [
        (1312, 442381631488, True),
        (666, 10737418240, True),
        (415, None, False),
    ]
    assert rows[0].name == "/data/tmp/shard-0007.tmp (deleted)"
    assert rows[1].command == "$(touch {"


def test_journal_usage_variants() -> None:
    assert parse_journal_usage(
        "Archived and active journals take up 2.6G in the file system."
    ) == int(2.6 * 1024**3)
    # older journalctl.c: printf("Journals take up %s on disk.\n"), and the "Archived and
    # active journals take up %s on disk." form before "in the file system"
    assert parse_journal_usage("Journals take up 512.0M on disk.") == 512 * 1024**2
    assert parse_journal_usage("Archived and active journals take up 4.0G on disk.") == 4 * 1024**3
    assert (
        parse_journal_usage("Archived and active journals take up 31.0G in the file system.")
        == 31 * 1024**3
    )
    assert parse_journal_usage("No journal files were found.") is None


def test_list_boots_both_layouts() -> None:
    new = """\
IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY
 -1 972f18ade4645ebebae435d91677c0aa Sun 2026-11-22 11:45:32 UTC Sun 2026-11-29 11:45:32 UTC
  0 b3909905426a55aa9fc7ffc80d1eaeea Sun 2026-11-29 11:47:32 UTC Sun 2026-11-29 13:17:34 UTC
"""
    old = "-1 972f18ade4645ebebae435d91677c0aa Sun 2026-11-22 11:45:32 UTC—Sun 2026-11-29 11:45:32 UTC\n"
    boots = parse_list_boots(new)
    assert [b.index for b in boots] == [-1, 0]
    assert boots[0].last is not None and boots[1].first is not None
    assert (boots[1].first - boots[0].last).total_seconds() == 120
    assert parse_list_boots(old)[0].last == boots[0].last


def test_clean_and_unclean_boot_ends() -> None:
    assert ended_cleanly("systemd[1]: Shutting down.\nsystemd-journald[312]: Journal stopped\n")
    crash = "python3[23117]: OSError: [Errno 28] No space left on device: '/data/x.pt'\n"
    assert not ended_cleanly(crash) and not ended_cleanly("")


def test_uptime_free_clock() -> None:
    assert parse_load(" 13:17:34 up  1:30,  1 user,  load average: 0.08, 0.11, 0.09") == (
        0.08,
        0.11,
        0.09,
    )
    assert parse_load("garbage") is None
    mem = parse_free(
        "               total        used        free      shared  buff/cache   available\n"
        "Mem:    1099511627776 51539607552 992996438836 0 54975581388 1047972020224\n"
    )
    assert mem is not None and mem.available == 1047972020224
    assert parse_uptime_since("2026-11-29 11:47:32\n") is not None
    clock = parse_clock("1795957905 +0100\n2026-11-29 11:47:32\n")
    assert clock is not None and clock[0] == 1795957905
    assert parse_clock("1795957905 +0000\nbad\n") is None


def test_crontab_lines() -> None:
    text = "# m h dom mon dow command\nSHELL=/bin/bash\n@reboot /opt/start-vllm.sh --tp 8\n*/5 * * * * /usr/bin/true\nbroken\n"
    lines = parse_crontab(text, "svc")
    assert [(c.user, c.schedule, c.command) for c in lines] == [
        ("svc", "@reboot", "/opt/start-vllm.sh --tp 8"),
        ("svc", "*/5 * * * *", "/usr/bin/true"),
    ]


def test_docker_inspect() -> None:
    data = [
        {
            "Id": "ab" * 32,
            "Name": "/vllm",
            "Config": {"Image": "vllm/vllm-openai:v0.8"},
            "HostConfig": {"RestartPolicy": {"Name": "unless-stopped"},
                           "DeviceRequests": [{"Driver": "", "Count": -1,
                                               "Capabilities": [["gpu"]]}]},
            "State": {"Running": True, "Pid": 4242},
        },
        "junk",
        {"HostConfig": 3},
    ]
    boxes = parse_docker_inspect(json.dumps(data))
    assert boxes[0] == {
        "id": "ab" * 32,
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.8",
        "restart_policy": "unless-stopped",
        "running": True,
        "pid": 4242,
        "gpus": True,  # `docker run --gpus all`: a device request for the gpu capability
    }
    assert boxes[1]["restart_policy"] == "" and boxes[1]["gpus"] is False
    assert parse_docker_inspect("not json") == [] and parse_docker_inspect("{}") == []


def test_number_helpers() -> None:
    assert number("75800 MiB") == 75800 and number("[N/A]") is None and number("0 %") == 0
    assert size_bytes("3.9G") == int(3.9 * 1024**3) and size_bytes("x") is None
    assert human(77600 * 1024**2) == "75.8G" and human(None) == "?"


def test_findmnt_options() -> None:
    from playbooks.parsers.disk import parse_findmnt

    text = "/ rw,relatime\n/data ro,noatime\n/mnt/my\\x20share rw\nbroken\n"
    assert parse_findmnt(text) == {"/": {"rw", "relatime"}, "/data": {"ro", "noatime"},
                                   "/mnt/my share": {"rw"}}
