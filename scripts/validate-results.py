#!/usr/bin/env python3
"""Validate benchkit results directories against the committed JSON Schemas.

Usage: validate-results.py [--schemas DIR] RESULTS_DIR...

Each directory's run.json, cells/*.json, every line of events.jsonl, and
summary.json, collective.json and advice.json where present, are checked with PyPI's
`jsonschema` (draft 2020-12). Every failure is printed as FILE[:LINE]: PATH:
MESSAGE; the exit status is 1 when any file fails, 2 when a directory holds
no results file at all.
"""

import argparse
import json
import pathlib
import sys

import jsonschema

HERE = pathlib.Path(__file__).resolve().parent


def validators(schemas):
    out = {}
    for name in ("run", "cell", "event", "summary", "collective", "advice"):
        schema = json.loads((schemas / f"{name}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        out[name] = jsonschema.Draft202012Validator(schema)
    return out


def check(validator, document, where):
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    for error in errors[:20]:
        path = "/".join(str(p) for p in error.absolute_path) or "(top)"
        print(f"{where}: {path}: {error.message[:300]}")
    return len(errors)


def validate_dir(directory, v):
    failures, files = 0, 0
    for name, file in (
        ("run", "run.json"),
        ("summary", "summary.json"),
        ("collective", "collective.json"),
        ("advice", "advice.json"),
    ):
        path = directory / file
        if path.is_file():
            files += 1
            failures += check(v[name], json.loads(path.read_text()), path)
    for path in sorted((directory / "cells").glob("*.json")):
        files += 1
        failures += check(v["cell"], json.loads(path.read_text()), path)
    events = directory / "events.jsonl"
    if events.is_file():
        files += 1
        for number, line in enumerate(events.read_text().splitlines(), 1):
            if line.strip():
                failures += check(v["event"], json.loads(line), f"{events}:{number}")
    return failures, files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemas", type=pathlib.Path, default=HERE.parent / "schema" / "json")
    parser.add_argument("dirs", nargs="+", type=pathlib.Path)
    args = parser.parse_args()
    v = validators(args.schemas)
    status = 0
    for directory in args.dirs:
        failures, files = validate_dir(directory, v)
        if files == 0:
            print(f"{directory}: no results file (run.json, cells/, events.jsonl, summary.json, collective.json)")
            status = max(status, 2)
        elif failures:
            print(f"{directory}: {failures} failure(s) in {files} file(s)")
            status = max(status, 1)
        else:
            print(f"{directory}: {files} file(s) valid")
    return status


if __name__ == "__main__":
    sys.exit(main())
