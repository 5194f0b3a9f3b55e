"""Diagnosis strings: SSH, playbooks, simulated hosts, GPU health and the health gate."""

from __future__ import annotations

# --- diagnostics: SSH, playbooks, `incident-bot diagnose` (issue 3) ---------------------
DIAG_UNREACHABLE = "{host} is unreachable: {reason}"
DIAG_HOST_KEY = "host key mismatch for {host}"
DIAG_AUTH = "SSH authentication failed for {host}"
DIAG_NO_KEY_HINT = ("; pass --ssh-key FILE and --known-hosts FILE (`incident-bot "
                    "sim up` prints them), or name an inventory host with -c FILE")
DIAG_IDLE_HELD = "{n} GPU{s} hold {mem} at {util} for {window}: {who} {started} by {restarter}"
DIAG_IDLE_HELD_UNKNOWN = "{n} GPU{s} hold {mem} at {util} for {window}, and no process could be named"
DIAG_BUSY_HOLDER = "{who} holds {n} GPU{s} and is working ({util}): nothing proposed"
DIAG_NO_GPU_DATA = "nvidia-smi gave no readable GPU rows"
DIAG_GPUS_FREE = "{n} GPU{s}: no memory held beyond {held}"
DIAG_OTHER_GPU_UNITS = "{n} other GPU unit{s} disabled and inactive: nothing proposed ({names})"
DIAG_REFUSED = "refused as a parameter: {kind} {value} ({reason})"
DIAG_DOCKER_RESTARTS = ("container {name} restarts by policy '{policy}': terminating PID {pid} "
                        "would restart it; no catalog action proposed")
