"""Figures for papers. Every function returns a matplotlib ``Figure``; none calls ``plt.show()``.

One star import per figure module below; ``__all__`` is their union plus the style helpers.
"""

import types as _types

from toolkit.plots._style import PALETTE, export_figure, new_figure

# --- figure modules ---------------------------------------------------------------------

# ----------------------------------------------------------------------------------------

__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and not isinstance(value, _types.ModuleType)
)
