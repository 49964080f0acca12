#!/usr/bin/env python3
"""The slowest units of a build, from the report `cargo build --timings`
writes (target/cargo-timings/cargo-timing.html): one line each, slowest
first, with the build's wall time and how many units it compiled.

    scripts/cargo-timings.py [REPORT] [N]
"""
import json
import re
import sys


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "target/cargo-timings/cargo-timing.html"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    try:
        with open(path, encoding="utf-8") as f:
            html = f.read()
    except OSError as e:
        print(f"no timings: {e}", file=sys.stderr)
        return 0
    found = re.search(r"const UNIT_DATA = (\[.*?\]);\s*\n", html, re.S)
    if not found:
        print(f"no timings: {path} holds no UNIT_DATA", file=sys.stderr)
        return 0
    units = json.loads(found.group(1))
    end = max((u["start"] + u["duration"] for u in units), default=0.0)
    print(f"{len(units)} units compiled in {end:.0f} s; the slowest:")
    for u in sorted(units, key=lambda u: -u["duration"])[:count]:
        target = u.get("target", "").strip()
        print(f"  {u['duration']:7.1f} s  {u['name']} {u['version']} {target}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
