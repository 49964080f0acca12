//! The HTML report as a person sees it: three shipped runs (the quickstart,
//! the network check, the backends matrix), each run `--mock` and rendered
//! by `builtin:html`, loaded in headless Chromium at 1400 and 800 px, the
//! page measured by a script added to a copy of it: no sideways scrolling
//! of the page, no label cut, no raw JSON, and every chart of the kind its
//! axis calls for with the series the results hold.

use crate::common::{benchkit, chromium_or_skip, repo, run_summary};
use benchkit_schema::tables::{label, panels};
use benchkit_schema::{Axis, CellSummary, RunSummary};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Measures the page once it is laid out and writes what it found, as
/// JSON, into a `<pre id="measured">` at its end.
const MEASURE: &str = r#"<script>
(() => {
  const de = document.documentElement;
  const out = { overflow: de.scrollWidth - de.clientWidth, cut: [], ellipsis: [], tables: [], charts: [] };
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        out.cut.push(t.textContent);
      if (t.firstChild && t.firstChild.nodeValue && t.firstChild.nodeValue.endsWith('…')) out.ellipsis.push(t.textContent);
    }
    out.charts.push({ kind: svg.dataset.kind, axis: svg.dataset.axis, series: Number(svg.dataset.series),
      title: svg.querySelector('title').textContent,
      suspect: [...svg.querySelectorAll('.suspect > title')].map(t => t.textContent),
      ideal: svg.querySelectorAll('polyline.ideal').length });
  }
  for (const w of document.querySelectorAll('.wide')) out.tables.push(w.scrollWidth - w.clientWidth);
  out.text = document.body.innerText;
  const pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

/// `config` run `--mock` into `out`, its HTML report written there.
fn mock_report(config: &Path, out: &Path) -> (RunSummary, PathBuf) {
    benchkit().args(["run", "-q", "--mock", "-o"]).arg(out).arg(config).assert().success();
    benchkit().arg("report").arg(out).args(["--reporter", "builtin:html"]).assert().success();
    let page = out.join("report.html");
    assert!(page.is_file(), "no {}", page.display());
    (run_summary(out), page)
}

