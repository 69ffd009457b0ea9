"""Figures for papers. Every function returns a matplotlib ``Figure``; none calls ``plt.show()``.

One star import per figure module below; ``__all__`` is their union plus the style helpers.
"""

import types as _types

from toolkit.plots._style import PALETTE, enable_notebook_display, export_figure, new_figure

# --- figure modules ---------------------------------------------------------------------
from toolkit.plots.statistics import *  # noqa: F401,F403
from toolkit.plots.judging import *  # noqa: F401,F403
from toolkit.plots.whatif import *  # noqa: F401,F403
from toolkit.plots.coverage import *  # noqa: F401,F403
from toolkit.plots.faults import *  # noqa: F401,F403
from toolkit.plots.live import *  # noqa: F401,F403

# ----------------------------------------------------------------------------------------

__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and not isinstance(value, _types.ModuleType)
)

enable_notebook_display()
