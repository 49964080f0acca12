#!/usr/bin/env python3
"""Run the first ```python block of a Markdown page with the given arguments.

Usage: doc-example.py PAGE.md ARG...

What the docs show is what CI runs: the block is written to a temporary
file and run with this Python; its exit status is this script's.
"""

import pathlib
import re
import subprocess
import sys
import tempfile


def main():
    page = pathlib.Path(sys.argv[1])
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)
    if not blocks:
        print(f"{page}: no ```python block")
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        script = pathlib.Path(scratch) / "example.py"
        script.write_text(blocks[0])
        return subprocess.call([sys.executable, str(script), *sys.argv[2:]])


if __name__ == "__main__":
    sys.exit(main())