/// What the script measured on `page` in a window `width` px wide.
fn measure(browser: &Path, page: &Path, width: u32, scratch: &Path) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let measured = scratch.join(format!("measured-{width}.html"));
    std::fs::write(&measured, html.replace("</body>", &format!("{MEASURE}</body>"))).unwrap();
    let out = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", scratch.join("profile").display()))
        .arg(format!("--window-size={width},1000"))
        .arg("--dump-dom")
        .arg(format!("file://{}", measured.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dom = String::from_utf8_lossy(&out.stdout);
    let json = dom
        .split("<pre id=\"measured\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("the measuring script wrote nothing at {width} px"));
    let json = json.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// The throughput charts the results call for: per swept axis (and per
/// panel of workloads), `lines` over a numeric axis and `bars` over any
/// other, with one series per combination of the other axes' values.
fn expected_throughput(summary: &RunSummary) -> Vec<(String, &'static str, usize)> {
    let cells: Vec<&CellSummary> = summary.summaries.iter().filter(|s| s.images_per_s.is_some()).collect();
    let split = panels(&cells, |s| s.images_per_s.map(|x| x.median));
    let mut want = Vec::new();
    for axis in &summary.run.axes {
        if axis.key == "model" && split.len() > 1 {
            continue;
        }
        for panel in &split {
            let series: BTreeSet<String> = panel
                .iter()
                .filter(|s| s.axes.contains_key(&axis.key))
                .map(|s| {
                    let others: Vec<String> = summary
                        .run
                        .axes
                        .iter()
                        .filter(|a| a.key != axis.key && !(split.len() > 1 && a.key == "model"))
                        .filter_map(|a| Some(format!("{}={}", a.key, s.axes.get(&a.key)?)))
                        .collect();
                    others.join(",")
                })
                .collect();
            want.push((axis.key.clone(), kind(axis), series.len()));
        }
    }
    want
}

fn kind(axis: &Axis) -> &'static str {
    if axis.values.iter().all(Value::is_number) {
        "lines"
    } else {
        "bars"
    }
}

/// One run's page at both widths: laid out to fit, nothing cut, no JSON,
/// charts as the axes call for.
fn check_page(browser: &Path, name: &str, summary: &RunSummary, page: &Path, scratch: &Path) -> Value {
    let mut last = Value::Null;
    for width in [1400, 800] {
        let m = measure(browser, page, width, scratch);
        let at = format!("{name} at {width} px");
        assert!(m["overflow"].as_i64() == Some(0), "{at}: the page scrolls sideways by {} px", m["overflow"]);
        assert_eq!(m["cut"], serde_json::json!([]), "{at}: labels outside their chart");
        assert_eq!(m["ellipsis"], serde_json::json!([]), "{at}: labels cut short");
        let text = m["text"].as_str().unwrap_or_default();
        for json in ["{\"", "\"plugin\"", "\"config\""] {
            assert!(!text.contains(json), "{at}: raw JSON ({json}) on the page");
        }
        if width == 1400 {
            let tables: Vec<i64> = m["tables"].as_array().unwrap().iter().filter_map(Value::as_i64).collect();
            assert!(tables.iter().all(|&o| o <= 0), "{at}: a table scrolls sideways at 1400 px: {tables:?}");
        }
        let charts = m["charts"].as_array().unwrap();
        let throughput: Vec<(String, &str, usize)> = charts
            .iter()
            .filter(|c| c["title"].as_str().is_some_and(|t| t.starts_with("Training images/s by")))
            .map(|c| {
                let kind = if c["kind"] == "lines" { "lines" } else { "bars" };
                (
                    c["axis"].as_str().unwrap_or_default().to_string(),
                    kind,
                    c["series"].as_u64().unwrap_or(0) as usize,
                )
            })
            .collect();
        if !summary.run.axes.is_empty() {
            assert_eq!(throughput, expected_throughput(summary), "{at}: throughput charts");
        }
        for label in summary.summaries.iter().map(CellSummary::shown) {
            assert!(label::readable(label) && text.contains(label), "{at}: {label} is not on the page");
        }
        last = m;
    }
    last
}

#[test]
fn three_shipped_runs_read_as_a_person_reads_them() {
    let Some(browser) = chromium_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let shots = std::env::var_os("BENCHKIT_REPORT_SHOTS").map(PathBuf::from);
    for name in ["quickstart", "network-check", "backends"] {
        let out = dir.path().join(name);
        let (summary, page) = mock_report(&repo().join(format!("configs/{name}.toml")), &out);
        let m = check_page(&browser, name, &summary, &page, dir.path());
        let charts = m["charts"].as_array().unwrap();
        if name == "network-check" {
            // Scaling: efficiency by replicas with the ideal, a line per
            // model and link; throughput by processes with each series' ideal.
            let scaling = charts.iter().find(|c| c["axis"] == "replicas").expect("a scaling chart");
            assert_eq!(scaling["kind"], "lines");
            // A line per kind of scaling and per model and link (the replicas' axes aside).
            let lines: BTreeSet<String> = summary
                .summaries
                .iter()
                .flat_map(|s| {
                    let rest = format!("{:?} {:?}", s.axes.get("model"), s.axes.get("distributed.link"));
                    [("weak", &s.weak_scaling), ("strong", &s.strong_scaling)]
                        .into_iter()
                        .filter(|(_, x)| x.is_some())
                        .map(move |(kind, _)| format!("{kind} {rest}"))
                })
                .collect();
            assert!(lines.len() >= 6, "two models × three links: {lines:?}");
            assert_eq!(scaling["series"].as_u64(), Some(lines.len() as u64), "{scaling}");
            let by_processes =
                charts.iter().find(|c| c["axis"] == "distributed.processes").expect("by processes");
            assert!(by_processes["ideal"].as_u64().unwrap_or(0) > 0, "{by_processes}");
            // A weak efficiency above 100 % is marked, with its reason, where it is drawn.
            let above = summary
                .summaries
                .iter()
                .filter(|s| s.weak_scaling.as_ref().is_some_and(|w| w.efficiency.median > 1.0))
                .count();
            let reasons: Vec<&str> =
                scaling["suspect"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            let marked =
                reasons.iter().filter(|r| r.contains("weak scaling") && r.contains("> 100 %")).count();
            assert!(above > 0, "the mock network check has weak efficiencies above 100 %");
            assert_eq!(marked, above, "{reasons:?}");
        }
        if name == "quickstart" {
            // One cell, nothing swept: its images/s as a row.
            assert!(
                charts.iter().any(|c| c["title"] == "Training images/s" && c["kind"] == "rows"),
                "{charts:?}"
            );
        }
        if let Some(shots) = &shots {
            for width in [1400, 800] {
                screenshot(&browser, &page, width, &shots.join(format!("{name}-{width}.png")), dir.path());
            }
        }
    }
}

/// A screenshot of the whole page `width` px wide (for the book).
fn screenshot(browser: &Path, page: &Path, width: u32, png: &Path, scratch: &Path) {
    let status = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
        .arg(format!("--user-data-dir={}", scratch.join("profile").display()))
        .arg(format!("--window-size={width},2000"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
}
