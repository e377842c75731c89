use super::*;

const MOUNTINFO: &str = "\
24 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
32 25 0:28 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

#[test]
fn cgroup_mounts_are_found_by_type_and_controller() {
    assert_eq!(
        cgroup_mount(MOUNTINFO, Some("pids")),
        Some(PathBuf::from("/sys/fs/cgroup/pids"))
    );
    assert_eq!(
        cgroup_mount(MOUNTINFO, Some("memory")),
        Some(PathBuf::from("/sys/fs/cgroup/memory"))
    );
    assert_eq!(
        cgroup_mount(MOUNTINFO, None),
        Some(PathBuf::from("/sys/fs/cgroup/unified"))
    );
    assert_eq!(cgroup_mount("garbage\n- -\n", Some("pids")), None);
}

#[test]
fn a_v1_hierarchy_is_used_for_its_controller_and_v2_only_when_it_delegates_it() {
    let v1 = "8:pids:/\n4:memory:/svc/abc\n0::/\n";
    let none = |_: &Path| None;
    assert_eq!(
        base_in(v1, MOUNTINFO, Controller::Memory, none),
        Some(CgroupBase {
            dir: "/sys/fs/cgroup/memory/svc/abc".into(),
            version: CgroupVersion::V1
        })
    );
    let v2 = "0::/user.slice/kymo.service\n";
    let v2_mounts = "32 25 0:28 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
    let delegating = |dir: &Path| {
        assert_eq!(dir, Path::new("/sys/fs/cgroup/user.slice/kymo.service"));
        Some("cpu memory pids\n".to_owned())
    };
    assert_eq!(
        base_in(v2, v2_mounts, Controller::Memory, delegating),
        Some(CgroupBase {
            dir: "/sys/fs/cgroup/user.slice/kymo.service".into(),
            version: CgroupVersion::V2
        })
    );
    let pids_only = |_: &Path| Some("pids".to_owned());
    assert_eq!(base_in(v2, v2_mounts, Controller::Memory, pids_only), None);
    // A hybrid machine whose memory controller sits in v1: the unified mount has no memory.
    assert_eq!(
        base_in("0::/\n", MOUNTINFO, Controller::Memory, |_| Some(
            "hugetlb".into()
        )),
        None
    );
    assert_eq!(base_in("garbage", MOUNTINFO, Controller::Pids, none), None);
}

#[test]
fn hit_counts_are_read_from_flat_keyed_files() {
    let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
    assert_eq!(count_in(oom_control, "oom_kill"), 2);
    assert_eq!(count_in(oom_control, "oom"), 0, "a key is a whole word");
    assert_eq!(count_in("max 0\n", "max"), 0);
    assert_eq!(
        count_in("low 0\nhigh 4\nmax 7\noom 1\noom_kill 1\n", "max"),
        7
    );
    assert_eq!(count_in("", "max"), 0);
}

/// The kernel's v2 interface cannot be exercised here when the memory controller is bound to
/// a v1 hierarchy (one controller lives in one hierarchy): this checks the files kymo writes
/// into a v2 directory, in a plain directory standing in for it.
#[test]
fn a_v2_directory_gets_memory_max_and_no_swap_and_shares_one_group_with_pids() {
    let dir = tempfile::tempdir().unwrap();
    let base = CgroupBase {
        dir: dir.path().to_owned(),
        version: CgroupVersion::V2,
    };
    let bases = CgroupBases {
        pids: Some(base.clone()),
        memory: Some(base),
    };
    let cgroups = SuiteCgroups::create(&bases, 64, 32 << 20).unwrap();
    assert_eq!(
        cgroups.groups.len(),
        1,
        "one directory for both controllers"
    );
    let group = &cgroups.groups[0].dir;
    let read = |file: &str| fs::read_to_string(group.join(file)).unwrap();
    assert_eq!(read("pids.max"), "64");
    assert_eq!(read("memory.max"), (32u64 << 20).to_string());
    assert_eq!(read("memory.swap.max"), "0");
    assert_eq!(cgroups.procs_paths().len(), 1);
    fs::write(group.join("memory.events"), "max 3\noom 1\noom_kill 1\n").unwrap();
    assert!(cgroups.hit_memory_limit());
    assert!(!cgroups.hit_process_limit(), "no pids.events: no hit");
    let path = group.clone();
    drop(cgroups);
    // Not a cgroup: the files keep the directory; the kernel removes a real one's.
    assert!(path.exists());
}

/// The real v1 (or delegated v2) memory controller of this machine, where one is writable:
/// a process that allocates past the limit is killed and the group says why.
#[test]
fn a_memory_cgroup_kills_a_process_that_allocates_past_its_limit() {
    let Some(base) = CgroupBases::probe().memory else {
        eprintln!("no writable memory cgroup on this machine: nothing to check");
        return;
    };
    let bases = CgroupBases {
        pids: None,
        memory: Some(base),
    };
    let cgroups = SuiteCgroups::create(&bases, 64, 16 << 20).unwrap();
    let procs = cgroups.procs_paths();
    let mut command = std::process::Command::new("sh");
    command.args(["-c", "awk 'BEGIN { s = \"x\"; while (1) s = s s }'"]);
    // SAFETY: join_cgroup makes raw system calls only.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            procs.iter().try_for_each(join_cgroup)
        });
    }
    let status = command.status().unwrap();
    assert!(!status.success());
    assert!(cgroups.hit_memory_limit(), "{status:?}");
}

/// A worker killed in the middle of a job leaves its command's cgroups behind; the next worker
/// to start removes those of dead workers, with what still runs in them, and keeps the others.
#[test]
fn cgroups_left_by_a_dead_worker_are_removed_with_their_processes() {
    let Some(base) = cgroup_base(Controller::Pids).filter(|b| {
        let bases = CgroupBases::only(Controller::Pids, b.clone());
        SuiteCgroups::create(&bases, 64, 0).is_ok()
    }) else {
        eprintln!("no writable pids cgroup on this machine: nothing to check");
        return;
    };
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let left = base.dir.join(format!("kymo-suite-{dead_pid}-0"));
    let alive = base
        .dir
        .join(format!("kymo-suite-{}-999999", std::process::id()));
    fs::create_dir(&left).unwrap();
    fs::create_dir(&alive).unwrap();
    let procs = CString::new(left.join("cgroup.procs").as_os_str().as_bytes()).unwrap();
    let mut orphan = std::process::Command::new("sleep");
    orphan.arg("600");
    // SAFETY: join_cgroup makes raw system calls only.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut orphan, move || join_cgroup(&procs));
    }
    let mut orphan = orphan.spawn().unwrap();

    remove_leftovers(&base.dir);
    let status = orphan.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
    assert!(!left.exists(), "the dead worker's cgroup is gone");
    assert!(alive.exists(), "a live worker's cgroup stays");
    fs::remove_dir(&alive).unwrap();
}
