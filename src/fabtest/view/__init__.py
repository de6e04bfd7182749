"""``fabtest view``: a browser over a results directory (experiments, trends, one experiment,
comparisons, conversations), served on 127.0.0.1 or built as a static site.

Layers: ``catalog`` reads the directory (compact index only), ``chart`` draws SVG, the page
modules render HTML, ``site`` maps paths to pages, ``server`` serves or writes them.
"""

from fabtest.view.server import build_site, serve

__all__ = ["build_site", "serve"]