DIAG_CRON_AT_BOOT = "{line} (user {user}) will start it again at the next boot"
DIAG_STOP_DISABLE_REASON = "stop {unit} now and keep it from starting at boot (frees {mem})"
DIAG_STOP_DISABLE_RISK = "whatever uses this server loses it until someone starts it again"
DIAG_MASK_REASON = "stronger alternative: also blocks manual and dependency starts of {unit}"
DIAG_MASK_RISK = "nothing can start {unit} until it is unmasked"
DIAG_TERMINATE_REASON = "PID {pid} ({label}) holds {mem} idle and nothing restarts it"
DIAG_TERMINATE_RISK = "SIGTERM, then SIGKILL after a grace period: unsaved state in it is lost"
DIAG_BOOT_RECENT = "booted {ago} ago; previous boot {prev}"
DIAG_PREV_UNCLEAN = "ended without a clean shutdown (crash, power loss or a killed VM)"
DIAG_PREV_CLEAN = "ended with a clean shutdown"
DIAG_PREV_UNKNOWN = "is not in the journal"
DIAG_FAILED_UNITS = "{n} failed unit{s}: {names}"
DIAG_AUTOSTART_UNIT = "{unit} is enabled and started at boot ({kind}, Restart={restart})"
DIAG_AUTOSTART_CRON = "crontab of {user} starts a GPU server at boot: {line}"
DIAG_AUTOSTART_DOCKER = "container {name} ({image}) restarts by policy '{policy}'"
DIAG_MOUNT_MISSING = "expected mount {mount} is missing"
DIAG_JOBS_INTERRUPTED = "interrupted extraction job{s} on this host ({n}): {jobs}"
DIAG_DISK_FULL = "{mount} is {pct:.0f}% full: {avail} free of {size}"
DIAG_INODES_FULL = "{mount} has used {pct:.0f}% of its inodes ({used} of {size})"
DIAG_LARGEST_DIRS = "largest directories on {mount}: {top}"
DIAG_DU_TIMED_OUT = "du on {mount} hit its {secs:g} s deadline; sizes are partial"
DIAG_DELETED_OPEN = "{n} deleted file{s} still open hold {size}: {top}"
DIAG_SHM = "/dev/shm holds {size}: {top}"
DIAG_JOURNAL = "the systemd journal takes {size}"
DIAG_JOURNAL_REASON = "vacuum the journal down to {size} (frees about {frees})"
DIAG_JOURNAL_RISK = "older log lines are deleted for good"
DIAG_DISK_OK = "no real filesystem is above {pct:.0f}%"
DIAG_UPTIME = "up {uptime}; load {load}"
DIAG_MEMORY = "memory: {used} used of {total} ({avail} available)"
DIAG_DMESG = "last kernel messages"
DIAG_AUTO = "auto picked {playbook}: {why}"
DIAG_INTERNAL = "the {playbook} playbook failed (error id {error_id})"
DIAG_UNKNOWN_PLAYBOOK = "unknown playbook {name!r}; choose one of: {names}"
DIAG_BAD_TARGET = "{target!r} is neither a host in the config nor user@host:port"
REM_RESUME_NOOP = "extraction job {job} is already {state}: nothing to do"
REM_OFFER = "{label}: incident-bot act {host} {kind} {params}"
REM_OFFER_REVERT = "Revert"
REM_OFFER_RESUME = "Resume the interrupted extraction"
REM_REFUSED = "refused to {kind} on {host}: {why}; nothing was changed"
REM_TERM_RESPAWNS = "PID {pid} runs under {unit} (Restart={restart}): systemd would start it again {secs:g} s after it dies; stop and disable the unit instead (or pass override=yes)"
REM_MASK_ETC = "{unit}'s own file is {path}: `systemctl mask` cannot replace it; disable it plus the incident-bot drop-in, or force the mask (the file is lost)"
REM_SUDO_DENIED = "the sudo rules on {host} do not allow `{command}` (sudo -n -l: {why})"
REM_GPU_IN_USE = "GPU {gpu} still has processes on it ({pids}): a reset would kill them; end them first"
REM_GPU_UNKNOWN = "GPU {gpu} is not on {host}"
REM_TERM_CONTAINER = "PID {pid} runs in container {cid} (restart policy {policy}): docker would start it again at once; stop the container with its policy off (docker update --restart=no, docker stop), or pass override=yes"
REM_TERM_CRON = "PID {pid} was started by {unit} from a crontab line that will start it again; remove the line first (crontab -l shows it), or pass override=yes"
REM_OWNER_UNREADABLE = "PID {pid} runs under a unit whose name the bot will not send to a shell, so its restart policy is unknown; pass override=yes to act anyway"
REM_CLEAN_OUTSIDE = "{path} is outside {host}'s allowed prefixes ({prefixes})"
REM_CLEAN_PROTECTED = "{path} is in {dir}, the output of a paused or queued job"
REM_CLEAN_OPEN = "{path} is open in a process (lsof): deleting it frees nothing and may break it"
REM_CLEAN_NOT_FILE = "{path} is not a regular file on {host} (missing, a link or a directory)"
REM_CLEAN_FREED = "{files} gone; {freed} freed on {mounts} (needed {need})"
REM_CLEAN_LEFT = "{left} still there"
REM_OVERRIDE = "override: acting on PID {pid} although {unit} restarts it (Restart={restart})"
REM_ROLLED_BACK = "{failed}; rolled back what it had done: {undo}"
REM_ROLLBACK_FAILED = "{failed}; rolling back failed too: {undo}"
REM_WINDOW = "checked {secs:.1f} s after acting, past the {unit} restart window ({window:g} s)"
REM_DROPIN_NOW = "{unit}: Restart={restart}, TimeoutStopUSec={timeout}, drop-ins: {paths}"
REM_GPU_RESET = "GPU {gpu}: {used} MiB used after the reset"
REM_REBOOT_SENT = "reboot of {host} requested: the bot re-diagnoses when it is back"
REM_PROPOSE_STOP = "systemd restarts PID {pid}: stop and disable {unit} instead"
REM_PROPOSE_DROPIN = "keep {unit} from taking the GPUs after a crash: the incident-bot drop-in"
REM_PROPOSE_MASK_FORCE = "mask {unit} anyway: its file in /etc is replaced by a link to /dev/null"
REM_LADDER_KILL = "PID {pid} ignored SIGTERM: send SIGKILL"
REM_LADDER_RESET = "GPU {gpu} holds {used} MiB with no process: reset it"
REM_LADDER_REBOOT = "GPU {gpu} is still wedged after the reset: reboot {host}"

# --- simulated hosts (incident-bot sim) ------------------------------------------------
SIM_UP = ("simulated host {name} ({scenario}) is up\n"
          "  target:      {target}\n"
          "  key:         {key}\n"
          "  known_hosts: {known_hosts}\n"
          "  known_hosts line: {known_line}\n"
          "  directory:   {workdir}\n"
          "  diagnose:    {diagnose}\n"
          "  try:         {ssh}\n"
          "  stop with:   incident-bot sim down --dir {workdir}")
SIM_DOWN = "stopped simulated host {name} on port {port} (pid {pid})"
SIM_NOT_RUNNING = "simulated host {name} on port {port} was not running"
SIM_DIR_IN_USE = "{workdir} already holds a running simulated host ({name} on port {port}); stop it first"
SIM_NEED_TARGET = "no simulated host is up under {root}: nothing to stop (or say which: --dir DIR or --port PORT)"
SIM_WHICH = "{n} simulated hosts are up; say which to stop:\n{hosts}"
SIM_NONE = "no simulated hosts under {root}"
DIAG_WATCHDOG = "{dog} (PID {pid}) names {unit} on its command line and may start it again"
DIAG_WATCHDOG_REASON = "stop {dog} first: it may start {unit} again right after a stop"
REM_ABORTED = "aborted: nothing was run"


