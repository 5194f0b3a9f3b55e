"""The terminal chat backend (the demo's default): messages print, buttons become commands.

Each approval shown gets a short number that stays the same across edits, so a person
types ``approve 3`` or ``deny 3 "reason"`` where Slack would show buttons; the incident's
own buttons read as ``ack ID`` / ``snooze ID 2h`` / ``resolve ID`` / ``retry ID`` /
``escalate ID``. Text from hosts is printed as ``rich.text.Text`` (never parsed as rich
markup), and the typed commands drive the same ``ApprovalDesk`` as Slack clicks, so the
rules are identical.
"""

from __future__ import annotations

import itertools
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from bot.chat.base import Button, ChatBackend, ChatMessage, Ephemeral, MessageRef, Section
from bot.chat.interactions import ApprovalDesk, AuditFn, Decision, GroupResolver
from bot.chat.slash import DEFAULT_SNOOZE_S, parse_duration
from bot.chat.text import mention, to_plain, visible
from bot.config.settings import Settings
from bot.core import strings
from bot.core.errors import UserError
from bot.domain.validate import INCIDENT_ID_RE

if TYPE_CHECKING:
    from bot.chat.backends import ChatApp
    from bot.chat.home_tab import FleetSource
    from bot.chat.slash import SlashHandlers
    from storage.stores import Stores

VERBS = ("approve", "deny", "revert")
INCIDENT_VERBS = ("ack", "resolve", "snooze", "retry", "escalate")
BOLD_RE = re.compile(r"\*([^*\n]+)\*")
EMOJI_RE = re.compile(r":([a-z][a-z0-9_+-]*):")
GROUP_RE = re.compile(r"<!subteam\^([A-Z0-9]+)(?:\|[^>]*)?>")
# Slack emoji codes as plain symbols: same words, no ``:code:`` printed literally.
SYMBOLS = {
    "red_circle": "●", "large_orange_circle": "●", "large_blue_circle": "●",
    "white_circle": "○", "white_check_mark": "✓", "heavy_check_mark": "✓", "thumbsup": "✓",
    "x": "✗", "no_entry": "✗", "no_entry_sign": "✗", "hourglass": "⧗",
    "hourglass_flowing_sand": "⧗", "raising_hand": "?", "new": "+", "mag": "…",
    "warning": "!", "rotating_light": "!", "gear": "⚙", "arrow_forward": "▶", "zzz": "z",
}


class TerminalInputError(UserError):
    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


@dataclass(frozen=True)
class TerminalCommand:
    verb: str  # approve | deny | revert | ack | resolve | snooze | retry | escalate | help | quit
    number: int | None = None
    reason: str = ""
    incident_id: str = ""  # the incident verbs name the incident, not a number
    duration_s: int = 0  # snooze only


