//! Results schema 1.x: the names it gave fields that 2.0.0 renamed, and the
//! translation both ways. 1.x results are read by translating each
//! document to 2.0 names before it is typed ([`upgrade`]); a reporter built
//! for plugin contract 1.0 to 1.4 is handed each event in 1.x names
//! ([`downgrade_event`]), as its contract promised.
//!
//! 2.0.0 renamed, and changed nothing else:
//!
//! | where | 1.x | 2.0 |
//! |---|---|---|
//! | a result's `parallel` | `workers` | `replicas` |
//! | | `per_worker_batch` | `batch_per_replica` |
//! | | `images_per_s_per_worker` | `images_per_s_per_replica` |
//! | | `all_reduce_ms` | `exposed_communication_ms` |
//! | | `all_reduce_pct` | `exposed_communication_pct` |
//! | each of its `ranks` | `all_reduce_pct` | `exposed_communication_pct` |
//! | each of its `ranks` (2.2.0) | `all_reduce_p50_ms` | `exposed_communication_p50_ms` |
//! | a cell summary | `workers` | `replicas` |
//! | | `all_reduce_pct` | `exposed_communication_pct` |
//! | a scaling (`weak_scaling`, `strong_scaling`, `run-end`'s `scaling`) | `workers` | `replicas` |
//! | a cell record | `repeats` (the count asked for) | `repeats_asked` |
//! | | `runs` | `repeats` |
//! | `run.json` | `shard` | `slice` |

use serde_json::{Map, Value};

/// The last results schema of the 1.x line, which downgraded events declare.
pub const LAST: &str = "1.4.0";

/// One renamed field: the keys leading to the object that holds it (`*`:
/// every element of an array), its 1.x name and its 2.0 name.
#[derive(Clone, Copy, Debug)]
struct Renamed {
    at: &'static [&'static str],
    old: &'static str,
    new: &'static str,
}

const fn renamed(at: &'static [&'static str], old: &'static str, new: &'static str) -> Renamed {
    Renamed { at, old, new }
}

/// A repeat's result (`CellResult`).
const RESULT: &[Renamed] = &[
    renamed(&["parallel"], "workers", "replicas"),
    renamed(&["parallel"], "per_worker_batch", "batch_per_replica"),
    renamed(&["parallel"], "images_per_s_per_worker", "images_per_s_per_replica"),
    renamed(&["parallel"], "all_reduce_ms", "exposed_communication_ms"),
    renamed(&["parallel"], "all_reduce_pct", "exposed_communication_pct"),
    renamed(&["parallel", "ranks", "*"], "all_reduce_pct", "exposed_communication_pct"),
    // Added at 2.2.0; a reporter of 1.x reads it in 1.x's words.
    renamed(&["parallel", "ranks", "*"], "all_reduce_p50_ms", "exposed_communication_p50_ms"),
];

/// A cell's statistics over its repeats (`CellSummary`).
const SUMMARY: &[Renamed] = &[
    renamed(&[], "workers", "replicas"),
    renamed(&[], "all_reduce_pct", "exposed_communication_pct"),
    renamed(&["weak_scaling"], "workers", "replicas"),
    renamed(&["strong_scaling"], "workers", "replicas"),
];

/// `run-end`'s scaling of every cell.
const RUN_END: &[Renamed] = &[
    renamed(&["scaling", "*", "weak"], "workers", "replicas"),
    renamed(&["scaling", "*", "strong"], "workers", "replicas"),
];

/// A cell record's own fields, in the order they are upgraded: the count
/// leaves `repeats` before the list takes the name.
const RECORD: &[Renamed] = &[renamed(&[], "repeats", "repeats_asked"), renamed(&[], "runs", "repeats")];

/// `run.json`'s own fields.
const RUN: &[Renamed] = &[renamed(&[], "shard", "slice")];

/// Which document a JSON value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Document {
    /// One line of `events.jsonl` (its kind read from its `event` tag).
    Event,
    /// `cells/<slug>.json`.
    CellRecord,
    /// `run.json`.
    Run,
}

/// Which way names are translated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Up,
    Down,
}

/// `value`, a 1.x `document`, in 2.0 names. An event is then one of this
/// schema, and a `run-start` says so; `run.json` keeps the version it was
/// written with (a 1.x directory is read, never resumed).
pub fn upgrade(document: Document, value: &mut Value) {
    match document {
        Document::Event => {
            translate_event(value, Way::Up);
            declare(value, crate::SCHEMA_VERSION);
        }
        Document::Run => apply(value, RUN, Way::Up),
        Document::CellRecord => {
            // The results under their 1.x name, then the record's own names.
            apply_under(value, &["runs", "*"], RESULT, Way::Up);
            apply_under(value, &["summary"], SUMMARY, Way::Up);
            apply(value, RECORD, Way::Up);
        }
    }
}

/// `event`, of results schema 2.0, in the 1.x names a reporter of plugin
/// contract 1.0 to 1.4 reads; a `run-start` declares schema [`LAST`].
pub fn downgrade_event(event: &mut Value) {
    crate::phases::unname(event);
    translate_event(event, Way::Down);
    declare(event, LAST);
}

