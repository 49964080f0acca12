//! `html`: `report.html`, one self-contained page (inline CSS and SVG, no
//! script, nothing fetched, printable) read one question at a time: what
//! the run says (each cell's verdict, failure or suspect figure, once),
//! the cells table, then a section per question the run can answer
//! (throughput, scaling, input pipeline, communication, step time, phases,
//! memory, energy, accuracy curves), each a chart and its table at the
//! page's full width, and the notes, cell by cell, collapsed.

mod charts;
mod ops;
mod sections;
mod svg;

use benchkit_pdk::report::{
    figure_anchor, number, Gathered, RunLog, RunReport, FIGURES_NOTE, FIGURES_PAGE, MOCK_NOTE,
};
use benchkit_pdk::schema::{Bottleneck, CellStatus, RunStart};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use charts::suspect_line;
use std::fmt::Write;
use svg::esc;

struct Html;

/// Where the run ran and with what.
fn environment(h: &mut String, start: &RunStart) {
    let env = &start.environment;
    let _ = write!(h, "<h1>benchkit run <code>{}</code></h1>", esc(&start.name));
    if start.mock {
        let _ = write!(h, "<p class=\"mock\"><b>{}</b></p>", esc(MOCK_NOTE));
    }
    let _ = write!(
        h,
        "<p class=\"env\">{} · {} logical cores · {} GiB · {} · kernel {}<br>benchkit {} ({}) · burn {} · wasmtime {} · run id <code>{}</code> · {}</p>",
        esc(&env.cpu_model),
        env.logical_cores,
        number(env.memory_gib),
        esc(&env.os),
        esc(&env.kernel),
        esc(&env.benchkit_version),
        esc(&env.git_commit),
        esc(&env.burn_version),
        esc(&env.wasmtime_version),
        esc(&start.run_id),
        if start.seeds > 1 {
            format!("{} seeds × {} repeat(s) per cell", start.seeds, start.repeats)
        } else {
            format!("{} repeat(s) per cell", start.repeats)
        },
    );
    if !env.gpus.is_empty() {
        let names: Vec<String> = env.gpus.iter().map(|g| esc(g)).collect();
        let _ = write!(
            h,
            "<p class=\"env\">GPUs: {} (driver {})</p>",
            names.join(", "),
            esc(env.gpu_driver.as_deref().unwrap_or_default())
        );
    }
}

/// What the run says, cell by cell and each once: what limits it and what
/// to try, why it failed or was not available, and why a figure of it is
/// suspect.
fn verdicts(h: &mut String, log: &RunLog) {
    *h += "<section id=\"verdicts\"><h2>What the run says</h2>";
    let mut rows = String::new();
    for s in &log.summaries {
        let (limit, evidence, advice) = match (&s.reason, s.status, &s.verdict) {
            (Some(reason), CellStatus::Unavailable, _) => {
                ("not available".into(), reason.clone(), String::new())
            }
            (Some(reason), _, _) => ("failed".into(), reason.clone(), String::new()),
            (None, _, Some(v)) => {
                let try_ = if v.bottleneck == Bottleneck::Compute { String::new() } else { v.advice.clone() };
                (format!("{} bound", v.bottleneck.label()), v.evidence.clone(), try_)
            }
            (None, _, None) => ("-".into(), String::new(), String::new()),
        };
        let warn =
            suspect_line(s).map(|w| format!("<span class=\"warn\">⚠ {}</span>", esc(&w))).unwrap_or_default();
        let class =
            if s.reason.is_some() && s.status != CellStatus::Unavailable { " class=\"failed\"" } else { "" };
        let _ = write!(
            rows,
            "<tr{class}><td class=\"label\" title=\"{}\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td><td class=\"t\">{warn}</td></tr>",
            esc(&s.cell),
            esc(s.shown()),
            esc(&limit),
            esc(&evidence),
            esc(&advice)
        );
    }
    if rows.is_empty() {
        *h += "<p>No cell finished.</p></section>";
        return;
    }
    let _ = write!(
        h,
        "<div class=\"wide\"><table class=\"fit\"><tr><th>cell</th><th>what limits it</th><th>evidence</th><th>try</th><th>suspect figures</th></tr>{rows}</table></div></section>"
    );
}

