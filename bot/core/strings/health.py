"""Fabric and platform findings, the graded health gate, repeat offenders, Xid storms (issue 36)."""

# --- fabric and platform in every diagnosis ------------------------------------------------
PLAT_PCIE_NARROW = "GPU {gpu}: PCIe link x{width} of x{width_max} (downtrained)"
PLAT_PCIE_SLOW = "GPU {gpu}: PCIe gen {gen} of {gen_max} while {util}% busy (downtrained)"
PLAT_PCIE_REASON_NARROW = "PCIe x{width} of x{width_max}"
PLAT_PCIE_REASON_SLOW = "PCIe gen {gen} of {gen_max} under load"
PLAT_NVLINK = "GPU {gpu}: NVLink errors on {links}"
PLAT_NVLINK_REASON = "NVLink errors ({links})"
PLAT_HOT = "GPU {gpu} at {temp} °C (at or above {limit} °C)"
PLAT_HOT_REASON = "{temp} °C"
PLAT_SLOWED = "GPU {gpu}: clocks slowed by {reasons}"
PLAT_SLOWDOWN_WORDS = {"hw_slowdown": "HW slowdown", "hw_thermal_slowdown": "HW thermal slowdown",
                       "hw_power_brake_slowdown": "HW power brake", "sw_thermal_slowdown": "SW thermal slowdown"}
PLAT_IB_DOWN = "{kind} {port} is {state} (physical {phys}): {why}"
PLAT_IB_WHY_NO_SM = "cabled, but no subnet manager made it Active"
PLAT_IB_WHY_DROPPED = "it was up and went down ({downed} time{s} since its counters were cleared)"
PLAT_IB_WHY_DOWN = "no link"
PLAT_IB_UNUSED = "{kind} {port} never came up ({state}, physical {phys}): not cabled, or unused"
PLAT_IB_FLAPS = "{kind} {port} went down {downed} times since its counters were cleared (link flapping)"
PLAT_IB_SYMBOL = "{kind} {port}: {errors} symbol errors (a marginal cable or transceiver)"
HEADLINE_AND_MORE = "{text} (and {n} more)"

# --- the graded health gate ---------------------------------------------------------------
GATE_LEVELS = "Reached level {reached} of the gate: {levels}."
GATE_LEVEL_WORDS = "{n} {level} {status}{took}"
GATE_STATUS_WORDS = {"passed": "passed", "failed": "failed", "absent": "not on this host",
                     "could_not_run": "could not run", "not_reached": "not reached"}
GATE_CHECK_XID_SINCE = "Xid {xids} on {gpus} since the repair at {at}"
GATE_CHECK_REMAP_FAILED = "row remapping failed on {gpu}"
GATE_CHECK_REMAP_PENDING = "row remap pending on {gpu} (applied at the next reset)"
GATE_CHECK_RETIRED = "{n} retired pages on {gpu} (the limit is {limit}, or a retirement is pending)"
GATE_CHECK_FABRIC = "nvidia-fabricmanager is {state} on an NVSwitch host"
GATE_CHECK_DCGM_FAILED = "{command}: {line}"
GATE_DCGM_ABSENT = "dcgmi is not installed on this host: level 2 did not run"
GATE_DCGM_COULD_NOT = "{command} could not run: {why}"
GATE_TIMED_OUT = "no answer within {secs} s"
GATE_SMOKE_ABSENT = "the CUDA smoke cannot run here: {why}"
GATE_SMOKE_COULD_NOT = "the CUDA smoke could not run: {why}"
GATE_SMOKE_CUT = "it stopped before its last line"
GATE_SMOKE_ERROR = "CUDA smoke on GPU {gpu}: {error}"
GATE_SMOKE_COUNT = "CUDA smoke saw {seen} of {expected} GPUs"
GATE_SMOKE_SLOWER = "CUDA smoke on GPU {gpu}: {what} {now} {unit}, {pct}% of its last good {then} {unit}"
GATE_UNREACHABLE = "{host} unreachable: {why}"

# --- Xid storms folded ---------------------------------------------------------------------
XID_TALLY = "Xid {xid}{times} since {since}{gpus}"
XID_TALLY_CLEARED = ", cleared by {by} at {at}"
XID_TALLY_APP_ONLY = " (the application's Xid: no drain, no page on its own)"

# --- a GPU reset that clears every client of the device files ------------------------------
GPU_PROPOSE_RESET = "Reset GPU {gpu}: stops {stops} around the reset and starts them again, then checks the GPU (health gate level 1)"
GPU_PROPOSE_RESET_ALL = "Reset every GPU on {host} ({why}): stops {stops} around the reset and starts them again, then checks the GPUs (health gate level 1)"
GPU_RESET_WHY_NVSWITCH = "NVSwitch before Hopper: one GPU cannot be reset alone"
GPU_RESET_WHY_EVERY = "all {n} need it"
GPU_RESET_NOTHING_TO_STOP = "nothing"
GPU_RESET_RISK = "no process may use this GPU (a reset is refused otherwise); the daemons named are down for a few seconds"
GPU_RESET_RISK_ALL = "resets every GPU and NVSwitch of the host: refused while any process uses one; the daemons named are down for a few seconds"
GPU_RESET_BLOCKED = "A GPU reset needs /dev/nvidia* free, but {who} holds it outside any unit or container: stop it first"
REM_GPU_ALL_IN_USE = "processes still use the GPUs ({pids}): resetting every GPU would kill them; end them first"
REM_GPU_NVSWITCH_ALONE = "{host} is an NVSwitch baseboard before Hopper: GPU {gpu} cannot be reset alone (every GPU and NVSwitch resets together, Fabric Manager stopped around it)"
REM_GPU_CLIENTS_NOT_RELEASED = "{who} also hold /dev/nvidia* and are not in this reset's plan: GPU {gpu}'s reset would be refused \"In use by another client\""
REM_PROPOSE_RESET_CLEARING = "Reset GPU {gpu}, stopping {stops} around it and starting them again"
REM_GPU_RESET_GATE = "health gate level {words}: {why}"
REM_GPU_RESET_ALL = "every GPU: at most {used} MiB used after the reset"

# --- back in service only with proof --------------------------------------------------------
REPAIR_KEPT_OUT_GATE = "{host} is not back in service: the repair verified, but the health gate stopped at level {reached}: {reasons}"
REPAIR_KEPT_OUT_RMA = "{host} is not back in service: it is on the RMA list ({key} came back after a passed health gate)"
MSG_EVERY_GPU = "every GPU"

# --- repeat offenders and the RMA hand-off ---------------------------------------------------
DIGEST_RMA = "Sent to RMA (a fault back after a passed health gate): {nodes}"
DIGEST_RMA_NODE = "{host}: {key} again {after} after the gate ({ago} ago)"
RMA_REPORT_KEPT = "nvidia-bug-report kept at {path} ({size} bytes)"
RMA_REPORT_MISSING = "no nvidia-bug-report at {path}"
RMA_FINDING = "{host} is a repeat offender: {title} — back {after} after a health gate passed ({before}); it does not go back to work: RMA"
RMA_PROPOSE = "Hand {host} to RMA: collect nvidia-bug-report.sh and keep it with this incident's timeline and the health gate's results (the node stays out of service)"
RMA_BUNDLE_SAID = "RMA evidence for {host} kept with this incident: nvidia-bug-report at {path} ({size} bytes), {events} timeline events, {gates} health gate runs"
XID_CLEARED_BY_RESET = "the reset of {gpu}"
XID_CLEARED_BY_REBOOT = "the reboot"
