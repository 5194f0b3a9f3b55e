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
