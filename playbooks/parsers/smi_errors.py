"""What ``nvidia-smi`` says when it cannot answer, as data: every wording seen on real
hosts (tests/fixtures/real/smi_*.txt) becomes an ``SmiError`` that quotes the tool.

An error is never "no GPUs": a lost GPU, a driver/library mismatch and a missing driver
are different incidents with different steps; a refusal (NVML's "Insufficient
Permissions", a sudo that asks for a password, a tool that is not installed) is not
about the GPUs at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from bot.core.strings import GPU_SMI_HUNG
from playbooks.parsers.common import lines
from playbooks.parsers.kernel import bus_key
from playbooks.parsers.refusal import RefusalKind, refusal


class SmiErrorKind(StrEnum):
    NVML_MISMATCH = "nvml_mismatch"  # Failed to initialize NVML: Driver/library version mismatch
    NVML_INIT = "nvml_init"  # Failed to initialize NVML: <other reason>
    DENIED = "denied"  # Failed to initialize NVML: Insufficient Permissions; sudo refused
    MISSING = "missing"  # nvidia-smi: command not found
    NO_DEVICES = "no_devices"  # No devices were found
    NO_DRIVER = "no_driver"  # couldn't communicate with the NVIDIA driver
    DEVICE_HANDLE = "device_handle"  # Unable to determine the device handle ...: Unknown Error
    GPU_LOST = "gpu_lost"  # ... GPU is lost. Reboot the system to recover this GPU
    HUNG = "hung"  # no answer before the deadline
    FAILED = "failed"  # nonzero exit with words we do not know
    UNREADABLE = "unreadable"  # output that is not a GPU row


@dataclass(frozen=True)
class SmiError:
    kind: SmiErrorKind
    quote: str  # the tool's own words
    bus: str | None = None  # normalised PCI address for per-device errors
    library_version: str | None = None

    @property
    def per_device(self) -> bool:
        return self.bus is not None


_NVML = re.compile(r"Failed to initialize NVML:\s*(?P<why>.+)", re.I)
_LIBRARY = re.compile(r"NVML library version:\s*(?P<v>[0-9][0-9.]*)", re.I)
_HANDLE = re.compile(r"Unable to (?:determine|detect) the device handle for GPU\s*"
                     r"(?P<bus>[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
                     r":\s*(?P<why>.+)", re.I)
_NO_DEVICES = re.compile(r"^No devices were found", re.I)
_NO_DRIVER = re.compile(r"couldn't communicate with the NVIDIA driver", re.I)


def parse_smi_errors(text: str) -> list[SmiError]:
    """Every recognised error line in ``nvidia-smi`` output (stdout and stderr joined)."""
    found: list[SmiError] = []
    library = next((m["v"] for m in map(_LIBRARY.search, lines(text)) if m), None)
    for line in lines(text):
        err = _one(line.strip(), library)
        if err is not None:
            found.append(err)
    return found


def _one(line: str, library: str | None) -> SmiError | None:
    if m := _NVML.search(line):
        why = m["why"].lower()
        kind = SmiErrorKind.NVML_MISMATCH if "version mismatch" in why else \
            SmiErrorKind.DENIED if "insufficient permissions" in why else SmiErrorKind.NVML_INIT
        quote = line + (f" (NVML library version: {library})" if library else "")
        return SmiError(kind, quote, library_version=library)
    if m := _HANDLE.search(line):
        kind = SmiErrorKind.GPU_LOST if "gpu is lost" in m["why"].lower() \
            else SmiErrorKind.DEVICE_HANDLE
        return SmiError(kind, line, bus=bus_key(m["bus"]))
    if _NO_DEVICES.search(line):
        return SmiError(SmiErrorKind.NO_DEVICES, line)
    if _NO_DRIVER.search(line):
        return SmiError(SmiErrorKind.NO_DRIVER, line)
    said = refusal(line)
    if said is not None:
        kind = SmiErrorKind.MISSING if said.kind is RefusalKind.MISSING else SmiErrorKind.DENIED
        return SmiError(kind, said.quote)
    return None


REFUSALS = (SmiErrorKind.DENIED, SmiErrorKind.MISSING)


def first_error(text: str) -> SmiError | None:
    """The tool's error where ``text`` holds no GPU row: what a row parser returns instead
    of an empty list (which would read as "no GPUs")."""
    found = parse_smi_errors(text)
    return found[0] if found else None


def smi_problems(stdout: str, stderr: str, exit_status: int | None, timed_out: bool,
                 unread: list[str], timeout_s: float) -> list[SmiError]:
    """Everything wrong with one ``nvidia-smi`` run: known errors, a hang, an unknown
    failure (quoting its first line) and lines that are not GPU rows."""
    if timed_out:
        return [SmiError(SmiErrorKind.HUNG, GPU_SMI_HUNG.format(secs=round(timeout_s, 1)))]
    known = parse_smi_errors(stdout + "\n" + stderr) if exit_status != 0 else \
        [e for e in parse_smi_errors(stdout + "\n" + stderr) if e.kind not in REFUSALS]
    quoted = {e.quote.split(" (NVML")[0] for e in known}
    rest = [u for u in unread if u not in quoted and not _LIBRARY.search(u)]
    if exit_status not in (0, None) and not known:
        first = next(iter(lines(stderr) + lines(stdout)), "")
        known.append(SmiError(SmiErrorKind.FAILED,
                              f"nvidia-smi exited with status {exit_status}: {first}".rstrip(": ")))
    known += [SmiError(SmiErrorKind.UNREADABLE, u) for u in rest[:5]]
    return known
