"""Operator extensions (YAML): the contract of one file and the pure rules that use it.

A file holds ``probes`` (a named read-only command), ``findings`` (a probe's stdout that
matches a pattern becomes a finding, and may propose an action) and ``actions`` (``ext.*``
kinds: parameters with patterns, the commands to run, the command that verifies, the
commands that revert, the words). This module validates a file's mapping into typed
definitions (``compile_file``) and holds the rules that need no I/O: an action's command
is a template split into words once, each ``{param}`` filled with a value that matched
its pattern in full and then quoted (``fill``); a finding matches with ``re.search`` on
the probe's stdout (``stdout_matches``); a title takes ``{stdout}``.

Everything an operator writes is bounded (``LIMITS``); a kind or a finding code must
start with ``ext.``, so an extension never shadows a built-in one. Reading the files is
``bot/extensions/loader.py``'s; registering the definitions is ``bot/extensions/install.py``'s.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from bot.core import strings as S
from bot.domain.validate import InvalidIdentifier

PREFIX = "ext."
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,47}")  # a probe's or a parameter's name
CODE_RE = re.compile(r"ext(\.[a-z0-9_]{1,32}){1,3}")  # an ext. kind or finding code
PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
REVERT_SUFFIX = ".revert"  # an action's revert is registered as its kind plus this


@dataclass(frozen=True)
class Limits:
    """What one file may hold, and how long its texts may be."""

    file_bytes: int = 256 * 1024
    files: int = 64  # per directory
    probes: int = 32
    findings: int = 64
    actions: int = 32
    params: int = 8
    commands: int = 8  # run and revert, each
    command_chars: int = 1000
    pattern_chars: int = 300
    text_chars: int = 300  # title, says, risk, help
    value_chars: int = 256  # a parameter's value
    stdout_chars: int = 65536  # what a pattern is matched against (the head of stdout)
    timeout_s: float = 300.0
    within_s: float = 600.0


LIMITS = Limits()


class InvalidValue(ValueError):
    """Parameters an extension's action refuses (unknown, missing); shown verbatim. A value
    outside its pattern is ``validate.InvalidIdentifier``, as for a built-in action."""


# --- the file's shape (what the YAML maps to) -------------------------------------------

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _pattern(value: str) -> str:
    if len(value) > LIMITS.pattern_chars:
        raise ValueError(S.EXT_TOO_LONG.format(n=LIMITS.pattern_chars))
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(S.EXT_BAD_PATTERN.format(why=exc)) from None
    return value


def _text(value: str) -> str:
    if len(value) > LIMITS.text_chars:
        raise ValueError(S.EXT_TOO_LONG.format(n=LIMITS.text_chars))
    if not value.isprintable():
        raise ValueError(S.EXT_NOT_PRINTABLE)
    return value


def _command(value: str) -> str:
    if not value.strip():
        raise ValueError(S.EXT_EMPTY_COMMAND)
    if len(value) > LIMITS.command_chars:
        raise ValueError(S.EXT_TOO_LONG.format(n=LIMITS.command_chars))
    if not value.isprintable():
        raise ValueError(S.EXT_NOT_PRINTABLE)
    return value


class ProbeEntry(_Strict):
    command: str
    timeout_s: float = Field(10.0, gt=0, le=LIMITS.timeout_s)

    @field_validator("command")
    @classmethod
    def _check_command(cls, v: str) -> str:
        return _command(v)


class When(_Strict):
    stdout_matches: str

    @field_validator("stdout_matches")
    @classmethod
    def _check_pattern(cls, v: str) -> str:
        return _pattern(v)


class Propose(_Strict):
    action: str
    params: dict[str, str | int | float] = Field(default_factory=dict, max_length=LIMITS.params)

    @field_validator("params")
    @classmethod
    def _stdout_only(cls, v: dict[str, str | int | float]) -> dict[str, str | int | float]:
        for value in v.values():
            bad = [p for p in PLACEHOLDER_RE.findall(str(value)) if p != "stdout"]
            if bad:
                raise ValueError(S.EXT_PARAM_FIELDS.format(name=bad[0]))
        return v


class FindingEntry(_Strict):
    code: str
    probe: str
    when: When
    severity: Literal["critical", "warning", "info"]
    title: str
    playbooks: list[str] | None = Field(None, min_length=1, max_length=16)
    propose: Propose | None = None

    @field_validator("code")
    @classmethod
    def _code(cls, v: str) -> str:
        return ext_name(v, "code")

    @field_validator("title")
    @classmethod
    def _title(cls, v: str) -> str:
        _text(v)
        bad = [p for p in PLACEHOLDER_RE.findall(v) if p != "stdout"]
        if bad:
            raise ValueError(S.EXT_TITLE_FIELDS.format(name=bad[0]))
        return v


def _name(value: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise ValueError(S.EXT_BAD_NAME.format(name=value))
    return value


def _kind(value: str) -> str:
    return ext_name(value, "kind")


Name = Annotated[str, AfterValidator(_name)]
Kind = Annotated[str, AfterValidator(_kind)]


class ParamEntry(_Strict):
    pattern: str
    help: str = ""

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, v: str) -> str:
        return _pattern(v)

    @field_validator("help")
    @classmethod
    def _check_help(cls, v: str) -> str:
        return _text(v)


class VerifyEntry(_Strict):
    command: str
    stdout_matches: str
    within_s: float = Field(gt=0, le=LIMITS.within_s)

    @field_validator("command")
    @classmethod
    def _check_command(cls, v: str) -> str:
        return _command(v)

    @field_validator("stdout_matches")
    @classmethod
    def _check_pattern(cls, v: str) -> str:
        return _pattern(v)


class ActionEntry(_Strict):
    params: dict[Name, ParamEntry] = Field(default_factory=dict, max_length=LIMITS.params)
    run: list[str] = Field(min_length=1, max_length=LIMITS.commands)
    verify: VerifyEntry
    revert: list[str] | None = Field(None, min_length=1, max_length=LIMITS.commands)
    says: str
    risk: str = ""
    timeout_s: float = Field(30.0, gt=0, le=LIMITS.timeout_s)

    @field_validator("run", "revert")
    @classmethod
    def _commands(cls, v: list[str] | None) -> list[str] | None:
        for text in v or ():
            _command(text)
        return v

    @field_validator("says", "risk")
    @classmethod
    def _check_text(cls, v: str) -> str:
        return _text(v)


class ExtensionFile(_Strict):
    probes: dict[Name, ProbeEntry] = Field(default_factory=dict, max_length=LIMITS.probes)
    findings: list[FindingEntry] = Field(default_factory=list, max_length=LIMITS.findings)
    actions: dict[Kind, ActionEntry] = Field(default_factory=dict, max_length=LIMITS.actions)


def ext_name(value: str, what: str) -> str:
    """An ``ext.`` kind or finding code: the prefix keeps it apart from every built-in."""
    if not value.startswith(PREFIX):
        raise ValueError(S.EXT_NO_PREFIX.format(what=what, value=value))
    if not CODE_RE.fullmatch(value):
        raise ValueError(S.EXT_BAD_CODE.format(what=what, value=value))
    return value


# --- the definitions an extension compiles to ------------------------------------------

Template = tuple[str, ...]  # a command's words, each may hold {param}


@dataclass(frozen=True)
class ProbeDef:
    name: str
    command: str  # sent as written (fixed text: a probe takes no parameters)
    timeout_s: float
    source: str  # the file it came from


@dataclass(frozen=True)
class FindingDef:
    code: str
    probe: str
    stdout_matches: str
    severity: str
    title: str
    playbooks: frozenset[str] | None  # None: every playbook
    propose: tuple[str, dict[str, str]] | None  # (kind, params)
    source: str

    def applies_to(self, playbook: str) -> bool:
        return self.playbooks is None or playbook in self.playbooks

    def matches(self, stdout: str) -> bool:
        return stdout_matches(self.stdout_matches, stdout)

    def title_for(self, stdout: str) -> str:
        """The title with ``{stdout}`` as the probe's first line of output."""
        return self.title.replace("{stdout}", first_line(stdout)[:120])

    def proposal_for(self, stdout: str) -> tuple[str, dict[str, str]] | None:
        """(kind, params) with ``{stdout}`` filled in: a value the host printed, which the
        action's patterns still judge before anything is planned (a hostile host's output
        is refused there)."""
        if self.propose is None:
            return None
        kind, params = self.propose
        line = first_line(stdout)
        return kind, {k: v.replace("{stdout}", line) for k, v in params.items()}


