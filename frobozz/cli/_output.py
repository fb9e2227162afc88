"""The console every command writes its errors and notices to: stderr, whole lines.

An error names paths, run ids and commands a user copies; wrapped at the terminal's width, a path
was cut in two mid-name (and a test reading it failed on a longer path). Whole lines, whatever the
width; no highlighting, as a value in an error is data.
"""

from __future__ import annotations

from rich.console import Console

err = Console(stderr=True, soft_wrap=True, highlight=False)
