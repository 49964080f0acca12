use super::*;

fn env(vars: &[(&str, &str)]) -> Result<LaunchEnv, LaunchEnvError> {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    LaunchEnv::from_vars(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

fn values(e: &LaunchEnv) -> (Option<usize>, Option<usize>, Option<usize>, Option<String>) {
    (
        e.rank.as_ref().map(|r| r.value),
        e.world.as_ref().map(|w| w.value),
        e.local_rank.as_ref().map(|l| l.value),
        e.coordinator.as_ref().map(|c| c.value.to_string()),
    )
}

#[test]
fn each_launcher_is_read() {
    let torchrun = env(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "2"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29400"),
    ])
    .unwrap();
    assert_eq!(values(&torchrun), (Some(3), Some(8), Some(1), Some("10.0.0.1:29400".into())));
    assert_eq!(torchrun.launcher, Some("torchrun"));
    assert_eq!(torchrun.rank.unwrap().from, "RANK=3");

    let slurm = env(&[
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "6"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_JOB_NODELIST", "gpu[007-009,012],login1"),
    ])
    .unwrap();
    assert_eq!(values(&slurm), (Some(5), Some(6), Some(1), Some("gpu007:29500".into())));
    assert_eq!(slurm.launcher, Some("slurm"));

    let ompi = env(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ("MASTER_ADDR", "head"),
    ])
    .unwrap();
    assert_eq!(values(&ompi), (Some(1), Some(2), Some(0), Some("head:29500".into())));

    let mpich = env(&[("PMI_RANK", "2"), ("PMI_SIZE", "4"), ("MPI_LOCALRANKID", "0")]).unwrap();
    assert_eq!(values(&mpich), (Some(2), Some(4), Some(0), None));
    assert_eq!(mpich.launcher, Some("mpich"));

    let indexed = env(&[("JOB_COMPLETION_INDEX", "1"), ("MASTER_ADDR", "bench-0.bench")]).unwrap();
    assert_eq!(values(&indexed), (Some(1), None, None, Some("bench-0.bench:29500".into())));
    assert_eq!(indexed.launcher, Some("kubernetes"));

    let none = env(&[]).unwrap();
    assert_eq!(none, LaunchEnv::default());
    assert!(!none.is_multi_process());
}

#[test]
fn the_innermost_launcher_wins() {
    // torchrun started by srun: torchrun's variables describe this process.
    let e = env(&[
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_JOB_NODELIST", "n[1-2]"),
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "n1"),
        ("MASTER_PORT", "29600"),
    ])
    .unwrap();
    assert_eq!(values(&e), (Some(5), Some(8), Some(1), Some("n1:29600".into())));
    assert_eq!(
        env(&[("BENCHKIT_RANK", "1"), ("RANK", "0"), ("WORLD_SIZE", "2")]).unwrap().rank.unwrap().from,
        "BENCHKIT_RANK=1"
    );
}

