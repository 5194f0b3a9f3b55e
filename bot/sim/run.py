"""Entry point of every tool shim (``bot.sim.shims``): ``main([WORKDIR, TOOL, *ARGS])``.

Imports only the stdlib modules a tool needs and the one tool module: it runs once per
command on the simulated host, so its start-up is what a probe pays. A read-only command
imports neither ``json`` nor ``typing`` (see ``tests/unit/test_sim_hotpath.py``).
"""

from __future__ import annotations

import os
import sys
import time

from bot.sim.log import append_log

ENV_DIR = "INCIDENT_BOT_SIM_DIR"

# shim name -> module under bot.sim.tools
TOOLS = {
    "nvidia-smi": "nvidia_smi", "systemctl": "systemctl", "ps": "ps", "kill": "kill",
    "df": "disk", "du": "disk", "lsof": "files", "fuser": "files", "journalctl": "journal",
    "uptime": "misc", "who": "misc", "crontab": "misc", "free": "misc", "dmesg": "misc",
    "hostname": "misc", "docker": "docker", "sudo": "sudo", "ibstat": "infiniband",
    "dcgmi": "dcgmi", "python3": "smoke", "nvidia-bug-report.sh": "bugreport",
}
SESSION = "__session__"
STUB = "__stub__"  # a scenario's own program (``commands:``): bot.sim.tools.stub answers it
SANDBOX_MARKER = "sandbox.root"  # the overlay root's path, written by bot.sim.sandbox


def python_entry(module: str) -> list[str]:
    """The command line that runs ``module.main(sys.argv[1:])`` from this checkout in a bare
    interpreter: ``-I`` (no environment variables, no current directory on ``sys.path``),
    ``-S`` (no site), ``-c`` (no ``runpy``, ~10 ms a command under ``-m``)."""
    import bot

    root = os.path.dirname(os.path.dirname(os.path.realpath(bot.__file__)))
    code = (f"import sys; sys.path.insert(0, {root!r}); from {module} import main; "
            "sys.exit(main(sys.argv[1:]))")
    return [sys.executable, "-I", "-S", "-X", "utf8", "-c", code]


def session(workdir: str) -> int:
    """ForceCommand: log what the client asked for, then run it under bash with the shims.

    ``SHLVL=1`` stops Debian's bash from treating itself as started by sshd, which would
    source ~/.bashrc (the real host's PATH) instead of ``BASH_ENV`` (our ``simrc``).
    """
    command = os.environ.get("SSH_ORIGINAL_COMMAND")
    append_log(workdir, {"ts": time.time(), "command": command})
    bindir = os.path.join(workdir, "bin")
    env = dict(os.environ)
    env.update(PATH=f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}",
               BASH_ENV=os.path.join(bindir, "simrc"), INCIDENT_BOT_SIM_DIR=workdir, SHLVL="1",
               TZ="UTC")  # the tools print UTC; so must the real `date`
    argv = ["bash", "-c", command] if command is not None else ["bash", "-l"]
    if not enter_sandbox(workdir):
        sys.stderr.write("sim: sandbox root missing; refusing to run on the real machine\n")
        return 126
    os.execve("/bin/bash", argv, env)
    return 127  # pragma: no cover - execve does not return


def enter_sandbox(workdir: str) -> bool:
    """``chroot`` into the host's overlay root (``bot.sim.sandbox``) when it has one.

    False when the host was started sandboxed but the root is not there (a session
    outside its namespace): then nothing may run.
    """
    try:
        with open(os.path.join(workdir, SANDBOX_MARKER), encoding="utf-8") as fh:
            root = fh.read().rstrip("\n")
    except OSError:
        return True  # started without a sandbox (not root): see bot.sim.sandbox.available
    if not root or not os.path.isdir(os.path.join(root, "dev")):
        return False
    os.chroot(root)
    os.chdir("/")
    return True


def run_tool(workdir: str, tool: str, argv: list[str]) -> int:
    from bot.sim.state import SimCall

    if tool == "kill":
        from bot.sim.tools import kill

        jobs = kill.own_jobs(argv)
        if jobs is not None:  # the session's own background job, as bash's kill "$!"
            append_log(workdir, {"ts": time.time(), "job_control": tool, "argv": argv})
            return kill.signal_jobs(*jobs)
    append_log(workdir, {"ts": time.time(), "tool": tool, "argv": argv})
    name = f"bot.sim.tools.{TOOLS[tool]}"
    __import__(name)
    module = sys.modules[name]
    ctx = SimCall(workdir)
    entry = getattr(module, f"main_{tool.replace('-', '_')}", None) or module.main
    code: int = entry(argv, ctx)
    return code


def run_stub(workdir: str, program: str, argv: list[str]) -> int:
    from bot.sim.state import SimCall
    from bot.sim.tools.stub import answer

    append_log(workdir, {"ts": time.time(), "tool": program, "argv": argv})
    return answer(program, argv, SimCall(workdir))


def main(args: list[str]) -> int:
    stub = len(args) >= 3 and args[1] == STUB
    if len(args) < 2 or (args[1] not in TOOLS and args[1] != SESSION and not stub):
        sys.stderr.write("usage: python -m bot.sim.run WORKDIR TOOL [ARGS...]\n")
        return 2
    workdir = args[0]
    os.environ.setdefault(ENV_DIR, workdir)
    if args[1] == SESSION:
        return session(workdir)
    try:
        code = run_stub(workdir, args[2], args[3:]) if stub else \
            run_tool(workdir, args[1], args[2:])
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (head, a closed channel): exit quietly like coreutils
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