/// The cells table: medians over repeats, each cell's label with its id on
/// hover, a last column saying why a cell's figures are suspect.
fn cells_table(h: &mut String, log: &RunLog) {
    *h += "<section id=\"cells\"><h2>Cells</h2><div class=\"wide\"><table>";
    let table = log.cells_table();
    let suspects: Vec<Option<String>> = log.summaries.iter().map(suspect_line).collect();
    let any_suspect = suspects.iter().any(Option::is_some);
    let mut header: String = table.rows[0]
        .iter()
        .map(|c| format!("<th title=\"{FIGURES_PAGE}#{}\">{}</th>", figure_anchor(c), esc(c)))
        .collect();
    if any_suspect {
        let _ = write!(header, "<th title=\"{FIGURES_PAGE}#suspect\">suspect</th>");
    }
    let _ = write!(h, "<tr>{header}</tr>");
    for ((s, row), why) in log.summaries.iter().zip(&table.rows[1..]).zip(&suspects) {
        let mut cells: String = row
            .iter()
            .enumerate()
            .map(|(i, c)| match i {
                0 => format!("<td class=\"label\" title=\"{}\">{}</td>", esc(&s.cell), esc(c)),
                _ if table.text.get(i) == Some(&true) => format!("<td class=\"t\">{}</td>", esc(c)),
                _ => format!("<td>{}</td>", esc(c)),
            })
            .collect();
        if any_suspect {
            // Each reason's head here (`noisy`, `weak scaling 132 % > 100 %`), the whole on hover
            // and under "What the run says".
            let mark = why.as_deref().map(|w| {
                let heads: Vec<&str> = w.split("; ").map(|r| r.split(':').next().unwrap_or(r)).collect();
                format!("<span class=\"warn\" title=\"{}\">⚠ {}</span>", esc(w), esc(&heads.join("; ")))
            });
            let _ = write!(cells, "<td class=\"t\">{}</td>", mark.unwrap_or_default());
        }
        let _ = write!(h, "<tr class=\"{}\">{cells}</tr>", s.status.name());
    }
    *h += "</table></div>";
    if let Some(note) = log.rel_note() {
        let _ = write!(h, "<p class=\"env\">{}</p>", esc(&note));
    }
    let _ = write!(
        h,
        "<p class=\"env\">{}; each header's tooltip names its entry, each label's the cell's id</p>",
        esc(FIGURES_NOTE)
    );
    let legend = log.machine_legend();
    if !legend.is_empty() {
        let items: String = legend.iter().map(|l| format!("<li>{}</li>", esc(l))).collect();
        let _ = write!(h, "<p class=\"env\">Machines the cells ran on:</p><ul class=\"notes\">{items}</ul>");
    }
    *h += "</section>";
}

/// `rows` (the first is the header) as a table whose first column is a
/// cell's label.
fn plain_table(h: &mut String, rows: &[Vec<String>]) {
    *h += "<div class=\"wide\"><table>";
    for (i, row) in rows.iter().enumerate() {
        let cells: String = row
            .iter()
            .enumerate()
            .map(|(k, c)| match (i, k) {
                (0, _) => format!("<th>{}</th>", esc(c)),
                (_, 0) => format!("<td class=\"label\">{}</td>", esc(c)),
                _ => format!("<td>{}</td>", esc(c)),
            })
            .collect();
        let _ = write!(h, "<tr>{cells}</tr>");
    }
    *h += "</table></div>";
}

