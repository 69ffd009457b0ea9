"""Statistics over rows: intervals, pass@k, paired tests, judge agreement, summaries.

Every public name is re-exported at the top level (``tk.bootstrap_ci``). One star import
per module below, lower layers first (resampling is used by everything after it); adding
a module needs only its line here, ``__all__`` is gathered from what the imports bring.
"""

import types as _types

from toolkit.stats.resampling import *  # noqa: F401,F403
from toolkit.stats.passk import *  # noqa: F401,F403
from toolkit.stats.agreement import *  # noqa: F401,F403
from toolkit.stats.summaries import *  # noqa: F401,F403
from toolkit.stats.power import *  # noqa: F401,F403
from toolkit.stats.compare import *  # noqa: F401,F403
from toolkit.stats.studies import *  # noqa: F401,F403

__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and not isinstance(value, _types.ModuleType)
)
