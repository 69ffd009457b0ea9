"""toolkit: test tool-using LLM agents by simulation, and decide with honest statistics
whether a change helped.

``import toolkit as tk``. This module only re-exports: each star import below pulls the
``__all__`` of one public module, and ``__all__`` here is every public name so gathered.
Keep the imports in dependency order (lower layers first).
"""

import types as _types

from toolkit.errors import ConfigError, KnobError, RowError, SchemaError, ToolkitError
from toolkit._version import __version__

# --- public subpackages, lower layers first ----------------------------------------------
from toolkit._util.datasets import *  # noqa: F401,F403
from toolkit.rows import *  # noqa: F401,F403
from toolkit.stats import *  # noqa: F401,F403
from toolkit.world import *  # noqa: F401,F403
from toolkit.agents import *  # noqa: F401,F403
from toolkit.situations import *  # noqa: F401,F403
from toolkit.logprobs import *  # noqa: F401,F403
from toolkit.grading import *  # noqa: F401,F403
from toolkit.sim import *  # noqa: F401,F403
from toolkit.training import *  # noqa: F401,F403

from toolkit import plots  # noqa: F401  (figures: tk.plots.pass_at_k_curve, ...)
from toolkit.live import *  # noqa: F401,F403
from toolkit import whatif  # noqa: F401
# --------------------------------------------------------------------------------------

__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and not isinstance(value, _types.ModuleType)
) + ["__version__"]
