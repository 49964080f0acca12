#!/usr/bin/env python3
"""The slowest units of a build, from the report `cargo build --timings`
writes (target/cargo-timings/cargo-timing.html): one line each, slowest
first, with the build's wall time and how many units it compiled. With
`--refuse NAME,...` it fails when the build compiled a package so named:
a second build that should reuse the first's (CI's `tch` build reusing
wasmtime) says so when a feature flip makes it compile one again.

    scripts/cargo-timings.py [REPORT] [N] [--refuse NAME,...]
"""
import json
import re
import sys


def main() -> int:
    args = sys.argv[1:]
    refused = set()
    if "--refuse" in args:
        at = args.index("--refuse")
        if at + 1 >= len(args):
            print("--refuse needs package names, comma-separated", file=sys.stderr)
            return 2
        refused = {name for name in args[at + 1].split(",") if name}
        del args[at : at + 2]
    path = args[0] if args else "target/cargo-timings/cargo-timing.html"
    count = int(args[1]) if len(args) > 1 else 12
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
    # The report lists the units found fresh too, with no time: only those
    # with a duration were compiled.
    units = [u for u in json.loads(found.group(1)) if u.get("duration", 0) > 0]
    end = max((u["start"] + u["duration"] for u in units), default=0.0)
    print(f"{len(units)} units compiled in {end:.0f} s; the slowest:")
    for u in sorted(units, key=lambda u: -u["duration"])[:count]:
        target = u.get("target", "").strip()
        print(f"  {u['duration']:7.1f} s  {u['name']} {u['version']} {target}".rstrip())
    again = sorted({u["name"] for u in units if u["name"] in refused})
    if again:
        print(
            f"this build compiled {', '.join(again)} again: a feature it turns on in a crate the "
            "first build shares is off there (compare `cargo tree -e features` of both)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