/// A `run-start` event's schema set to `version`.
fn declare(event: &mut Value, version: &str) {
    if event.get("event").and_then(Value::as_str) == Some("run-start") {
        if let Some(schema) = event.get_mut("schema") {
            *schema = Value::String(version.into());
        }
    }
}

fn translate_event(event: &mut Value, way: Way) {
    let renames = match event.get("event").and_then(Value::as_str) {
        Some("cell") => RESULT,
        Some("cell-summary") => SUMMARY,
        Some("run-end") => RUN_END,
        _ => return,
    };
    apply(event, renames, way);
}

/// Every rename of `renames` applied to `value`, in order upwards and in
/// reverse order downwards.
fn apply(value: &mut Value, renames: &[Renamed], way: Way) {
    apply_under(value, &[], renames, way);
}

fn apply_under(value: &mut Value, prefix: &[&str], renames: &[Renamed], way: Way) {
    let mut order: Vec<&Renamed> = renames.iter().collect();
    if way == Way::Down {
        order.reverse();
    }
    for r in order {
        let (from, to) = match way {
            Way::Up => (r.old, r.new),
            Way::Down => (r.new, r.old),
        };
        let path: Vec<&str> = prefix.iter().chain(r.at).copied().collect();
        each_object(value, &path, &mut |object| {
            if let Some(v) = object.remove(from) {
                object.insert(to.to_string(), v);
            }
        });
    }
}

/// Call `f` on every object `path` leads to from `value`.
fn each_object(value: &mut Value, path: &[&str], f: &mut dyn FnMut(&mut Map<String, Value>)) {
    match path.split_first() {
        None => {
            if let Value::Object(object) = value {
                f(object);
            }
        }
        Some((&"*", rest)) => {
            if let Value::Array(items) = value {
                items.iter_mut().for_each(|item| each_object(item, rest, f));
            }
        }
        Some((key, rest)) => {
            if let Some(inner) = value.get_mut(*key) {
                each_object(inner, rest, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cell_record_of_1x_reads_in_2_0_names_and_its_count_is_not_taken_for_the_list() {
        let mut record = json!({
            "repeats": 2,
            "runs": [{"parallel": {"workers": 2, "all_reduce_ms": {"p50": 1.0}, "ranks": [{"all_reduce_pct": 3.0}]},
                      "loader": {"workers": 4}}],
            "summary": {"workers": 2, "all_reduce_pct": {"median": 3.0}, "weak_scaling": {"workers": 2}},
        });
        upgrade(Document::CellRecord, &mut record);
        assert_eq!(
            record,
            json!({
                "repeats_asked": 2,
                "repeats": [{"parallel": {"replicas": 2, "exposed_communication_ms": {"p50": 1.0},
                                           "ranks": [{"exposed_communication_pct": 3.0}]},
                             "loader": {"workers": 4}}],
                "summary": {"replicas": 2, "exposed_communication_pct": {"median": 3.0},
                            "weak_scaling": {"replicas": 2}},
            }),
            "a loader's workers are loader workers in both"
        );
    }

    #[test]
    fn events_go_down_to_1x_names_and_back_unchanged() {
        let events = [
            json!({"event": "cell", "parallel": {"replicas": 2, "batch_per_replica": 16,
                   "images_per_s_per_replica": 9.0, "exposed_communication_pct": 1.5,
                   "ranks": [{"exposed_communication_pct": 1.0}, {"exposed_communication_pct": 2.0}]}}),
            json!({"event": "cell-summary", "replicas": 2, "strong_scaling": {"replicas": 2}}),
            json!({"event": "run-end", "scaling": [{"cell": "a", "weak": {"replicas": 4}}]}),
            json!({"event": "epoch", "workers": 1}),
        ];
        for event in events {
            let mut down = event.clone();
            downgrade_event(&mut down);
            let text = down.to_string();
            for new in ["replicas", "batch_per_replica", "per_replica", "exposed_communication"] {
                assert!(!text.contains(new), "{new} left in {text}");
            }
            let mut up = down;
            upgrade(Document::Event, &mut up);
            assert_eq!(up, event);
        }
        let mut down = json!({"event": "cell", "parallel": {"replicas": 2, "ranks": [{"exposed_communication_pct": 1.0}]}});
        downgrade_event(&mut down);
        assert_eq!(
            down,
            json!({"event": "cell", "parallel": {"workers": 2, "ranks": [{"all_reduce_pct": 1.0}]}})
        );
    }

    #[test]
    fn a_run_start_declares_the_schema_its_names_are_of() {
        let now = json!({"event": "run-start", "schema": crate::SCHEMA_VERSION, "repeats": 2});
        let mut start = now.clone();
        downgrade_event(&mut start);
        assert_eq!(start, json!({"event": "run-start", "schema": LAST, "repeats": 2}));
        upgrade(Document::Event, &mut start);
        assert_eq!(start, now);
    }
}
