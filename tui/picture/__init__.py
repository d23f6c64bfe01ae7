"""The picture kit: colour maps, array → picture, legends and axes, for every page.

``Picture`` draws (sixel / kitty pixels or half-block cells, whichever the terminal allows);
``colormaps`` holds the maps, the ``Scale`` values are placed on, and ``overlay`` for heat
laid over a picture. Nothing else in the viewer colours values.
"""

from tvis.tui.picture.colormaps import HEAT, SIGNED, VALUES, Colormap, Scale, overlay, to_rgb
from tvis.tui.picture.widget import Picture

__all__ = ["HEAT", "SIGNED", "VALUES", "Colormap", "Picture", "Scale", "overlay", "to_rgb"]
