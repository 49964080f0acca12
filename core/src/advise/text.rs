//! Advice as the terminal shows it.

use benchkit_schema::advice::TOLERANCE_PCT;
use benchkit_schema::{AdviceReport, CellAdvice, Change, Decomposition};
use std::fmt::Write;

/// A step's parts in words: `data wait 10.0 + forward 5.0 + …`.
pub fn parts(d: &Decomposition) -> String {
    let mut parts = vec![("data wait", Some(d.data_wait_ms))];
    if d.profiled {
        parts.extend([("forward", d.forward_ms), ("backward", d.backward_ms), ("optimizer", d.optimizer_ms)]);
    } else {
        parts.push(("compute", Some(d.compute_ms)));
    }
    parts.extend([("exposed comm.", Some(d.exposed_communication_ms)), ("other", Some(d.other_ms))]);
    parts.iter().filter_map(|(n, v)| v.map(|v| format!("{n} {v:.1}"))).collect::<Vec<_>>().join(" + ")
}

fn change_lines(out: &mut String, n: usize, c: &Change, before: &benchkit_schema::Measured) {
    let p = &c.predicted;
    let _ = writeln!(
        out,
        "  {n}. {}\n     predicted: {:.1} → {:.1} images/s ({:+.0} %), step {:.1} → {:.1} ms, data wait {:.0} → {:.0} %, \
         exposed comm. {:.0} → {:.0} %",
        c.title,
        before.images_per_s,
        p.images_per_s,
        c.gain_pct,
        before.step_ms,
        p.step_ms,
        before.data_wait_pct,
        p.data_wait_pct,
        before.exposed_communication_pct,
        p.exposed_communication_pct
    );
    for u in &c.uses {
        let _ = writeln!(out, "     uses: {u}");
    }
    for a in &c.assumptions {
        let _ = writeln!(out, "     assumes: {a}");
    }
    if !c.curve.is_empty() {
        let points: Vec<String> =
            c.curve.iter().map(|[m, s]| format!("{}: {s:.1}", (m * 100.0).round() / 100.0)).collect();
        let _ = writeln!(out, "     bucket curve (MiB: step ms): {}", points.join(", "));
    }
    if let Some(v) = &c.verified {
        let band = if v.within_band { "within the band" } else { "outside the band" };
        if v.cell.is_empty() {
            let _ = writeln!(out, "     verified: not measured: {}", v.why.as_deref().unwrap_or(""));
        } else {
            let _ = writeln!(
                out,
                "     verified: {:.1} images/s, step {:.1} ms, data wait {:.0} %, exposed comm. {:.0} % (cell {}); \
                 error {:+.1} % (its own noise {}), {band}",
                v.measured.images_per_s,
                v.measured.step_ms,
                v.measured.data_wait_pct,
                v.measured.exposed_communication_pct,
                v.cell,
                v.error_pct,
                noise(v.noise_pct)
            );
            if !v.scored {
                let _ = writeln!(
                    out,
                    "     not scored: the measurement's own noise ±{:.1} % exceeds the ±{TOLERANCE_PCT:.0} % it would be scored against",
                    v.noise_pct
                );
            }
        }
        if let (Some(why), true) = (&v.why, !v.cell.is_empty()) {
            let _ = writeln!(out, "     missed: {why}");
        }
    }
}

fn cell(out: &mut String, c: &CellAdvice) {
    let d = &c.decomposition;
    let how = if d.profiled { "profiled steps' means" } else { "medians; not profiled" };
    let _ = writeln!(out, "\ncell {}", c.cell);
    let _ = writeln!(out, "  step {:.1} ms = {} ({how})", d.step_ms, parts(d));
    if let Some(s) = &d.straggler {
        let _ = writeln!(out, "  straggler: {}", s.evidence());
    }
    let _ = writeln!(
        out,
        "  bottleneck: {}; noise {:.1} % (a change predicted to gain less is not advised)",
        c.bottleneck, c.noise_pct
    );
    if c.advised.is_empty() {
        let _ = writeln!(
            out,
            "  nothing here is worth changing: no change is predicted to gain more than the noise"
        );
    }
    for (i, change) in c.advised.iter().enumerate() {
        change_lines(out, i + 1, change, &c.measured);
    }
    if let Some(m) = &c.remeasured {
        let _ = writeln!(
            out,
            "  the cell as it ran, measured again: {:.1} images/s, step {:.1} ms",
            m.images_per_s, m.step_ms
        );
    }
    for change in &c.not_advised {
        let _ = writeln!(
            out,
            "  not advised (inside the noise): {}: {:+.1} % predicted",
            change.title, change.gain_pct
        );
    }
    for note in &c.notes {
        let _ = writeln!(out, "  note: {note}");
    }
}

/// The whole advice.
pub fn render(report: &AdviceReport) -> String {
    let mut out = format!("advice on {}\n", report.run);
    for c in &report.cells {
        cell(&mut out, c);
    }
    for r in &report.refused {
        let _ = writeln!(out, "\ncell {}: no advice: {}", r.cell, r.why);
    }
    let verified: Vec<_> = report
        .cells
        .iter()
        .flat_map(|c| &c.advised)
        .filter_map(|c| c.verified.as_ref())
        .filter(|v| !v.cell.is_empty())
        .collect();
    if !verified.is_empty() {
        let scored: Vec<_> = verified.iter().filter(|v| v.scored).collect();
        let close = scored.iter().filter(|v| v.error_pct.abs() <= TOLERANCE_PCT).count();
        let _ = writeln!(
            out,
            "\n{close} of {} scored change(s) within {TOLERANCE_PCT:.0} % of the prediction, {} within the noise band; {} not scored (noisier than the tolerance)",
            scored.len(),
            scored.iter().filter(|v| v.within_band).count(),
            verified.len() - scored.len()
        );
    }
    if let Some(f) = &report.follow_up {
        let _ = writeln!(out, "\nfollow-up config: {f}");
    }
    out
}

/// A measurement's own noise, e.g. `±3.1 %`, or `unknown (one repeat)`.
fn noise(pct: f64) -> String {
    if pct.is_finite() {
        format!("±{pct:.1} %")
    } else {
        "unknown: one repeat".into()
    }
}
