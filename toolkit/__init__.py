"""toolkit: test tool-using LLM agents by simulation, and decide with honest statistics
whether a change helped.

``import toolkit as tk``. This module only re-exports: each star import below pulls the
``__all__`` of one public module, and ``__all__`` here is every public name so gathered.
Keep the imports in dependency order (lower layers first).
"""

import types as _types

from toolkit._errors import ConfigError, KnobError, RowError, SchemaError, ToolkitError
from toolkit._version import __version__

# --- public modules: one star import each -------------------------------------------
from toolkit.rows import *  # noqa: F401,F403
from toolkit.tau_bench import *  # noqa: F401,F403
from toolkit.datasets import *  # noqa: F401,F403
from toolkit.stats import *  # noqa: F401,F403
from toolkit.covering import *  # noqa: F401,F403
from toolkit.tools import *  # noqa: F401,F403
from toolkit.sandbox import *  # noqa: F401,F403
from toolkit.situations import *  # noqa: F401,F403
from toolkit.writer import *  # noqa: F401,F403
from toolkit.agents import *  # noqa: F401,F403
from toolkit.user import *  # noqa: F401,F403
from toolkit.rollout import *  # noqa: F401,F403
from toolkit.knobs import *  # noqa: F401,F403
from toolkit.search import *  # noqa: F401,F403
from toolkit.conduct import *  # noqa: F401,F403
from toolkit.engine import *  # noqa: F401,F403
from toolkit.judge import *  # noqa: F401,F403
from toolkit.logprobs import *  # noqa: F401,F403
from toolkit.hackscan import *  # noqa: F401,F403
from toolkit.export import *  # noqa: F401,F403

from toolkit import plots  # noqa: F401  (figures: tk.plots.pass_at_k_curve, ...)
from toolkit.live import *  # noqa: F401,F403
from toolkit import whatif  # noqa: F401
# --------------------------------------------------------------------------------------

__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and not isinstance(value, _types.ModuleType)
) + ["__version__"]
