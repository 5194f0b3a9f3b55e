"""paramiko, imported without ``invoke``.

paramiko imports ``invoke`` (about 0.1 s, a third of paramiko's import) only to run
ssh_config ``Match exec`` lines. The bot never reads ssh_config, so the import is
skipped here; afterwards ``import invoke`` works as usual for anyone else.
"""

from __future__ import annotations

import sys

_blocked = "invoke" not in sys.modules and "paramiko" not in sys.modules
if _blocked:
    sys.modules["invoke"] = None  # type: ignore[assignment]  # makes `import invoke` fail
try:
    import paramiko
finally:
    if _blocked:
        del sys.modules["invoke"]

__all__ = ["paramiko"]
