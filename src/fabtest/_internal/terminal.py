"""Text from agents and experiment names is shown on the terminal inert.

An agent's reply, an exception message or an experiment name can hold ANSI escape sequences
(``\\x1b[2J`` clears the screen, ``\\x1b]0;...`` retitles the window, ``\\x1b[8m`` hides what
follows) and other control characters. Before fabtest prints such text they are spelled out
(``\\x1b``), so the terminal shows what the agent said instead of obeying it. Results files keep
the text as it was. See docs/reliability.md.
"""

from __future__ import annotations

import re

__all__ = ["inert"]

# C0 controls but tab and newline, DEL and the C1 controls (U+0080-U+009F: 8-bit CSI and friends)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """``text`` with every control character but tab and newline written as its ``\\xNN`` escape."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text) if _CONTROL.search(text) else text