# --- GPU health (gpu_health playbook, health gate) ---------------------------------------
GPU_VERDICTS = "{n} GPU{s}: {summary}"
# no GPU read (issue 35): the count is the inventory's, or unknown, never invented
GPU_VERDICTS_UNREAD = "{count}: could not read the GPUs ({why})"
GPU_COUNT_EXPECTED = "{n} GPU{s} expected"
GPU_COUNT_UNKNOWN = "GPU count unknown"
GPU_TOOL_ERROR = "nvidia-smi: {quote}"
GPU_TOOL_DENIED = "nvidia-smi was refused: {quote} (the login's permissions, not a GPU fault)"
GPU_TOOL_MISSING = "nvidia-smi is not there: {quote}"
DIAG_PROBE_REFUSED = "could not read {what}: {quote}"
GPU_DRIVER_UNBOUND = "the NVIDIA driver bound no GPU: {quote}"
PROBE_WHAT_COMMAND = "`{command}`"
PROBE_WHAT = {  # probe name -> what it reads, as the message names it
    "kernel_log": "the kernel log (Xid errors)", "dmesg": "the kernel log",
    "journal": "the journal's size", "deleted_open": "deleted files still open",
    "gpu_device_users": "who holds /dev/nvidia*", "processes": "the process table",
    "process_states": "the process table", "cgroups": "the processes' units",
    "containers": "the containers", "crontab_root": "root's crontab", "du": "directory sizes",
    "shm": "/dev/shm", "df": "the filesystems", "df_inodes": "the inodes", "boots": "the boots",
    "previous_boot_tail": "the previous boot's last lines", "unit_files": "the unit files",
    "units": "the units", "unit_details": "the units' settings", "clock": "the clock",
    "memory": "the memory", "uptime": "the uptime", "failed_units": "the failed units",
    "fabric_manager": "nvidia-fabricmanager's state", "mount_options": "the mount options",
}
GPU_NVML_MISMATCH = "NVML: driver/library version mismatch — driver {driver} loaded, library {library}"
GPU_BROKEN = "GPU {gpu} is broken: {why}"
GPU_WEDGED = "GPU {gpu} is wedged: {why}"
GPU_DEGRADED = "GPU {gpu} is degraded: {why}"
GPU_MISSING = "{missing} of {expected} GPUs missing: the inventory expects {expected}, the host shows {seen}"
GPU_HELD_IDLE = "{n} GPU{s} hold memory at low utilization; the vram_idle playbook traces who holds them"
GPU_APP_FAULT = "Xid {xid} on GPU {bus} ({who}): {title} — the application's fault, not the GPU's"
GPU_XID_UNKNOWN = "Xid {xid} on GPU {bus} is not in the Xid policy table: look it up and add it (extra.xid_policy)"
GPU_FABRIC_DOWN = "nvidia-fabricmanager is {state} on an NVSwitch host: NVLink traffic cannot flow"
GPU_STEP = "Proposed step: {step}"
# issue 35: a step the bot can take is a button (proposed through its action); the rest
# are a person's steps and say so (playbooks/gpu_view.py)
GPU_STEP_BUTTON = "{step} (its Approve below)"
GPU_STEP_RESET = "reset {gpus} (nvidia-smi -r)"
GPU_STEP_EVERY_GPU = "every GPU"
GPU_STEP_REBOOT = "reboot the host"
GPU_STEP_REBOOT_REASON = "The GPUs' verdict calls for a reboot of {host} before they can be used again"
GPU_STEP_PERSON = "For a person (no button for it here): {step}"
GPU_STEP_RESET_HELD = ("reset {gpus} (nvidia-smi -r) once no process uses it (now {pids}); "
                       "Retry then, and the reset is offered")
GPU_STEP_RESET_BLOCKED = "reset {gpus} (nvidia-smi -r) once what holds its device files is stopped (above); Retry then, and the reset is offered"
GPU_STEP_REBOOT_LATER = ("reboot the host if the GPUs are still wedged once the problem "
                         "above is dealt with (a reboot stops every process); Retry then, and "
                         "the reboot is offered")
