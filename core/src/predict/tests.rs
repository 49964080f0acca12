use super::*;

/// α = 10 µs, 1 GB/s: round numbers to compute by hand.
fn link() -> Link {
    Link { name: "test".into(), alpha_s: 10e-6, bytes_per_s: 1e9, source: "test".into(), over: None }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 + 1e-9 * b.abs()
}

#[test]
fn ring_at_two_and_eight_ranks() {
    let mb = 1e6;
    // N = 2: 2·1·10 µs + 2·1/2 · 1 MB / 1 GB/s = 20 µs + 1 ms.
    assert!(close(all_reduce_s(Algorithm::Ring, 2, mb, &link()), 20e-6 + 1e-3));
    // N = 8: 2·7·10 µs + 2·7/8 · 1 ms = 140 µs + 1.75 ms.
    assert!(close(all_reduce_s(Algorithm::Ring, 8, mb, &link()), 140e-6 + 1.75e-3));
    assert_eq!(all_reduce_s(Algorithm::Ring, 1, mb, &link()), 0.0);
}

#[test]
fn tree_pays_log_latency_and_twice_the_bytes() {
    let mb = 1e6;
    // N = 8: depth 3, 2·3·10 µs + 2 · 1 ms.
    assert!(close(all_reduce_s(Algorithm::Tree, 8, mb, &link()), 60e-6 + 2e-3));
    // N = 5: depth ⌈log₂ 5⌉ = 3.
    assert!(close(all_reduce_s(Algorithm::Tree, 5, mb, &link()), 60e-6 + 2e-3));
    // N = 1024: depth 10 against the ring's 2·1023 latencies.
    assert!(close(all_reduce_s(Algorithm::Tree, 1024, 0.0, &link()), 200e-6));
    assert!(close(all_reduce_s(Algorithm::Ring, 1024, 0.0, &link()), 2046.0 * 10e-6));
}

#[test]
fn two_levels_reduce_inside_then_across_nodes() {
    let fast =
        Link { name: "fast".into(), alpha_s: 1e-6, bytes_per_s: 100e9, source: "test".into(), over: None };
    let mb = 1e6;
    // 16 replicas, 8 a machine: inside, 2·(7·1 µs + 7/8 · 1 MB / 100 GB/s) = 14 µs + 17.5 µs;
    // across the 2 machines, a ring of the machine's 1 MB: 20 µs + 1 ms.
    let t = two_level_s(Algorithm::Ring, 16, 8, mb, &fast, &link());
    assert!(close(t, 14e-6 + 17.5e-6 + 20e-6 + 1e-3), "{t}");
    // One replica a machine is a flat all-reduce on the slow link.
    assert!(close(
        two_level_s(Algorithm::Ring, 4, 1, mb, &fast, &link()),
        all_reduce_s(Algorithm::Ring, 4, mb, &link())
    ));
}

#[test]
fn weak_and_strong_scaling_efficiency() {
    let measured = Measured { compute_s: 0.1, backward_s: 0.06, batch: 64, buckets: vec![50e6, 50e6] };
    let topology = Topology { gpus_per_machine: 1, intra: link(), inter: link() };
    let ring = Schedule { algorithm: Algorithm::Ring, overlap: Overlap::None };
    // Weak, N = 2: two buckets of 50 MB, each 20 µs + 50 ms: 100.04 ms of all-reduce.
    let p = point(&measured, &topology, ring, Scaling::Weak, 2);
    assert!(close(p.exposed_communication_s, p.communication_s));
    assert!(close(p.communication_s, 2.0 * (20e-6 + 0.05)));
    assert!(close(p.step_s, 0.1 + 0.10004));
    assert!(close(p.images_per_s, 128.0 / p.step_s));
    assert!(close(p.efficiency, 0.1 / p.step_s));
    // Strong, N = 4: 25 ms of compute; all-reduce 2·(60 µs + 75 ms).
    let p = point(&measured, &topology, ring, Scaling::Strong, 4);
    let comm = 2.0 * (60e-6 + 0.075);
    assert!(close(p.step_s, 0.025 + comm));
    assert!(close(p.images_per_s, 64.0 / p.step_s));
    assert!(close(p.efficiency, 0.1 / (4.0 * p.step_s)));
    // One replica: no all-reduce, efficiency 1.
    let tree = Schedule { algorithm: Algorithm::Tree, overlap: Overlap::Backward };
    let p = point(&measured, &topology, tree, Scaling::Weak, 1);
    assert_eq!((p.communication_s, p.efficiency), (0.0, 1.0));
}

