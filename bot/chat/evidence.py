"""Raw probe output, only on demand (``/ir evidence ID`` or the "Raw evidence" button):
one thread reply per probe with its command, how it ended and its output, clipped."""

from __future__ import annotations

from bot.chat.base import Section
from bot.chat.text import clip, code_safe, escape
from bot.core import fmt, strings
from bot.domain.findings import Diagnosis, ProbeResult

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
            n=len(diagnosis.probes) - MAX_PROBES, host=escape(diagnosis.host))))
    return tuple(sections)