GPU_STEP_TEXT = {
    "restart_app": "restart the application that hit the error",
    "reset_gpu": "reset the GPU (nvidia-smi -r) once nothing uses it, then re-check",
    "reboot": "reboot the host",
    "drain_and_ticket": "take the host out of service and open a hardware ticket",
    "investigate": "look closer: cooling, power and the kernel log",
}
GATE_PASSED = "Health gate passed on {host}: {summary}"
GATE_FAILED = "Health gate failed on {host}: {reasons}. The resume is blocked; an approved override can let it run."
GATE_CHECK_COUNT = "GPU count {seen} of {expected}"
GATE_CHECK_XID = "critical Xid since boot on {gpus}"
GATE_CHECK_ECC = "uncorrectable ECC on {gpus}"
GATE_CHECK_PERSISTENCE = "persistence mode off on {gpus}"
GATE_CHECK_MEMORY = "GPU {gpu} has {free} free, the job needs {need}"
GATE_CHECK_DCGM = "dcgmi diag -r 1 failed: {line}"
GATE_CHECK_TOOL = "{quote}"
GATE_CHECK_VERDICT = "GPU {gpu} is {verdict}"
# the flow's health gate in front of every resume (issue 16 item 6, wired into the act step)
FLOW_GATE_OVERRIDE_REASON = "Resume job {job} although the health gate failed: {reasons}"
FLOW_GATE_OVERRIDE_RISK = "the extraction runs on GPUs the gate found unhealthy; it may crash again or write wrong results"
FLOW_GATE_OVERRIDDEN = "Health gate overridden by {who} for job {job}: resuming anyway."
FLOW_RESUME_INTERRUPTED_REASON = "Job {job} was interrupted on {host}: resume it where it stopped (behind the GPU health gate)."


# --- one diagnosis pipeline, on-call headlines, true durations (issue 29) --------------
GPU_SMI_HUNG = "nvidia-smi timed out after {secs:g} s"
GPU_DRIVER_MISMATCH = "driver/library mismatch: driver {driver} loaded, library {library}"
GPU_DRIVER_MISMATCH_LIBRARY = "driver/library mismatch: library {library}, the loaded driver's version not in the kernel log"
GPU_DRIVER_MISMATCH_BARE = "driver/library mismatch (versions not reported)"
GPU_VERDICT_WORDS = {"busy": "busy", "held_idle": "idle with memory held", "free": "free",
                     "wedged": "wedged", "broken": "broken", "degraded": "degraded",
                     "unknown": "not read"}
DIAG_HELD_FOR = "for {duration}"
DIAG_HELD_SINCE_BOOT = "since boot ({duration})"
DIAG_HELD_FOR_UNKNOWN = "for an unknown time"
DIAG_IDLE_HELD_FOR = "{n} GPU{s} {verb} {mem} at {util} {held}: {who} {started} by {restarter}"
DIAG_IDLE_HELD_UNNAMED = "{n} GPU{s} {verb} {mem} at {util}, and no process could be named"
DIAG_IDLE_HELD_HIDDEN = ("{n} GPU{s} {verb} {mem} at {util} {held}: held by {what}, which runs "
                         "{runs}; its process is in a PID namespace this login cannot see")
HEADLINE_SMI_HUNG = "could not read the GPUs: nvidia-smi timed out after {secs}"
HEADLINE_NO_DRIVER = "the NVIDIA driver does not answer: {quote}"
HEADLINE_GPU_LOST = "GPU {gpu} fell off the bus (Xid {xid})"
HEADLINE_GPU_UNOPENED = "GPU {gpu} cannot be opened: {quote}"
HEADLINE_GPU_MISSING = "GPU {gpu} is missing: {seen} of {expected} visible"
HEADLINE_GPUS_MISSING = "{n} GPU{s} missing: {seen} of {expected} visible"
HEADLINE_GPU_ECC = "GPU {gpu}: uncorrectable ECC error"
HEADLINE_GPU_XID = "GPU {gpu}: Xid {xid}, {title}"
HEADLINE_GPU_BROKEN = "GPU {gpu} is broken: {why}"
HEADLINE_WEDGED_NO_PROCESS = "{n} GPU{s} wedged: {mem} held with no process, unit or container using {them}"
HEADLINE_WEDGED = "{n} GPU{s} wedged: {why}"
HEADLINE_HELD = "{who}{started} holds {gpus} at {util}"
HEADLINE_HELD_UNKNOWN = "{gpus} held at {util} by a process that could not be named"
HOLDER_PROCESS = "PID {pid} `{command}`"
HOLDER_SERVER = "PID {pid} ({who})"
HOLDER_USER = " (user {user})"
HOLDER_CONTAINER = "container {name}"
HOLDER_SLURM_JOB = "Slurm job {job} (user {user})"
HOLDER_HIDDEN = "{name} (process not visible to this login)"
HEADLINE_NOTHING = "nothing wrong found"
HEADLINE_STARTED_AT_BOOT = ", auto-started at boot,"
HEADLINE_STARTED_WITH_BOOT = ", started at boot,"
DIAG_DELETED_HELD = "{n} deleted file{s} still open {verb} {size}: {top}"
GPU_HELD_IDLE_AGREE = "{n} GPU{s} {verb} memory at low utilization; the vram_idle playbook traces who holds them"