/// The notes about each cell, a collapsed block per cell; a cell that
/// failed is open.
fn notes(h: &mut String, log: &RunLog) {
    let all = log.notes();
    if all.is_empty() {
        return;
    }
    *h += "<section id=\"notes\"><h2>Notes, cell by cell</h2>";
    let mut cells: Vec<&str> = Vec::new();
    for n in &all {
        if !cells.contains(&n.cell.as_str()) {
            cells.push(&n.cell);
        }
    }
    for cell in cells {
        let mine: Vec<_> = all.iter().filter(|n| n.cell == cell).collect();
        let failed = mine.iter().any(|n| n.failed);
        let items: String = mine.iter().map(|n| format!("<li>{}</li>", esc(&n.text))).collect();
        let _ = write!(
            h,
            "<details{}><summary>{} <span class=\"env\">({} note{})</span></summary><ul class=\"notes\">{items}</ul></details>",
            if failed { " open" } else { "" },
            esc(cell),
            mine.len(),
            if mine.len() == 1 { "" } else { "s" }
        );
    }
    *h += "</section>";
}

/// The page's body: environment, verdicts, table, a section per question, notes.
fn body(log: &RunLog) -> Result<String, String> {
    let start = log.run_start()?;
    let mut questions = String::new();
    let toc = sections::all(&mut questions, log, &start.axes);
    let mut h = String::new();
    environment(&mut h, start);
    let links: String = [("verdicts", "What the run says"), ("cells", "Cells")]
        .into_iter()
        .chain(toc.iter().map(|(id, name)| (*id, *name)))
        .chain(if log.notes().is_empty() { None } else { Some(("notes", "Notes")) })
        .map(|(id, name)| format!("<a href=\"#{id}\">{name}</a>"))
        .collect::<Vec<_>>()
        .join(" · ");
    let _ = write!(h, "<nav>{links}</nav>");
    verdicts(&mut h, log);
    cells_table(&mut h, log);
    h += &questions;
    notes(&mut h, log);
    Ok(h)
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0 auto;padding:1em 2em;max-width:1800px;color:#222}\
nav{font-size:13px;margin:.5em 0 1em}section{margin:0 0 2em}.wide{overflow-x:auto;max-width:100%}\
table{border-collapse:collapse;font-size:12px;margin:.6em 0;width:100%}td,th{border:1px solid #ccc;padding:3px 5px;text-align:right}\
th{text-align:left;vertical-align:bottom;background:#f4f4f4}td{white-space:nowrap}td.t,td.label{text-align:left;white-space:normal;overflow-wrap:break-word}\
td.label{min-width:8em;max-width:22em}table.fit td{white-space:normal}tr.failed{background:#fdd}.env{color:#555;font-size:13px}\
.mock{background:#fe8;padding:4px}.warn{color:#b00;font-weight:600}svg .warn{fill:#c00;font-size:15px;font-weight:700}\
svg{display:block;width:100%;height:auto;margin:1em 0;break-inside:avoid}.title{font-size:14px;font-weight:600}\
.tick{font-size:11px;fill:#333}.axis{font-size:12px;fill:#333}.grid{stroke:#e3e3e3}.ref{stroke:#888;stroke-dasharray:4 3}\
.ideal{stroke-dasharray:6 4;stroke-width:1.5}details{margin:.2em 0}summary{cursor:pointer;font-size:13px}\
@media print{body{padding:0;max-width:none}nav{display:none}.wide{overflow:visible}table{font-size:9px}}";

impl RunReport for Html {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "html".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description:
                "report.html: one self-contained page, a section per question with its chart and table".into(),
            config_schema: "{}".into(),
        }
    }

    fn create(_cfg: &mut Config) -> Result<Self, String> {
        Ok(Self)
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        let page = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>benchkit {}</title><style>{STYLE}</style></head><body>{}</body></html>\n",
            esc(&log.name()),
            body(log)?
        );
        Ok(vec![Artifact { name: "report.html".into(), contents: page.into_bytes() }])
    }
}

export_reporter!(Gathered<Html>);
