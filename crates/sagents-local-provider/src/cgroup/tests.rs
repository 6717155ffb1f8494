use super::*;
use sagents_plugin_api::spec::Resources;

#[test]
fn a_spec_that_says_nothing_gets_the_defaults() {
    let d = Defaults::default();
    let b = Bounds::from_resources(&Resources::default(), &d).unwrap();
    assert_eq!(b.pids_max, 512 + LEADER_PROCESSES);
    assert_eq!(b.memory_bytes, 1024 * 1024 * 1024);
    assert_eq!(b.cpu_quota_us, CPU_PERIOD_US);
}

#[test]
fn the_spec_wins_over_the_defaults() {
    let r = Resources {
        max_processes: Some(10),
        memory_mb: Some(64),
        cpu_percent: Some(250),
        ..Resources::default()
    };
    let b = Bounds::from_resources(&r, &Defaults::default()).unwrap();
    assert_eq!(b.pids_max, 10 + LEADER_PROCESSES);
    assert_eq!(b.memory_bytes, 64 << 20);
    assert_eq!(b.cpu_quota_us, 250_000);
    let tiny = Resources {
        cpu_percent: Some(1),
        ..Resources::default()
    };
    assert_eq!(
        Bounds::from_resources(&tiny, &Defaults::default())
            .unwrap()
            .cpu_quota_us,
        1000
    );
}

#[test]
fn impossible_bounds_are_refused() {
    let d = Defaults::default();
    let with = |f: fn(&mut Resources)| {
        let mut r = Resources::default();
        f(&mut r);
        Bounds::from_resources(&r, &d)
    };
    assert_eq!(
        with(|r| r.max_processes = Some(0)),
        Err(BoundsError::Processes)
    );
    assert_eq!(
        with(|r| r.max_processes = Some(u32::MAX)),
        Err(BoundsError::Processes)
    );
    assert_eq!(
        with(|r| r.memory_mb = Some(1)),
        Err(BoundsError::TooLittleMemory)
    );
    assert_eq!(
        with(|r| r.cpu_percent = Some(0)),
        Err(BoundsError::CpuPercent)
    );
    assert_eq!(
        with(|r| r.cpu_percent = Some(u32::MAX)),
        Err(BoundsError::CpuPercent)
    );
}

#[test]
fn each_sandbox_has_its_own_group_per_hierarchy() {
    let cg = Cgroups {
        v2: false,
        parents: vec![
            (Controller::Pids, PathBuf::from("/cg/pids/p")),
            (Controller::Freezer, PathBuf::from("/cg/freezer/p")),
        ],
    };
    let s = cg.sandbox("sbx_1");
    assert_eq!(
        s.dirs(),
        [
            PathBuf::from("/cg/pids/p/sbx_1"),
            PathBuf::from("/cg/freezer/p/sbx_1")
        ]
    );
    assert!(s.can_freeze());
    assert_eq!(cg.missing(), [Controller::Memory, Controller::Cpu]);
    let v2 = Cgroups {
        v2: true,
        parents: Controller::ALL
            .iter()
            .map(|&c| (c, PathBuf::from("/cg/p")))
            .collect(),
    };
    assert_eq!(v2.sandbox("s").dirs(), [PathBuf::from("/cg/p/s")]);
    assert!(v2.missing().is_empty());
}

/// On the cgroup2 hierarchy (even one without controllers, as on hybrid hosts), a group
/// is joined, frozen whole, killed while frozen and removed.
#[test]
fn a_v2_group_freezes_kills_and_goes() {
    let Some(m) = mounts().into_iter().find(|m| m.v2) else {
        eprintln!("no cgroup2 mount here; skipped");
        return;
    };
    let Some(base) = own_group(None).map(|g| under_mount(&m, &g)) else {
        return;
    };
    if !writable(&base)
        || !base.join("cgroup.freeze").exists() && !base.join("cgroup.procs").exists()
    {
        eprintln!("{} is not writable here; skipped", base.display());
        return;
    }
    let shared = base.join(format!("sagents-unit-{}", uuid::Uuid::new_v4().simple()));
    let parent = shared.join("root-hash");
    let cgroups = Cgroups {
        v2: true,
        parents: vec![(Controller::Freezer, parent.clone())],
    };
    let bounds = Bounds::from_resources(&Resources::default(), &Defaults::default()).unwrap();
    let cg = cgroups.create("sbx_unit", &bounds).unwrap();
    let fds = cg.open_procs().unwrap();
    let mut cmd =
        std::process::Command::new(crate::process::system_program("sleep", false).unwrap());
    cmd.arg("30");
    // SAFETY: the closure only calls write(2).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || join(&fds));
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id() as i32;
    assert_eq!(cg.members(), [pid]);
    cg.freeze().unwrap();
    let events = std::fs::read_to_string(cg.dirs()[0].join("cgroup.events")).unwrap();
    assert!(events.contains("frozen 1"), "{events}");
    cg.kill();
    assert!(!child.wait().unwrap().success());
    cg.remove().unwrap();
    assert!(!cg.exists());
    cgroups.remove_parents();
    assert!(!shared.exists());
}