def parse_command(line: str) -> TerminalCommand:
    """``approve 3`` / ``deny 3 "reason"`` / ``revert 4`` / ``help`` / ``quit`` (pure)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise TerminalInputError(f"{exc}. {strings.TERMINAL_USAGE}") from None
    if not words:
        raise TerminalInputError(strings.TERMINAL_USAGE)
    verb = words[0].lower()
    if verb in ("help", "?", "quit", "exit") and len(words) == 1:
        return TerminalCommand("quit" if verb in ("quit", "exit") else "help")
    if verb in INCIDENT_VERBS:
        return _incident_command(verb, words[1:])
    if verb not in VERBS or len(words) < 2 or not words[1].isdigit():
        raise TerminalInputError(strings.TERMINAL_USAGE)
    reason = " ".join(words[2:]).strip()
    if verb == "deny" and len(reason) < 3:
        raise TerminalInputError(strings.DENY_REASON_REQUIRED + " " + strings.TERMINAL_USAGE)
    if verb != "deny" and reason:
        raise TerminalInputError(strings.TERMINAL_USAGE)
    return TerminalCommand(verb, int(words[1]), reason)


def _incident_command(verb: str, args: list[str]) -> TerminalCommand:
    """``ack ID`` / ``resolve ID`` / ``retry ID`` / ``escalate ID`` / ``snooze ID [2h]``."""
    most = 2 if verb == "snooze" else 1
    if not 1 <= len(args) <= most or not INCIDENT_ID_RE.match(args[0]):
        raise TerminalInputError(strings.TERMINAL_USAGE)
    if verb != "snooze":
        return TerminalCommand(verb, incident_id=args[0])
    try:
        seconds = parse_duration(args[1]) if len(args) == 2 else DEFAULT_SNOOZE_S
    except ValueError as exc:
        raise TerminalInputError(f"{exc} {strings.TERMINAL_USAGE}") from None
    return TerminalCommand(verb, incident_id=args[0], duration_s=seconds)


class TerminalBackend:
    """``ChatBackend`` that prints with rich; ``history`` keeps what was shown (tests)."""

    def __init__(self, console: Console | None = None, upload_dir: Path | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.upload_dir = upload_dir
        self.history: list[tuple[MessageRef, ChatMessage]] = []
        self._ts = itertools.count(1)
        self._numbers: dict[str, int] = {}
        self._buttons: dict[int, dict[str, Button]] = {}

    def post(
        self, channel: str, message: ChatMessage, thread: MessageRef | None = None
    ) -> MessageRef:
        ref = MessageRef(channel=channel or "terminal", ts=f"{next(self._ts)}")
        self._show(ref, message, f"↳ reply in #{thread.ts}" if thread else f"message #{ref.ts}")
        return ref

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        self._show(ref, message, f"message #{ref.ts} (edited)")

    def ephemeral(self, note: Ephemeral) -> None:
        prefix = strings.TERMINAL_ONLY_YOU.format(user=to_plain(mention(note.user)))
        self.console.print(Text(f"{prefix} {_plain(note.text)}", style="dim"))

    def upload(self, ref: MessageRef, path: Path, title: str) -> None:
        shown = path
        if self.upload_dir is not None:
            self.upload_dir.mkdir(parents=True, exist_ok=True)
            shown = Path(shutil.copy2(path, self.upload_dir / path.name))
        self.console.print(Text(f"📎 {visible(title)}: {shown}  (in #{ref.ts})"))

    def read_command(self, line: str) -> TerminalCommand:
        """Parse a typed line and check its number refers to a shown button."""
        cmd = parse_command(line)
        if cmd.number is not None:
            self.button_for(cmd)
        return cmd

    def button_for(self, cmd: TerminalCommand) -> Button:
        known = self._buttons.get(cmd.number or -1)
        if known is None:
            listed = ", ".join(str(n) for n in sorted(self._buttons)) or "none"
            raise TerminalInputError(
                strings.TERMINAL_UNKNOWN_NUMBER.format(n=cmd.number, known=listed)
            )
        button = known.get(cmd.verb)
        if button is None:
            raise TerminalInputError(
                strings.TERMINAL_NO_VERB.format(
                    n=cmd.number, verb=cmd.verb, verbs=", ".join(sorted(known))
                )
            )
        return button

    def number_of(self, value: str) -> int | None:
        return self._numbers.get(value)

    def _show(self, ref: MessageRef, message: ChatMessage, where: str) -> None:
        self.history.append((ref, message))
        body: list[RenderableType] = [self._section(s) for s in message.sections]
        if message.buttons:
            body.append(self._buttons_line(message.buttons))
        body += [_rich(c, style="dim") for c in message.context]
        title = Text(BOLD_RE.sub(r"\1", _plain(message.header or message.text)), style="bold")
        self.console.print(
            Panel(Group(*body), title=title, subtitle=Text(where), title_align="left")
        )

    def _section(self, section: Section) -> RenderableType:
        parts: list[RenderableType] = [_rich(section.text)] if section.text.strip() else []
        parts += [_rich(f) for f in section.fields]
        if section.code:
            parts.append(Text(to_plain(section.code), style="cyan"))
        buttons = section.buttons + ((section.accessory,) if section.accessory else ())
        if buttons:
            parts.append(self._buttons_line(buttons))
        return Group(*parts)

    def _buttons_line(self, buttons: tuple[Button, ...]) -> Text:
        line = Text()
        typed = _incident_commands(buttons)
        if typed:
            line.append("  |  ".join(typed), style="bold green")
        numbered = tuple(b for b in buttons if _verb(b) in VERBS)
        for value in dict.fromkeys(b.value for b in numbered):
            if line.plain:
                line.append("\n")
            n = self._numbers.setdefault(value, len(self._numbers) + 1)
            verbs = {_verb(b): b for b in numbered if b.value == value}
            self._buttons[n] = verbs
            cmds = [f'deny {n} "reason"' if v == "deny" else f"{v} {n}" for v in verbs]
            line.append(f"[{n}] ", style="bold")
            line.append("  |  ".join(cmds), style="bold green")
            if any(b.confirm for b in verbs.values()):
                line.append("  (runs commands on the host)", style="yellow")
        return line


def _verb(button: Button) -> str:
    return button.action_id.split(":")[0].removeprefix("incident_")


def _incident_commands(buttons: tuple[Button, ...]) -> list[str]:
    """The incident's own buttons as the commands to type (raw evidence stays in Slack:
    the terminal demo already printed everything it ran)."""
    out: dict[str, list[str]] = {}
    for b in buttons:
        verb = _verb(b)
        if verb not in INCIDENT_VERBS:
            continue
        incident_id, _, secs = b.value.partition("|")
        out.setdefault(verb, [incident_id])
        if secs.isdigit():
            out[verb].append(_duration_word(int(secs)))
    cmds = []
    for verb, (incident_id, *durations) in out.items():
        cmds.append(f"{verb} {incident_id}" + (f" {'|'.join(durations)}" if durations else ""))
    return cmds


def _duration_word(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def handle_line(
    backend: TerminalBackend, desk: ApprovalDesk, user: str, line: str
) -> Decision | None:
    """One typed line → the same desk as a Slack click; prints the private answer."""
    cmd = backend.read_command(line)
    if cmd.incident_id:
        text = desk.incident(cmd.verb, cmd.incident_id, user, cmd.duration_s,
                             channel="terminal")
        if text:  # "": queued, the flow's consumer answers once it applied it
            backend.ephemeral(Ephemeral(user=user, text=text, channel="terminal"))
        return None
    if cmd.number is None:
        backend.console.print(Text(strings.TERMINAL_USAGE))
        return None
    button = backend.button_for(cmd)
    if cmd.verb == "deny":
        decision = desk.check(button.value, user) or desk.deny(button.value, user, cmd.reason)
    else:
        decision = desk.approve(button.value, user)
    backend.ephemeral(Ephemeral(user=user, text=decision.text, channel="terminal"))
    return decision


def symbols(text: str) -> str:
    """Emoji codes → plain symbols; an unknown code is dropped, never printed as ``:code:``."""
    return EMOJI_RE.sub(lambda m: SYMBOLS.get(m.group(1), ""), text)


def _plain(text: str) -> str:
    return symbols(to_plain(GROUP_RE.sub(r"@\1", text)))


def _rich(text: str, style: str = "") -> Text:
    """mrkdwn ``*bold*`` → bold; everything else literal (no rich markup parsing)."""
    plain, out, pos = _plain(text), Text(style=style), 0
    for m in BOLD_RE.finditer(plain):
        out.append(plain[pos : m.start()])
        out.append(m.group(1), style="bold")
        pos = m.end()
    out.append(plain[pos:])
    return out


class TerminalPlugin:
    """The terminal as a chat backend plugin (``chat_backend: terminal``): prints with rich,
    needs no secret, has no interactive side of its own (the demo reads its prompt)."""

    name: ClassVar[str] = "terminal"

    def __init__(self, settings: Settings, *, stores: Stores | None = None,
                 audit: AuditFn | None = None, console: Console | None = None) -> None:
        self.console = console

    def backend(self) -> ChatBackend:
        return TerminalBackend(self.console)

    def groups(self, chat: ChatBackend) -> GroupResolver | None:
        return None

    def app(self, chat: ChatBackend, *, desk: ApprovalDesk, slash: SlashHandlers | None,
            home: FleetSource | None) -> ChatApp | None:
        return None

    @classmethod
    def missing_secrets(cls, settings: Settings) -> list[tuple[str, str]]:
        return []