def first_line(stdout: str) -> str:
    return next((ln.strip() for ln in stdout.splitlines() if ln.strip()), "")


@dataclass(frozen=True)
class ParamDef:
    name: str
    pattern: str
    help: str

    def check(self, value: object) -> str:
        """The value, if it matches the pattern in full (and is no option, no control
        character, not too long); ``validate.InvalidIdentifier`` saying why otherwise."""
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidIdentifier(self.name, value, S.EXT_VALUE_TYPE)
        text = str(value)
        if not text or len(text) > LIMITS.value_chars:
            raise InvalidIdentifier(self.name, text,
                                    S.EXT_VALUE_LENGTH.format(n=LIMITS.value_chars))
        if not text.isprintable():
            raise InvalidIdentifier(self.name, text, S.EXT_VALUE_CONTROL)
        if text.startswith("-"):
            raise InvalidIdentifier(self.name, text, S.EXT_VALUE_OPTION)
        if re.fullmatch(self.pattern, text) is None:
            raise InvalidIdentifier(self.name, text,
                                    S.EXT_VALUE_PATTERN.format(pattern=self.pattern))
        return text


@dataclass(frozen=True)
class VerifyDef:
    command: Template
    stdout_matches: str
    within_s: float


@dataclass(frozen=True)
class ActionDef:
    kind: str
    params: tuple[ParamDef, ...]
    run: tuple[Template, ...]
    verify: VerifyDef
    revert: tuple[Template, ...] | None
    says: str
    risk: str
    timeout_s: float
    source: str

    def validate(self, values: Mapping[str, object]) -> dict[str, str]:
        """Every parameter present, known and matching its pattern; ``InvalidValue``."""
        names = {p.name for p in self.params}
        extra = sorted(set(values) - names)
        if extra:
            raise InvalidValue(S.EXT_VALUE_UNKNOWN.format(name=extra[0],
                                                          names=", ".join(sorted(names)) or "-"))
        missing = [p.name for p in self.params if p.name not in values]
        if missing:
            raise InvalidValue(S.EXT_VALUE_MISSING.format(name=missing[0]))
        return {p.name: p.check(values[p.name]) for p in self.params}

    def said(self, values: Mapping[str, str]) -> str:
        return fill_text(self.says, values)