#[test]
fn overlap_hides_what_the_backward_pass_outlasts() {
    let measured = Measured { compute_s: 0.1, backward_s: 0.06, batch: 64, buckets: vec![50e6, 50e6] };
    let topology = Topology { gpus_per_machine: 1, intra: link(), inter: link() };
    let overlapped = Schedule { algorithm: Algorithm::Ring, overlap: Overlap::Backward };
    // N = 2, each bucket 50.02 ms. The first is produced at 30 ms (half the
    // bytes, half the 60 ms pass) and done at 80.02 ms; the second, produced
    // at 60 ms, waits for it and is done at 130.04 ms: 70.04 ms past the pass.
    let p = point(&measured, &topology, overlapped, Scaling::Weak, 2);
    assert!(close(p.communication_s, 0.10004));
    assert!(close(p.exposed_communication_s, 0.07004), "{}", p.exposed_communication_s);
    assert!(close(p.step_s, 0.1 + 0.07004));
    assert!(close(p.efficiency, 0.1 / p.step_s));
    // Four 1 ms buckets over a 100 ms pass: only the last one's all-reduce is left.
    let times = [1e-3; 4];
    assert!(close(exposed_s(&times, &[1e6; 4], 0.1, Overlap::Backward), 1e-3));
    assert!(close(exposed_s(&times, &[1e6; 4], 0.1, Overlap::None), 4e-3));
    // One bucket cannot overlap: it is produced when the pass ends.
    assert!(close(exposed_s(&[0.05], &[50e6], 0.06, Overlap::Backward), 0.05));
}

#[test]
fn links_by_name_rate_or_measurement() {
    let ib = links::preset("IB200").expect("a preset");
    assert_eq!(ib.bytes_per_s, 25e9);
    assert!(ib.source.contains("HDR") && ib.source.contains("α assumed"), "{}", ib.source);
    assert_eq!(links::preset("100mbit").map(|l| l.bytes_per_s), Some(12.5e6));
    assert_eq!(links::preset("2.5gbit").map(|l| l.bytes_per_s), Some(312.5e6));
    assert!(links::preset("0gbit").is_none() && links::preset("fastgbit").is_none());
    let e = links::resolve("warp").unwrap_err();
    assert!(e.contains("unknown link `warp`") && e.contains("ib400") && e.contains("<N>gbit"), "{e}");

    // A 4-rank sweep whose fit says α = 120 µs, busbw 2 GB/s: 20 µs a hop.
    let dir = tempfile::tempdir().unwrap();
    let report = serde_json::json!({
        "schema": "x", "collective": "gloo", "ranks": 4, "machines": [], "warmup": 1, "sizes": [],
        "fit": { "alpha_us": 120.0, "algbw_gbps": 1.333, "busbw_gbps": 2.0, "max_error": 0.01 },
        "environment": crate::measure::env::detect(), "started_unix_ms": 0
    });
    std::fs::write(dir.path().join("collective.json"), report.to_string()).unwrap();
    let measured = links::resolve(&dir.path().display().to_string()).unwrap();
    assert!(close(measured.alpha_s, 20e-6) && close(measured.bytes_per_s, 2e9), "{measured:?}");
    assert_eq!(measured.name, "gloo as measured");
}
