//! `kymo-kernels vm-scale --json`: real VMMs (KVM where this machine has it, the process
//! fallback otherwise), their memory read from /proc, printed as kymo JSON.

use std::process::Command;

use serde_json::Value;

fn vm_scale(args: &[&str]) -> (Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kymo-kernels"))
        .arg("vm-scale")
        .args([
            "--json",
            "--duration",
            "0.4",
            "--tick-ms",
            "20",
            "--stagger-ms",
            "5",
            "--sample-ms",
            "10",
        ])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    });
    (json, stderr)
}

fn metric<'a>(bench: &'a Value, name: &str) -> &'a Value {
    bench["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no metric {name} in {bench}"))
}

fn median(metric: &Value) -> f64 {
    let mut samples: Vec<f64> = metric["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

#[test]
fn one_benchmark_per_count_with_memory_in_bytes() {
    let (json, _) = vm_scale(&["--vms", "1 2", "--mode", "process"]);
    let benches = json["benchmarks"].as_array().unwrap();
    let names: Vec<&str> = benches
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["vm_scale/vms_1", "vm_scale/vms_2"]);
    let two = &benches[1];
    assert_eq!(two["params"]["mode"], "process");
    assert_eq!(two["params"]["tick_ms"], "20");
    assert_eq!(two["variant"]["seconds_tier"], "hour");
    assert_eq!(metric(two, "vms_succeeded")["value"], 2.0);
    assert_eq!(metric(two, "extra_processes")["value"], 0.0);
    for name in [
        "peak_rss_total",
        "rss_per_vm",
        "store_per_vm",
        "store_disk_per_vm",
    ] {
        assert_eq!(metric(two, name)["unit"], "B", "{name}");
        assert_eq!(metric(two, name)["direction"], "lower", "{name}");
    }
    let per_vm = median(metric(two, "rss_per_vm"));
    assert!((1e6..64e6).contains(&per_vm), "{per_vm} B per VM");
    // 16 series x (3,600 + 600 + 240) slots of 16 bytes, plus headers: rondo's 1.1 MB.
    let store = median(metric(two, "store_per_vm"));
    assert!((1.10e6..1.20e6).contains(&store), "{store} B");
    assert!(
        median(metric(two, "store_disk_per_vm")) < store,
        "the store is sparse"
    );
    let total = metric(two, "peak_rss_total")["value"].as_f64().unwrap();
    assert!(
        total >= per_vm,
        "two VMs ran at once: {total} B in all, {per_vm} B each"
    );
    let wall = metric(two, "wall_time")["value"].as_f64().unwrap();
    assert!((0.4..30.0).contains(&wall), "{wall} s");
}

#[test]
fn a_day_of_seconds_costs_each_vm_its_store_in_resident_memory() {
    let (hour, _) = vm_scale(&["--vms", "1", "--seconds-tier", "hour"]);
    let (day, _) = vm_scale(&["--vms", "1", "--seconds-tier", "day"]);
    let rss = |json: &Value| median(metric(&json["benchmarks"][0], "rss_per_vm"));
    let store = |json: &Value| median(metric(&json["benchmarks"][0], "store_per_vm"));
    assert_eq!(day["benchmarks"][0]["variant"]["seconds_tier"], "day");
    assert_eq!(
        day["benchmarks"][0]["params"], hour["benchmarks"][0]["params"],
        "the tier is a variant: both land in one series"
    );
    assert!(
        store(&day) > 15.0 * store(&hour),
        "{} vs {}",
        store(&day),
        store(&hour)
    );
    // Maintenance reads the finer tiers back whole, so they become resident.
    let grew = rss(&day) - rss(&hour);
    assert!(grew > 15e6, "RSS per VM grew by {grew} B only");
}

#[test]
fn kvm_and_process_results_never_share_a_series() {
    let (json, stderr) = vm_scale(&["--vms", "1"]);
    let mode = json["benchmarks"][0]["params"]["mode"]
        .as_str()
        .unwrap()
        .to_owned();
    let kvm_usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    // `auto` says which mode it chose, and chooses KVM wherever /dev/kvm opens.
    assert_eq!(mode, if kvm_usable { "kvm" } else { "process" }, "{stderr}");
    let (process, _) = vm_scale(&["--vms", "1", "--mode", "process"]);
    assert_eq!(process["benchmarks"][0]["params"]["mode"], "process");
}

#[test]
fn a_bad_request_fails_with_a_clear_error_and_no_output() {
    for (args, expected) in [
        (&["--vms", "0"][..], "out of range"),
        (&["--duration=-2"], "--duration -2 is out of range"),
        (&["--tick-ms", "0"], "tick-ms"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kymo-kernels"))
            .arg("vm-scale")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