@dataclass(frozen=True)
class Extensions:
    """Every definition of every file, checked against each other (``combine``)."""

    probes: Mapping[str, ProbeDef]
    findings: tuple[FindingDef, ...]
    actions: Mapping[str, ActionDef]

    @property
    def empty(self) -> bool:
        return not (self.probes or self.findings or self.actions)


NO_EXTENSIONS = Extensions({}, (), {})


@dataclass(frozen=True)
class Problem:
    """One thing wrong: the file, the key in it and the reason."""

    source: str
    key: str
    reason: str

    def line(self) -> str:
        return S.EXT_PROBLEM.format(source=self.source, key=self.key, reason=self.reason)


# --- templates --------------------------------------------------------------------------

SHELL_PUNCTUATION = "();<>|&"


def template(text: str, params: Iterable[str]) -> Template:
    """A command's words (``shlex``), each ``{name}`` a declared parameter. One program and
    its arguments: a shell operator would reach the program as a literal argument (every
    word is quoted when sent), so it is refused here with that reason."""
    try:
        words = tuple(shlex.split(text))
    except ValueError as exc:
        raise ValueError(S.EXT_BAD_COMMAND.format(why=exc)) from None
    if not words:
        raise ValueError(S.EXT_EMPTY_COMMAND)
    known = set(params)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=SHELL_PUNCTUATION)
    operator = next((t for t in lexer if t and set(t) <= set(SHELL_PUNCTUATION)), None)
    if operator is not None:
        raise ValueError(S.EXT_SHELL_WORD.format(word=operator))
    for word in words:
        if "`" in word or "$(" in word:
            raise ValueError(S.EXT_SHELL_WORD.format(word=word))
        for literal, name, spec, conv in string.Formatter().parse(word):
            del literal
            if name is None:
                continue
            if spec or conv or name not in known:
                raise ValueError(S.EXT_UNKNOWN_PARAM.format(name=name or "{}",
                                                            names=", ".join(sorted(known)) or "-"))
    if "{" in words[0]:
        raise ValueError(S.EXT_PROGRAM_PARAM)
    return words


