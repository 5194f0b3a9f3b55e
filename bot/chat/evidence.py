"""Raw probe output, only on demand (``/ir evidence ID`` or the "Raw evidence" button):
one thread reply per probe with its command, how it ended and its output, clipped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.chat.base import Section
from bot.chat.text import clip, code_safe, escape
from bot.core import fmt, strings
from bot.domain.findings import Diagnosis, ProbeResult
from bot.domain.incident_record import ProbeOutput

MAX_PROBES = 20  # a message holds 50 blocks: two per probe, room to spare
OUTPUT_CHARS = 2500


def probe_status(p: ProbeResult) -> str:
    if p.timed_out:
        return strings.MSG_PROBE_TIMED_OUT
    if p.error:
        return strings.MSG_PROBE_ERROR.format(error=escape(clip(p.error, 200)))
    return strings.MSG_PROBE_EXIT.format(code=p.exit_status)


def raw_evidence(diagnosis: Diagnosis) -> tuple[Section, ...]:
    """Sections for the thread: every probe's command and output (escaped, fenced)."""
    sections = []
    for p in diagnosis.probes[:MAX_PROBES]:
        output = (p.stdout + ("\n" + p.stderr if p.stderr else "")).strip()
        body = clip(output, OUTPUT_CHARS, marker="\n…") if output else strings.MSG_PROBE_NO_OUTPUT
        text = strings.MSG_PROBE_LINE.format(name=escape(p.name), status=probe_status(p),
                                             duration=fmt.duration(p.duration_s))
        sections.append(Section(text=text, code=code_safe(f"$ {clip(p.command, 300)}\n{body}")))
    if len(diagnosis.probes) > MAX_PROBES:
        sections.append(Section(text=strings.MSG_EVIDENCE_MORE.format(
            probes=fmt.counted(len(diagnosis.probes) - MAX_PROBES, "probe"),
            host=escape(diagnosis.host))))
    return tuple(sections)


def kept_outputs(diagnosis: Diagnosis) -> tuple[ProbeOutput, ...]:
    """The probes' outputs, clipped, kept beside the stored diagnosis (whose JSON contract
    leaves outputs out) so the raw evidence can still be shown on demand later."""
    return tuple(ProbeOutput(p.name, clip(p.stdout, OUTPUT_CHARS, marker="\n…"),
                             clip(p.stderr, 500, marker="\n…"), p.error or "")
                 for p in diagnosis.probes[:MAX_PROBES])


def with_outputs(diagnosis: Diagnosis, stored: Sequence[ProbeOutput]) -> Diagnosis:
    """The stored diagnosis with its probes' kept outputs put back, matched by position
    and name (a mismatch keeps the probe as it was)."""
    probes = list(diagnosis.probes)
    for i, kept in enumerate(stored[:len(probes)]):
        if kept.name == probes[i].name:
            probes[i] = replace(probes[i], stdout=kept.stdout, stderr=kept.stderr,
                                error=kept.error or probes[i].error)
    return replace(diagnosis, probes=tuple(probes))