#[test]
fn contradictions_name_the_variables() {
    let message = |vars: &[(&str, &str)]| env(vars).unwrap_err().to_string();
    let m = message(&[("RANK", "2"), ("WORLD_SIZE", "2")]);
    assert!(m.contains("RANK=2") && m.contains("WORLD_SIZE=2") && m.contains("0 to 1"), "{m}");
    let m = message(&[("RANK", "1")]);
    assert!(m.contains("RANK is set but WORLD_SIZE is not"), "{m}");
    let m = message(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")]);
    assert!(m.contains("SLURM_PROCID=\"x\""), "{m}");
    let m = message(&[("RANK", "0"), ("WORLD_SIZE", "0")]);
    assert!(m.contains("WORLD_SIZE=0"), "{m}");
    let m = message(&[("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "2")]);
    assert!(m.contains("LOCAL_RANK=2") && m.contains("RANK=1"), "{m}");
    let m = message(&[("RANK", "3"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "2"), ("LOCAL_WORLD_SIZE", "2")]);
    assert!(m.contains("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"), "{m}");
    let m = message(&[
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "0"),
    ]);
    assert!(m.contains("OMPI_COMM_WORLD_LOCAL_SIZE=0 gives no processes on this machine"), "{m}");
    let m = message(&[("MASTER_ADDR", "h"), ("MASTER_PORT", "99999")]);
    assert!(m.contains("MASTER_PORT=\"99999\""), "{m}");
    let m = message(&[("SLURM_JOB_NODELIST", "node[a-b]")]);
    assert!(m.contains("SLURM_JOB_NODELIST"), "{m}");
}

#[test]
fn slurm_host_lists_give_their_first_host() {
    assert_eq!(first_host("node01").as_deref(), Some("node01"));
    assert_eq!(first_host("node[01-04]").as_deref(), Some("node01"));
    assert_eq!(first_host("node[7,3-4],gpu[1-2]").as_deref(), Some("node7"));
    assert_eq!(first_host("a,b").as_deref(), Some("a"));
    assert_eq!(first_host("rack[1-2]-n[001-004]").as_deref(), Some("rack1-n001"));
    assert_eq!(first_host("node[a-b]"), None);
    assert_eq!(first_host("node[01"), None);
    assert_eq!(first_host(""), None);
}

#[test]
fn a_launcher_names_itself_over_the_variables_it_borrows() {
    // Ray's driver sets torchrun's variables and names itself.
    let vars = [("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "n1"), ("BENCHKIT_LAUNCHER", "ray")];
    let ray = env(&vars).unwrap();
    assert_eq!((ray.launcher, ray.launcher_name().as_deref()), (Some("torchrun"), Some("ray")));
    assert_eq!(ray.named.unwrap().from, "BENCHKIT_LAUNCHER=ray");
    let slurm = env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")]).unwrap();
    assert_eq!(slurm.launcher_name().as_deref(), Some("slurm"));
    assert_eq!(env(&[]).unwrap().launcher_name(), None);
    for bad in ["Ray", "my launcher", "../x", "1ray", &"r".repeat(33)] {
        let m = env(&[("BENCHKIT_LAUNCHER", bad)]).unwrap_err().to_string();
        assert!(m.contains(&format!("BENCHKIT_LAUNCHER={bad:?}")) && m.contains("lowercase letters"), "{m}");
    }
}

/// Each launcher's count of processes on this machine; an outer
/// launcher's count is not checked against an inner one's local rank.
#[test]
fn the_processes_on_this_machine_are_read_from_each_launcher() {
    let local = |vars: &[(&str, &str)]| env(vars).unwrap().local_world.map(|w| (w.value, w.from));
    assert_eq!(
        local(&[("RANK", "1"), ("WORLD_SIZE", "4"), ("LOCAL_WORLD_SIZE", "2")]),
        Some((2, "LOCAL_WORLD_SIZE=2".into()))
    );
    assert_eq!(local(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "4")]).map(|l| l.0), Some(4));
    assert_eq!(local(&[("MPI_LOCALNRANKS", "3")]).map(|l| l.0), Some(3));
    assert_eq!(local(&[("SLURM_NTASKS_PER_NODE", "8")]).map(|l| l.0), Some(8));
    assert_eq!(local(&[("RANK", "1"), ("WORLD_SIZE", "2")]), None);
    // torchrun (2 on this machine) inside a Slurm job of 1 task per machine.
    let nested =
        env(&[("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "2"), ("SLURM_NTASKS_PER_NODE", "1")]).unwrap();
    assert_eq!(nested.local_world.map(|w| w.value), Some(2), "the inner launcher's count wins");
    let mixed = env(&[("LOCAL_RANK", "3"), ("SLURM_NTASKS_PER_NODE", "1")]).unwrap();
    assert_eq!(
        mixed.local_world.map(|w| w.value),
        Some(1),
        "Slurm's count, not compared with torchrun's rank"
    );
}
