//! The ops section: each op-profiled cell's step as a bar split by op
//! category, then, for cells that differ only in their backend, each
//! category's time per backend and its share of the gap to the reference
//! backend, and each backend's ops by share of that gap.

use crate::charts::rows_by_panel;
use crate::plain_table;
use crate::svg::esc;
use benchkit_pdk::report::RunLog;
use benchkit_pdk::schema::tables::op_tables;
use benchkit_pdk::schema::{CellSummary, OpCategory, OpProfile};
use std::fmt::Write;

const CATEGORY_COLOURS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
    "#7f7f7f",
];
const UNATTRIBUTED_COLOUR: &str = "#dddddd";

/// How many ops each backend's table lists.
const TOP: usize = 15;

/// The section, or `false` where no cell timed its ops.
pub fn ops(h: &mut String, log: &RunLog) -> bool {
    let cells: Vec<&CellSummary> = log.summaries.iter().filter(|s| s.ops.is_some()).collect();
    if cells.is_empty() {
        return false;
    }
    let mut legend: Vec<String> = OpCategory::ALL
        .iter()
        .zip(CATEGORY_COLOURS)
        .map(|(f, c)| format!("<span style=\"color:{c}\">■</span> {}", esc(f.label())))
        .collect();
    legend.push(format!("<span style=\"color:{UNATTRIBUTED_COLOUR}\">■</span> not attributed"));
    let _ = write!(h, "<p class=\"env\">{}</p>", legend.join(" &nbsp; "));
    let step = |s: &CellSummary| s.ops.as_ref().map(|p: &OpProfile| p.step_ms);
    rows_by_panel(
        h,
        &cells,
        "Mean op-profiled step, op category by op category",
        "ms per step",
        &step,
        &|svg, s, y, x| {
            let Some(p) = s.ops.as_ref() else { return };
            let mut at = 0.0;
            let parts = OpCategory::ALL.iter().map(|f| f.label()).zip(p.category_ms()).zip(CATEGORY_COLOURS);
            let rest = std::iter::once((("not attributed", p.unattributed_ms()), UNATTRIBUTED_COLOUR));
            for ((label, ms), colour) in parts.chain(rest) {
                if ms.is_nan() || ms <= 0.0 {
                    continue;
                }
                let _ = write!(
                    svg,
                    r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="16" fill="{colour}" data-category="{}"><title>{} {ms:.2} ms ({:.1} %)</title></rect>"##,
                    x(at),
                    y - 8.0,
                    x(at + ms) - x(at),
                    esc(label),
                    esc(label),
                    100.0 * ms / p.step_ms
                );
                at += ms;
            }
        },
    );
    let refs: Vec<&CellSummary> = log.summaries.iter().collect();
    for t in op_tables(&refs, None, TOP) {
        let _ = write!(h, "<h3>{}</h3><ul class=\"env\">", esc(&t.title));
        for line in &t.coverage {
            let _ = write!(h, "<li>{}</li>", esc(line));
        }
        *h += "</ul>";
        if !t.categories.is_empty() {
            plain_table(h, &t.categories);
        }
        for (title, rows) in &t.ops {
            let _ = write!(h, "<p><b>{}</b></p>", esc(title));
            plain_table(h, rows);
        }
    }
    let _ = write!(
        h,
        "<p class=\"env\">{}</p>",
        esc("Each op's forward and backward time in the profiled steps (every other measured step), the device synchronised after every op; the headline figures come from the plain steps between them. Share of gap: the op's time on the backend minus the reference's, over the difference of their steps; the shares add up to 100 %, what no op accounts for in its own row.")
    );
    true
}
