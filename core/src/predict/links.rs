//! Links the scaling model can price: named presets (their bandwidth from
//! the standard that defines them; their latency an assumption, said so),
//! `<N>mbit` / `<N>gbit` rates, or a `benchkit collective` result, whose
//! fit gives a measured latency and bus bandwidth.

use std::path::Path;

/// A link between two ranks: `alpha_s` a message, `bytes_per_s` each way.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub name: String,
    pub alpha_s: f64,
    pub bytes_per_s: f64,
    /// Where the figures come from.
    pub source: String,
    /// The network of this machine's runs the figures describe, where
    /// they describe one: an emulated link (`1gbit`) or `host`, matched
    /// against a cell's `parallel.link` to check a prediction.
    pub over: Option<String>,
}

impl Link {
    /// e.g. `ib200: 25.0 GB/s, α 5 µs (InfiniBand HDR 4x …)`.
    pub fn describe(&self) -> String {
        format!(
            "{}: {:.3} GB/s, α {:.1} µs ({})",
            self.name,
            self.bytes_per_s / 1e9,
            self.alpha_s * 1e6,
            self.source
        )
    }
}

/// Latency assumed for a preset: no standard gives a per-hop software
/// latency, so it is named as an assumption wherever it is used.
const ASSUMED_FABRIC_ALPHA_S: f64 = 5e-6;
const ASSUMED_ETHERNET_ALPHA_S: f64 = 25e-6;

/// (name, bytes a second each way, latency, source of the bandwidth).
const PRESETS: &[(&str, f64, f64, &str)] = &[
    ("pcie4", 31.5e9, ASSUMED_FABRIC_ALPHA_S, "PCIe 4.0 x16: 16 GT/s a lane, 128b/130b coding (PCI-SIG)"),
    ("pcie5", 63.0e9, ASSUMED_FABRIC_ALPHA_S, "PCIe 5.0 x16: 32 GT/s a lane, 128b/130b coding (PCI-SIG)"),
    (
        "nvlink4",
        450e9,
        ASSUMED_FABRIC_ALPHA_S,
        "NVLink 4 on H100 SXM: 900 GB/s both ways together (NVIDIA H100 datasheet)",
    ),
    ("ib100", 12.5e9, ASSUMED_FABRIC_ALPHA_S, "InfiniBand EDR 4x: 100 Gb/s (IBTA)"),
    ("ib200", 25e9, ASSUMED_FABRIC_ALPHA_S, "InfiniBand HDR 4x: 200 Gb/s (IBTA)"),
    ("ib400", 50e9, ASSUMED_FABRIC_ALPHA_S, "InfiniBand NDR 4x: 400 Gb/s (IBTA)"),
    ("25gbe", 3.125e9, ASSUMED_ETHERNET_ALPHA_S, "25 Gb/s Ethernet (IEEE 802.3by)"),
    ("100gbe", 12.5e9, ASSUMED_ETHERNET_ALPHA_S, "100 Gb/s Ethernet (IEEE 802.3ba)"),
];

/// The names `preset` accepts, for an error message.
pub fn names() -> String {
    let mut names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
    names.extend(["<N>mbit", "<N>gbit", "a benchkit collective results folder or collective.json"]);
    names.join(", ")
}

/// A named preset, or a rate such as `1gbit` or `100mbit`; `None` otherwise.
pub fn preset(name: &str) -> Option<Link> {
    let lower = name.to_ascii_lowercase();
    if let Some(&(n, bytes_per_s, alpha_s, source)) = PRESETS.iter().find(|p| p.0 == lower) {
        let source = format!("{source}; α assumed");
        return Some(Link { name: n.into(), alpha_s, bytes_per_s, source, over: None });
    }
    let rate = crate::config::LinkRate::parse(&lower).ok()?;
    let bits = rate.bits_per_s()?;
    Some(Link {
        name: rate.name(),
        alpha_s: ASSUMED_ETHERNET_ALPHA_S,
        bytes_per_s: bits as f64 / 8.0,
        source: format!("{rate} line rate; α assumed"),
        over: Some(rate.name()),
    })
}

/// The link a `benchkit collective` result measured: its fit's latency
/// spread over a ring's `2(n−1)` hops, and its bus bandwidth (what each
/// rank's link carried).
pub fn measured(path: &Path) -> Result<Link, String> {
    let file = if path.is_dir() { path.join("collective.json") } else { path.to_path_buf() };
    let text = crate::bounds::read_text(&file, "a collective result", crate::bounds::RUN_RECORD_BYTES)
        .map_err(|e| e.to_string())?;
    let report: benchkit_schema::CollectiveReport = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a `benchkit collective` result: {e}", file.display()))?;
    let (ranks, collective) = (report.ranks, report.collective);
    let Some(fit) = report.fit.filter(|f| ranks >= 2 && f.busbw_gbps > 0.0) else {
        return Err(format!("{} holds no fit of two or more ranks to price a link by", file.display()));
    };
    let (alpha_us, busbw) = (fit.alpha_us, fit.busbw_gbps);
    // Ranks on one machine without an emulated link met on its loopback.
    let one_machine = report.machines.len() == ranks && report.machines.windows(2).all(|w| w[0] == w[1]);
    let over = report.link.clone().or_else(|| one_machine.then(|| "host".to_string()));
    Ok(Link {
        name: format!(
            "{collective} as measured{}",
            over.as_ref().map_or(String::new(), |o| format!(" over {o}"))
        ),
        alpha_s: alpha_us.max(0.0) * 1e-6 / (2.0 * (ranks as f64 - 1.0)),
        bytes_per_s: busbw * 1e9,
        source: format!("fit of {} ({ranks} ranks)", file.display()),
        over,
    })
}

/// `spec` as a preset or a rate, else as a collective result's path.
pub fn resolve(spec: &str) -> Result<Link, String> {
    if let Some(link) = preset(spec) {
        return Ok(link);
    }
    let path = Path::new(spec);
    if path.exists() {
        return measured(path);
    }
    Err(format!("unknown link `{spec}`: expected one of {}", names()))
}
