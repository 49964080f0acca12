//! End-to-end: processes started the way cluster launchers start them.
//! Two ranks of one cell as two hosts (network namespaces joined by a veth
//! pair, each rank with its own address) that take their rank, world size
//! and coordinator from torchrun's variables, meet, print the rank map and
//! train together; the same on loopback; and launcher variables that
//! contradict each other or the config, refused naming them.

use crate::common;

use common::hosts::{two_ranks, Hosts};
use common::{benchkit, repo, small_config};
use std::path::{Path, PathBuf};

fn config(dir: &Path, top: &str) -> PathBuf {
    let data = format!(
        "path = {:?}\ntrain_limit = 256\ntest_limit = 100",
        repo().join("configs/data/fashion-mnist").display().to_string()
    );
    small_config(dir, "launched", top, &data, "", "")
}

#[test]
fn two_hosts_meet_through_torchrun_variables_and_train_one_cell() {
    if let Some(hosts) = Hosts::make_or_skip() {
        let dir = tempfile::tempdir().unwrap();
        // No [distributed] keys: the launcher's variables give all of it.
        two_ranks(&config(dir.path(), ""), Some(&hosts), Some("burn"));
    }
}

#[test]
fn torchrun_variables_launch_two_ranks_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    two_ranks(&config(dir.path(), ""), None, None);
}

#[test]
fn launcher_contradictions_are_refused_naming_the_variables() {
    let dir = tempfile::tempdir().unwrap();
    let validate = |cfg: &Path, vars: &[(&str, &str)]| {
        let mut command = benchkit();
        command.arg("validate").arg(cfg).env_remove("BENCHKIT_RANK");
        for (k, v) in vars {
            command.env(k, v);
        }
        let output = command.assert().failure().get_output().clone();
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let plain = config(dir.path(), "");
    let e = validate(&plain, &[("RANK", "2"), ("WORLD_SIZE", "2")]);
    assert!(e.contains("RANK=2 is not a rank of WORLD_SIZE=2"), "{e}");
    let e = validate(&plain, &[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")]);
    assert!(e.contains("distributed.coordinator") && e.contains("SLURM_JOB_NODELIST"), "{e}");

    let four = config(dir.path(), "[distributed]\nprocesses = 4");
    let e = validate(
        &four,
        &[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2"), ("MASTER_ADDR", "h")],
    );
    assert!(
        e.contains("distributed.processes = 4, but the launcher started 2 (OMPI_COMM_WORLD_SIZE=2)"),
        "{e}"
    );
    assert!(e.contains("launched.toml:4"), "the line of `processes`: {e}");
}

/// A launcher's rank 1 of a config whose every cell is of one process:
/// those are rank 0's alone, so rank 1 trains nothing, says so, and
/// succeeds with an empty run.
#[test]
fn one_process_cells_are_rank_0s_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "[distributed]\nprocesses = 1");
    let out = dir.path().join("rank1");
    let output = benchkit()
        .arg("run")
        .arg(&cfg)
        .arg("-o")
        .arg(&out)
        .env_remove("BENCHKIT_RANK")
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .assert()
        .success()
        .get_output()
        .clone();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("rank 1: every cell of this run is of one process, and those are rank 0's alone"),
        "{said}"
    );
    assert!(common::records(&out).is_empty());
}
