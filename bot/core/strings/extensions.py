"""Operator extensions (issue 34): what a bad extension file, a refused value, an
extension's finding and action, and ``incident-bot extensions`` say."""

# --- a file's problems: "FILE: key 'KEY': REASON" ---------------------------------------
EXT_PROBLEM = "{source}: key '{key}': {reason}"
EXT_TOO_LONG = "longer than {n} characters"
EXT_BAD_PATTERN = "not a regular expression: {why}"
EXT_NOT_PRINTABLE = "holds a newline or another control character"
EXT_EMPTY_COMMAND = "an empty command"
EXT_BAD_COMMAND = "cannot be split into words: {why}"
EXT_SHELL_WORD = ("{word!r}: one program and its arguments per command (every word is quoted "
                  "when it is sent, so a shell operator would reach the program as an argument)")
EXT_PROGRAM_PARAM = "the program (the first word) cannot be a parameter"
EXT_UNKNOWN_PARAM = "{{{name}}} is not a parameter of this action (its parameters: {names})"
EXT_TITLE_FIELDS = "{{{name}}}: a title may use only {{stdout}}"
EXT_PARAM_FIELDS = "{{{name}}}: a proposed value may use only {{stdout}} (the probe's first line)"
EXT_BAD_NAME = "{name!r} is not a name (a-z, 0-9 and _, starting with a letter, at most 48)"
EXT_NO_PREFIX = "{what} {value!r} must start with 'ext.' (the built-in ones cannot be replaced)"
EXT_BAD_CODE = "{what} {value!r} must look like ext.name (a-z, 0-9 and _; at most 3 parts)"
EXT_NOT_MAPPING = "the file must be a mapping with probes, findings and actions"
EXT_NOT_YAML = "not valid YAML{where}: {why}"
EXT_UNREADABLE = "cannot read: {why}"
EXT_TOO_BIG = "larger than {n} bytes"
EXT_TOO_MANY_FILES = "more than {n} extension files in one directory"
EXT_NO_DIRECTORY = "{path}: no such directory, or not readable by this user"
EXT_UNKNOWN_PLAYBOOK = "{name!r} is not a playbook or an alert kind (known: {names})"
EXT_BUILTIN = "a built-in one"
EXT_TAKEN = "{what} {name!r} is already defined by {where}"
EXT_UNKNOWN_PROBE = "no probe named {name!r} (define it under probes:, or name a registered one)"
EXT_UNKNOWN_KIND = "no action kind {kind!r} (define it under actions:, or name a registered one)"
EXT_RISK = "runs the operator's own commands (an extension): what they change is theirs to know"

# --- a value an extension's action refuses (nothing runs) -------------------------------
EXT_VALUE_TYPE = "not a string"
EXT_VALUE_LENGTH = "length must be 1..{n}"
EXT_VALUE_CONTROL = "holds a newline or another control character"
EXT_VALUE_OPTION = "must not start with '-' (it would be read as an option)"
EXT_VALUE_PATTERN = "does not match {pattern} in full"
EXT_VALUE_UNKNOWN = "unknown parameter {name!r} (takes {names})"
EXT_VALUE_MISSING = "missing parameter {name!r}"
EXT_REFUSED = "refused {kind}: {why}"

# --- an extension's action: its words, its verification ---------------------------------
EXT_TITLE = "ran"
EXT_SUBJECT = "{kind} ({says})"
EXT_DONE = "{says}: verified"
EXT_VERIFIED = "`{command}` printed {seen!r} (matches {pattern}) after {secs:.1f} s"
EXT_NOT_SEEN = "`{command}` printed {seen!r}, not matching {pattern}, for {secs:.1f} s"
EXT_REVERT_VERIFIED = ("`{command}` printed {seen!r}: no longer matches {pattern} after "
                       "{secs:.1f} s")
EXT_REVERT_NOT_SEEN = "`{command}` still printed {seen!r} (matches {pattern}) after {secs:.1f} s"
EXT_CANNOT_RUN = "`{command}` could not run ({why})"
EXT_REVERT_TITLE = "reverted"
EXT_REVERT_SAYS = "undo {says}"

# --- an extension's finding that could not be checked ----------------------------------
EXT_PROBE_FAILED = "could not check {probe} (extension {source}): {why}"

# --- incident-bot extensions check | test -----------------------------------------------
EXT_CHECK_OK = ("{where}: no problems ({files} files: {probes} probes, {findings} findings, "
                "{actions} actions)")
EXT_TEST_HEADER = "{host}: {n} extension probes run, {found} findings ({playbook})"
EXT_TEST_PROBE = "probe {name}: exit {status}{timed_out}, {secs:.2f} s: {stdout}"
EXT_TEST_FINDING = "{severity} {code}: {title}"
EXT_TEST_PROPOSES = "  proposes {kind} {params}"
EXT_TEST_NONE = "no finding: every extension probe answered and none matched"