def fill(words: Template, values: Mapping[str, str]) -> tuple[str, ...]:
    """The command's argv: each ``{name}`` replaced by its (validated) value. The caller
    joins it with ``shlex.join``, so every word, and with it every value, is quoted."""
    return tuple(word.format_map(dict(values)) for word in words)


def fill_text(text: str, values: Mapping[str, str]) -> str:
    """``says`` with its ``{name}`` fields (unknown ones left as written)."""
    return PLACEHOLDER_RE.sub(lambda m: values.get(m[1], m[0]), text)


def stdout_matches(pattern: str, stdout: str) -> bool:
    """``re.search`` over the head of stdout (a host's output is bounded before a pattern
    an operator wrote runs over it)."""
    return re.search(pattern, stdout[:LIMITS.stdout_chars]) is not None


# --- compiling a file -------------------------------------------------------------------

def key_of(loc: Iterable[Any]) -> str:
    """pydantic's location as a dotted key (a mapping's bad key is named by itself)."""
    return ".".join(str(p) for p in loc if p != "[key]") or "(top level)"


def parse_file(source: str, data: object) -> tuple[ExtensionFile | None, list[Problem]]:
    """The file's mapping validated into its shape, or every problem with its key."""
    if not isinstance(data, dict):
        return None, [Problem(source, "(top level)", S.EXT_NOT_MAPPING)]
    try:
        return ExtensionFile.model_validate(data), []
    except ValidationError as exc:
        return None, [Problem(source, key_of(e["loc"]), _msg(e)) for e in exc.errors()]


def _msg(err: Any) -> str:
    cause = (err.get("ctx") or {}).get("error")
    return str(cause) if isinstance(cause, ValueError) else str(err["msg"])


def compile_file(source: str, f: ExtensionFile, playbooks: Mapping[str, str]
                 ) -> tuple[list[ProbeDef], list[FindingDef], list[ActionDef], list[Problem]]:
    """The definitions of one valid file. ``playbooks`` maps every name a finding may list
    (a playbook, or an alert kind) to the playbook it stands for."""
    problems: list[Problem] = []
    probes = [ProbeDef(n, p.command, p.timeout_s, source) for n, p in f.probes.items()]
    actions = []
    for kind, a in f.actions.items():
        action, found = _action(source, kind, a)
        problems += found
        if action is not None:
            actions.append(action)
    findings = []
    for i, entry in enumerate(f.findings):
        finding, found = _finding(source, i, entry, playbooks)
        problems += found
        if finding is not None:
            findings.append(finding)
    return probes, findings, actions, problems


def _action(source: str, kind: str, a: ActionEntry) -> tuple[ActionDef | None, list[Problem]]:
    names = list(a.params)
    problems: list[Problem] = []

    def words(key: str, text: str) -> Template:
        try:
            return template(text, names)
        except ValueError as exc:
            problems.append(Problem(source, f"actions.{kind}.{key}", str(exc)))
            return ()

    run = tuple(words(f"run.{i}", t) for i, t in enumerate(a.run))
    verify = words("verify.command", a.verify.command)
    revert = (tuple(words(f"revert.{i}", t) for i, t in enumerate(a.revert))
              if a.revert is not None else None)
    bad_says = [p for p in PLACEHOLDER_RE.findall(a.says) if p not in names]
    if bad_says:
        problems.append(Problem(source, f"actions.{kind}.says", S.EXT_UNKNOWN_PARAM.format(
            name=bad_says[0], names=", ".join(names) or "-")))
    if problems:
        return None, problems
    params = tuple(ParamDef(n, p.pattern, p.help) for n, p in a.params.items())
    return ActionDef(kind, params, run, VerifyDef(verify, a.verify.stdout_matches,
                                                  a.verify.within_s), revert, a.says,
                     a.risk or S.EXT_RISK, a.timeout_s, source), []


