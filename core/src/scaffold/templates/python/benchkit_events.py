"""The run's events as benchkit sends them (results schema {{schema}}, contract {{contract}}),
with types for editors and checkers. Each event is one JSON object with an
`event` tag and `time_ms`; `parse` reads one. Fields a later minor version
adds are kept in the dict; skip event kinds you do not know."""

import json
from typing import List, Optional, TypedDict

KINDS = ("run-start", "cell-start", "epoch", "cell", "cell-failed", "cell-summary", "run-end")


class Spread(TypedDict):
    """A figure over a cell's repeats."""
    n: int
    median: float
    mad: float
    min: float
    max: float
    variation_pct: float


class RunStart(TypedDict):
    event: str
    time_ms: int
    schema: str
    run_id: str
    name: str
    config: dict
    environment: dict
    repeats: int


class CellStart(TypedDict):
    event: str
    time_ms: int
    cell: str
    repeat: int
    repeats: int
    config: dict


class CellFailed(TypedDict):
    event: str
    time_ms: int
    cell: str
    repeat: int
    reason: str


class CellSummary(TypedDict):
    """A cell is over: its statistics over repeats (absent figures are None)."""
    event: str
    time_ms: int
    index: int
    cell: str
    status: str
    repeats: int
    images_per_s: Optional[Spread]
    step_p50_ms: Optional[Spread]
    step_p90_ms: Optional[Spread]
    step_p99_ms: Optional[Spread]
    data_wait_pct: Optional[Spread]
    compute_p50_ms: Optional[Spread]
    final_test_accuracy: Optional[Spread]


class RunEnd(TypedDict):
    event: str
    time_ms: int
    run_id: str
    name: str
    cells: int
    failed: int
    wall_s: float
    scaling: List[dict]


def parse(text: str) -> dict:
    """One event from the JSON text the host sent; `event["event"]` is its kind."""
    event = json.loads(text)
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        raise ValueError("not a benchkit event: " + text[:80])
    return event


def median(spread: Optional[Spread]) -> Optional[float]:
    """A figure's median over repeats, None when it was not measured."""
    return None if spread is None else spread["median"]
