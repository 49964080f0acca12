"""The `sink` interface's `reporter` resource: one per run."""

import json
import math
from typing import List, Optional

from wit_world.exports import sink
from componentize_py_types import Err

import benchkit_events as events


def tenths(x: float) -> str:
    """`x` to one decimal, halves rounded up, computed as every scaffold
    language computes it, so their files agree to the byte."""
    n = math.floor(x * 10.0 + 0.5)
    sign = "-" if n < 0 else ""
    a = abs(n)
    return f"{sign}{a // 10}.{a % 10}"


def median(spread: Optional[events.Spread]) -> str:
    value = events.median(spread)
    return "-" if value is None else tenths(value)


class Reporter(sink.Reporter):
    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: List[str] = []

    @classmethod
    def create(cls, config: str) -> "Reporter":
        settings = json.loads(config) if config.strip() else {}
        unknown = sorted(set(settings) - {"title"})
        if unknown:
            raise Err(f"unknown config key `{unknown[0]}`; accepted keys: title")
        title = settings.get("title", "")
        if not isinstance(title, str):
            raise Err(f"config key `title`: expected a string, got {json.dumps(title)}")
        return cls(title)

    def on_event(self, event: str) -> None:
        e = events.parse(event)
        kind = e["event"]
        if kind == "run-start" and not self.title:
            self.title = e["name"]
        elif kind == "cell-summary":
            self.rows.append(
                f"| {e['cell']} | {e['status']} | {median(e.get('images_per_s'))} | "
                f"{median(e.get('step_p50_ms'))} | {median(e.get('data_wait_pct'))} |"
            )

    def finish(self) -> List[sink.Artifact]:
        text = f"# {self.title}\n\n"
        text += "| cell | status | images/s | step p50 (ms) | data wait (%) |\n"
        text += "|---|---|---|---|---|\n"
        text += "".join(row + "\n" for row in self.rows)
        return [sink.Artifact(name="{{name}}.md", contents=text.encode())]
