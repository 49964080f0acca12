#!/usr/bin/env python3
"""Check benchkit's mllog logs with MLPerf's own compliance checker.

Usage: mlperf-check.py --common LOG...   ruleset 5.1.0's common rules alone
       mlperf-check.py --resnet LOG...   ruleset 4.0.0, open division, ResNet

`--common` gives the checker (PyPI `mlperf-logging`) ruleset 5.1.0's
common.yaml with one change: its `submission_division` rule no longer
enqueues `open_common.yaml`, whose rules admit only MLPerf's named
benchmarks. 5.1.0 is the newest ruleset whose common rules are not written
for language models. `--resnet` runs ruleset 4.0.0 as published, the last
with ResNet-50's rules: the open division's common rules, then
`open_resnet.yaml`. Prints the checker's verdict for each log; exit status 1
when any fails.
"""

import os
import re
import subprocess
import sys
import tempfile

import mlperf_logging

CHECKER = os.path.join(os.path.dirname(mlperf_logging.__file__), "compliance_checker")
ENQUEUE = re.compile(r"enqueue_config\('training_5\.1\.0/\{\}_common\.yaml'\.format\(v\['value'\]\)\);\s*")


def common_only():
    text = open(os.path.join(CHECKER, "training_5.1.0", "common.yaml")).read()
    changed, count = ENQUEUE.subn("", text)
    if count != 1:
        sys.exit("training_5.1.0/common.yaml no longer enqueues the division's rules as expected")
    out = tempfile.NamedTemporaryFile("w", suffix="-common.yaml", delete=False)
    out.write(changed)
    out.close()
    return ["--ruleset", "5.1.0", "--config", out.name]


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("--common", "--resnet"):
        sys.exit(__doc__.splitlines()[2])
    args = common_only() if sys.argv[1] == "--common" else ["--ruleset", "4.0.0"]
    try:
        rules = "common rules alone" if sys.argv[1] == "--common" else "open ResNet rules"
        return check(args, rules, sys.argv[2:])
    finally:
        if "--config" in args:
            os.remove(args[args.index("--config") + 1])


def check(args, rules, logs):
    status = 0
    for log in logs:
        run = subprocess.run(
            [sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", "training", *args,
             "--log_output", os.devnull, log],
            capture_output=True, text=True,
        )
        output = run.stdout + run.stderr
        passed = run.returncode == 0 and "SUCCESS" in output
        print(f"{log}: {'SUCCESS' if passed else 'FAILED'} ({' '.join(args[:2])}, {rules})")
        if not passed:
            print(output.strip())
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
