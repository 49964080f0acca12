// The run's events as benchkit sends them (results schema {{schema}}, contract {{contract}}).
// Each event is one JSON object with an `event` tag and `time_ms`; `parseEvent`
// reads one. Fields a later minor version adds are kept; skip event kinds you
// do not know. (componentize-js builds one file: these helpers sit in it.)

/** Every event kind of this schema version. */
const KINDS = ["run-start", "cell-start", "epoch", "cell", "cell-failed", "cell-summary", "run-end"];

/**
 * A figure over a cell's repeats.
 * @typedef {{n: number, median: number, mad: number, min: number, max: number, variation_pct: number}} Spread
 */

/**
 * @typedef {{event: "run-start", time_ms: number, schema: string, run_id: string, name: string,
 *   config: object, environment: object, repeats: number}} RunStart
 * @typedef {{event: "cell-start", time_ms: number, cell: string, repeat: number, repeats: number,
 *   config: object}} CellStart
 * @typedef {{event: "cell-failed", time_ms: number, cell: string, repeat: number, reason: string}} CellFailed
 * @typedef {{event: "cell-summary", time_ms: number, index: number, cell: string, status: string,
 *   repeats: number, images_per_s: ?Spread, step_p50_ms: ?Spread, step_p90_ms: ?Spread,
 *   step_p99_ms: ?Spread, data_wait_pct: ?Spread, compute_p50_ms: ?Spread,
 *   final_test_accuracy: ?Spread}} CellSummary
 * @typedef {{event: "run-end", time_ms: number, run_id: string, name: string, cells: number,
 *   failed: number, wall_s: number}} RunEnd
 * @typedef {RunStart | CellStart | CellFailed | CellSummary | RunEnd | {event: string, time_ms: number}} Event
 */

/**
 * One event from the JSON text the host sent.
 * @param {string} text
 * @returns {Event}
 */
function parseEvent(text) {
  const event = JSON.parse(text);
  if (event === null || typeof event !== "object" || typeof event.event !== "string") {
    throw `not a benchkit event: ${text.slice(0, 80)}`;
  }
  return event;
}

/**
 * A figure's median over repeats, null when it was not measured.
 * @param {?Spread} spread
 * @returns {?number}
 */
function median(spread) {
  return spread == null ? null : spread.median;
}
