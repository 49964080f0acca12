//! A study's verdicts as the terminal shows them.

use crate::analysis::study::{Judged, Verdict};
use crate::config::Study;

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
