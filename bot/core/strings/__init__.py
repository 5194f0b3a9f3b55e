"""User-visible strings in one place (slack-bolt style), one module per area.

Callers use ``from bot.core import strings`` and ``strings.NAME``: the areas are merged
here, so a name is defined once across them (``tests/test_architecture.py`` checks it).
Add, don't inline.
"""

from bot.core.strings.diagnosis import *  # noqa: F403
from bot.core.strings.extensions import *  # noqa: F403
from bot.core.strings.fleet import *  # noqa: F403
from bot.core.strings.health import *  # noqa: F403
from bot.core.strings.messages import *  # noqa: F403
from bot.core.strings.operations import *  # noqa: F403