def _finding(source: str, i: int, f: FindingEntry, playbooks: Mapping[str, str]
             ) -> tuple[FindingDef | None, list[Problem]]:
    chosen: set[str] = set()
    for j, name in enumerate(f.playbooks or ()):
        if name not in playbooks:
            return None, [Problem(source, f"findings.{i}.playbooks.{j}", S.EXT_UNKNOWN_PLAYBOOK
                                  .format(name=name, names=", ".join(sorted(playbooks))))]
        chosen.add(playbooks[name])
    propose = None
    if f.propose is not None:
        propose = (f.propose.action, {k: str(v) for k, v in f.propose.params.items()})
    return FindingDef(f.code, f.probe, f.when.stdout_matches, f.severity, f.title,
                      frozenset(chosen) if f.playbooks else None, propose, source), []


def combine(parts: Iterable[tuple[list[ProbeDef], list[FindingDef], list[ActionDef]]], *,
            builtin_probes: Iterable[str], builtin_kinds: Iterable[str]
            ) -> tuple[Extensions, list[Problem]]:
    """Every file's definitions as one set; each name defined once (across files, and
    never a built-in's), each finding's probe and proposal resolved."""
    problems: list[Problem] = []
    taken_probes, taken_kinds = set(builtin_probes), set(builtin_kinds)
    probes: dict[str, ProbeDef] = {}
    actions: dict[str, ActionDef] = {}
    findings: list[FindingDef] = []
    codes: dict[str, str] = {}
    for p_list, f_list, a_list in parts:
        for p in p_list:
            if p.name in taken_probes or p.name in probes:
                where = probes[p.name].source if p.name in probes else S.EXT_BUILTIN
                problems.append(Problem(p.source, f"probes.{p.name}",
                                        S.EXT_TAKEN.format(what="probe", name=p.name, where=where)))
            else:
                probes[p.name] = p
        for a in a_list:
            if a.kind in taken_kinds or a.kind in actions:
                where = actions[a.kind].source if a.kind in actions else S.EXT_BUILTIN
                problems.append(Problem(a.source, f"actions.{a.kind}",
                                        S.EXT_TAKEN.format(what="kind", name=a.kind, where=where)))
            else:
                actions[a.kind] = a
        findings += f_list
    for a in actions.values():
        revert = a.kind + REVERT_SUFFIX
        if a.revert is not None and (revert in actions or revert in taken_kinds):
            problems.append(Problem(a.source, f"actions.{a.kind}.revert", S.EXT_TAKEN.format(
                what="kind", name=revert, where=actions[revert].source if revert in actions
                else S.EXT_BUILTIN)))
    for i, f in enumerate(findings):
        at = _index_in(findings, i)
        if f.code in codes:
            problems.append(Problem(f.source, f"findings.{at}.code", S.EXT_TAKEN.format(
                what="finding code", name=f.code, where=codes[f.code])))
        codes.setdefault(f.code, f.source)
        if f.probe not in probes and f.probe not in taken_probes:
            problems.append(Problem(f.source, f"findings.{at}.probe", S.EXT_UNKNOWN_PROBE
                                    .format(name=f.probe)))
        problems += _proposal(f, at, actions, taken_kinds)
    return Extensions(probes, tuple(findings), actions), problems


def _index_in(findings: list[FindingDef], i: int) -> int:
    """The finding's index within its own file."""
    return sum(1 for f in findings[:i] if f.source == findings[i].source)


def _proposal(f: FindingDef, where: int, actions: Mapping[str, ActionDef],
              builtin: set[str]) -> list[Problem]:
    """An ``ext.`` proposal must name an action of the extensions, with values its
    patterns take; any other kind must be a registered one (checked by its own grammar
    when it is planned, as a built-in rule's proposal is)."""
    if f.propose is None:
        return []
    kind, params = f.propose
    key = f"findings.{where}.propose"
    if kind in actions:
        if any("{stdout}" in v for v in params.values()):
            return []  # the host's words: judged by the patterns when it is proposed
        try:
            actions[kind].validate(params)
        except ValueError as exc:  # InvalidValue, or the grammar's InvalidIdentifier
            return [Problem(f.source, f"{key}.params", str(exc))]
        return []
    if kind not in builtin:
        return [Problem(f.source, f"{key}.action", S.EXT_UNKNOWN_KIND.format(kind=kind))]
    return []
