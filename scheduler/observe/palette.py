"""Job colours, one per job id, shared by the dashboard (:mod:`scheduler.observe.dashboard_view`
puts the list into the page) and ``reshape history --plot`` / the demo's plot
(:func:`scheduler.observe.report.plot_history`), so that a job has the same colour in both.

Hues step by the golden angle (137.5°), so consecutive jobs are far apart on the colour wheel
and no hue comes back exactly; lightness and saturation cycle with different periods, so two
jobs whose hues happen to be close differ in lightness. :data:`COLORS` jobs get distinct colours
(job ``COLORS + 1`` takes job 1's again).
"""

from __future__ import annotations

import colorsys

__all__ = ["COLORS", "job_color", "palette"]

COLORS = 64
GOLDEN = 137.508
LIGHT = (0.4, 0.6, 0.5, 0.32, 0.68)
SAT = (0.6, 0.45, 0.75)


def palette(n: int = COLORS) -> list[str]:
    """``n`` colours as ``#rrggbb``: the colour of job ``k`` is entry ``(k - 1) % n``."""
    out = []
    for i in range(n):
        r, g, b = colorsys.hls_to_rgb((i * GOLDEN % 360) / 360, LIGHT[i % len(LIGHT)], SAT[i % len(SAT)])
        out.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return out


_PALETTE = palette()


def job_color(job_id: int) -> str:
    return _PALETTE[(int(job_id) - 1) % COLORS]
