//! A study's verdicts as the terminal shows them.

use crate::analysis::diagnoses::{Scores, CLASSES, MIN_COST_PCT};
use crate::analysis::study::{Judged, Verdict};
use crate::config::Study;
use benchkit_schema::advice::TOLERANCE_PCT;

/// The study, its claim and each check's outcome, for the terminal.
pub fn render(study: &Study, judged: &[Judged]) -> String {
    let mut out = format!("\nstudy: {}\n", study.title);
    if let Some(source) = &study.source {
        out.push_str(&format!("  source:   {source}\n"));
    }
    out.push_str(&format!("  question: {}\n  claim:    {}\n", study.question, study.claim));
    for j in judged {
        let verdict = match j.verdict {
            Verdict::Agrees => "agrees",
            Verdict::Disagrees => "DISAGREES",
            Verdict::Unclear => "unclear",
            Verdict::NotMeasured => "not measured",
        };
        let figures: Vec<String> = j
            .figures
            .iter()
            .map(|f| match (round(f.low), round(f.high)) {
                (low, high) if low != high => format!("{} [{low}–{high}] ({})", round(f.value), f.cell),
                _ => format!("{} ({})", round(f.value), f.cell),
            })
            .collect();
        out.push_str(&format!("  {verdict:<12}  {}\n                {}", j.says, j.measures));
        if figures.is_empty() {
            out.push_str(": no finished cell gave it\n");
        } else {
            out.push_str(&format!(": {}\n", figures.join(", ")));
        }
    }
    out
}

/// benchkit's diagnoses against the faults the run injected: the
/// confusion table (injected × named) and each cell's answer, for the terminal.
pub fn diagnoses(scores: &Scores) -> String {
    let mut out = String::from("\ndiagnoses scored against the injected faults\n");
    out.push_str(&format!("  {:<15}", "injected \\ named"));
    for class in CLASSES {
        out.push_str(&format!("{class:>15}"));
    }
    out.push('\n');
    for (row, counts) in scores.confusion() {
        if counts.iter().all(|&n| n == 0) {
            continue;
        }
        out.push_str(&format!("  {row:<15}"));
        for n in counts {
            out.push_str(&format!("{n:>15}"));
        }
        out.push('\n');
    }
    let rate = scores.stragglers_right_pct();
    let rate = if rate.is_finite() { format!("{rate:.0} %") } else { "no cell to score".into() };
    out.push_str(&format!(
        "  injected stragglers costing ≥ {MIN_COST_PCT:.0} % of a step named with the right rank and cause: {rate}; stragglers named where none was injected: {}\n",
        scores.false_stragglers()
    ));
    let rate = scores.bottlenecks_right_pct();
    if rate.is_finite() {
        out.push_str(&format!("  bottleneck column right where a fault sets it (same cells): {rate:.0} %\n"));
    }
    let rate = scores.advice_within_pct();
    if rate.is_finite() {
        out.push_str(&format!(
            "  advice to free the straggler's machine on the right rank, within {TOLERANCE_PCT:.0} % of the same cell without faults (compute and data faults costing ≥ {MIN_COST_PCT:.0} %): {rate:.0} %\n"
        ));
    }
    for c in &scores.cells {
        let at = |rank: Option<usize>| rank.map_or(String::new(), |r| format!(" (rank {r})"));
        let cost = c.cost_pct.map_or("-".into(), |p| format!("{p:+.0} %"));
        let mark = if c.right { "right" } else { "WRONG" };
        let bottleneck = match (&c.bottleneck_expected, &c.bottleneck_named) {
            (Some(e), n) => format!("; bottleneck {} (expected {e})", n.as_deref().unwrap_or("-")),
            (None, _) => String::new(),
        };
        let advice = c.advice_error_pct.map_or(String::new(), |e| format!("; advice {e:+.0} %"));
        out.push_str(&format!(
            "  {mark:<6} {}: expected {}{}, named {}{}; step {cost}{bottleneck}{advice}\n",
            c.cell,
            c.expected,
            at(c.expected_rank),
            c.named,
            at(c.named_rank)
        ));
    }
    out
}

/// Three significant digits, without an exponent.
fn round(v: f64) -> String {
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::study::Figure;

    #[test]
    fn a_spread_is_shown_beside_its_median_and_an_unmeasured_check_says_so() {
        let text = |t: &str| t.to_string();
        let study = Study {
            title: text("t"),
            question: text("q?"),
            claim: text("c."),
            source: None,
            prepare: Vec::new(),
            checks: Vec::new(),
        };
        let figure = |cell: &str, value, low, high| Figure { cell: cell.into(), value, low, high };
        let judged = [
            Judged {
                says: text("faster"),
                measures: text("images_per_s"),
                figures: vec![figure("opt", 1.1, 0.9, 1.3), figure("png,opt", 2.5, 2.5, 2.5)],
                verdict: Verdict::Unclear,
            },
            Judged {
                says: text("exists"),
                measures: text("x"),
                figures: Vec::new(),
                verdict: Verdict::NotMeasured,
            },
        ];
        let out = render(&study, &judged);
        assert!(out.contains("unclear") && out.contains("1.10 [0.90–1.30] (opt), 2.50 (png,opt)"), "{out}");
        assert!(out.contains("not measured") && out.contains("x: no finished cell gave it"), "{out}");
    }
}
