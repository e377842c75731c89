//! This machine's hardware specs (which make its fingerprint) and environment (Linux).
//!
//! Parsing is kept in pure functions over the text of `/proc` files, tested on samples from
//! other machines; the `detect_*` functions only read the files and run the few commands.

use std::path::Path;
use std::process::{Command, Stdio};

use kymo_core::model::{Environment, MachineSpecs};

/// What `/proc/cpuinfo` says about the processors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuInfo {
    /// `model name`, or the best substitute the architecture offers; `unknown` if none.
    pub model: String,
    /// Online logical CPUs (one `processor` block each).
    pub logical_cores: u32,
    /// Distinct (`physical id`, `core id`) pairs; equal to `logical_cores` where the
    /// topology is not reported.
    pub physical_cores: u32,
    /// Whether the CPU flags include `hypervisor` (x86 guests).
    pub hypervisor: bool,
}

/// Parses the text of `/proc/cpuinfo`.
pub fn parse_cpuinfo(text: &str) -> CpuInfo {
    let mut logical = 0u32;
    let mut pairs = std::collections::BTreeSet::new();
    let mut topology_complete = true;
    let mut hypervisor = false;
    let mut first_value = std::collections::HashMap::<&str, &str>::new();

    // Blocks are separated by blank lines; some kernels (arm) add a global block at the end.
    for block in text.split("\n\n") {
        let fields: Vec<(&str, &str)> = block
            .lines()
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        for (k, v) in &fields {
            first_value.entry(k).or_insert(v);
        }
        if get("flags").is_some_and(|flags| flags.split_whitespace().any(|f| f == "hypervisor")) {
            hypervisor = true;
        }
        if get("processor").is_none() {
            continue;
        }
        logical += 1;
        match (get("physical id"), get("core id")) {
            (Some(package), Some(core)) => {
                pairs.insert((package.to_owned(), core.to_owned()));
            }
            _ => topology_complete = false,
        }
    }

    let physical = if topology_complete && !pairs.is_empty() {
        pairs.len() as u32
    } else {
        logical
    };
    CpuInfo {
        model: cpu_model(&first_value),
        logical_cores: logical,
        physical_cores: physical,
        hypervisor,
    }
}

fn cpu_model(fields: &std::collections::HashMap<&str, &str>) -> String {
    // x86 and arm32 say `model name`; POWER says `cpu`; RISC-V `uarch`; MIPS `cpu model`;
    // arm64 only gives implementer and part numbers.
    let named = ["model name", "cpu model", "uarch", "cpu", "Hardware"]
        .iter()
        .filter_map(|key| fields.get(key))
        .find(|value| !value.is_empty());
    if let Some(name) = named {
        return name.to_string();
    }
    match (fields.get("CPU implementer"), fields.get("CPU part")) {
        (Some(implementer), Some(part)) => arm_part_name(implementer, part)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("ARM implementer {implementer} part {part}")),
        _ => "unknown".to_owned(),
    }
}

/// Names of the arm64 cores that benchmark machines commonly have (cloud and server parts).
fn arm_part_name(implementer: &str, part: &str) -> Option<&'static str> {
    let name = match (
        implementer.to_ascii_lowercase().as_str(),
        part.to_ascii_lowercase().as_str(),
    ) {
        ("0x41", "0xd08") => "ARM Cortex-A72",
        ("0x41", "0xd0b") => "ARM Cortex-A76",
        ("0x41", "0xd0c") => "ARM Neoverse-N1",
        ("0x41", "0xd40") => "ARM Neoverse-V1",
        ("0x41", "0xd49") => "ARM Neoverse-N2",
        ("0x41", "0xd4f") => "ARM Neoverse-V2",
        ("0xc0", "0xac3") => "Ampere AmpereOne",
        _ => return None,
    };
    Some(name)
}

/// Parses `MemTotal` from the text of `/proc/meminfo`, in whole GiB rounded to nearest.
pub fn parse_meminfo(text: &str) -> Option<u32> {
    let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let amount: u64 = words.next()?.parse().ok()?;
    let bytes = match words.next() {
        Some("kB") | None => amount.checked_mul(1024)?,
        Some(_) => return None,
    };
    let gib = 1u64 << 30;
    u32::try_from((bytes + gib / 2) / gib).ok()
}

/// The virtualization kind: what `systemd-detect-virt` said if it ran, else `vm` for a
/// hypervisor flag, `docker` for a `/.dockerenv`, else `none`.
pub fn classify_virtualization(
    detect_virt: Option<&str>,
    hypervisor: bool,
    dockerenv: bool,
) -> String {
    let detected = detect_virt
        .and_then(|out| out.lines().next())
        .map(str::trim)
        .filter(|kind| !kind.is_empty() && kind.len() <= 32)
        .filter(|kind| {
            kind.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    match detected {
        Some(kind) => kind.to_owned(),
        None if hypervisor => "vm".to_owned(),
        None if dockerenv => "docker".to_owned(),
        None => "none".to_owned(),
    }
}

/// Detects this machine's hardware specs.
pub fn detect_specs() -> MachineSpecs {
    let cpu = parse_cpuinfo(&read_trimmed("/proc/cpuinfo").unwrap_or_default());
    let logical = if cpu.logical_cores > 0 {
        cpu.logical_cores
    } else {
        online_cpus_from_sysconf()
    };
    let physical = if cpu.physical_cores > 0 {
        cpu.physical_cores.min(logical)
    } else {
        logical
    };
    let memory_gib = parse_meminfo(&read_trimmed("/proc/meminfo").unwrap_or_default()).unwrap_or(0);
    let detect_virt = command_stdout("systemd-detect-virt", &[]);
    let virtualization = classify_virtualization(
        detect_virt.as_deref(),
        cpu.hypervisor,
        Path::new("/.dockerenv").exists(),
    );
    MachineSpecs {
        cpu_model: cpu.model,
        logical_cores: logical,
        physical_cores: physical,
        memory_gib,
        arch: std::env::consts::ARCH.to_owned(),
        virtualization,
    }
}

/// Detects the environment recorded with each run. Never fails: a fact that cannot be read
/// is `unknown` (the toolchain is empty when there is no `rustc`).
pub fn detect_environment() -> Environment {
    let kernel = read_trimmed("/proc/sys/kernel/osrelease")
        .or_else(uname_release)
        .unwrap_or_else(|| "unknown".to_owned());
    let governor = read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        .unwrap_or_else(|| "unknown".to_owned());
    Environment {
        kernel,
        toolchain: command_stdout("rustc", &["--version"]).unwrap_or_default(),
        governor,
        hostname: hostname().unwrap_or_else(|| "unknown".to_owned()),
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The trimmed stdout of a command, whatever its exit status (`systemd-detect-virt` exits 1
/// when it prints `none`); `None` if it cannot run or prints nothing.
fn command_stdout(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn online_cpus_from_sysconf() -> u32 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

fn c_chars_to_string(chars: &[libc::c_char]) -> Option<String> {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn uname_release() -> Option<String> {
    // SAFETY: utsname is plain data; uname fills it in.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid, writable utsname.
    if unsafe { libc::uname(&mut name) } != 0 {
        return None;
    }
    c_chars_to_string(&name.release)
}

fn hostname() -> Option<String> {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: the buffer is writable for its whole length; the last byte stays NUL.
    if unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len() - 1) } != 0 {
        return None;
    }
    c_chars_to_string(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sockets, two cores each, two threads per core: 8 logical, 4 physical.
    fn two_socket_x86() -> String {
        let mut text = String::new();
        for processor in 0..8 {
            let (package, core) = (processor / 4, (processor / 2) % 2);
            text.push_str(&format!(
                "processor\t: {processor}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
                 model name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\ncpu MHz\t\t: 2500.000\n\
                 physical id\t: {package}\nsiblings\t: 4\ncore id\t\t: {core}\ncpu cores\t: 2\n\
                 flags\t\t: fpu vme de pse tsc msr ht avx2\n\n"
            ));
        }
        text
    }

    const GRAVITON2: &str = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm\n\
        CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n\
        CPU revision\t: 1\n\nprocessor\t: 1\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm\n\
        CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\n\
        CPU revision\t: 1\n\n";

    const KVM_GUEST: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\n\
        model name\t: AMD EPYC 7B13\nphysical id\t: 0\ncore id\t\t: 0\n\
        flags\t\t: fpu sse2 hypervisor lahf_lm\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\n\
        model name\t: AMD EPYC 7B13\nphysical id\t: 0\ncore id\t\t: 0\n\
        flags\t\t: fpu sse2 hypervisor lahf_lm\n";

    #[test]
    fn a_two_socket_x86_counts_threads_and_distinct_cores() {
        let cpu = parse_cpuinfo(&two_socket_x86());
        assert_eq!(cpu.model, "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz");
        assert_eq!((cpu.logical_cores, cpu.physical_cores), (8, 4));
        assert!(!cpu.hypervisor);
    }

    #[test]
    fn an_arm_machine_without_model_name_is_named_by_its_part() {
        let cpu = parse_cpuinfo(GRAVITON2);
        assert_eq!(cpu.model, "ARM Neoverse-N1");
        assert_eq!((cpu.logical_cores, cpu.physical_cores), (2, 2));
        let unknown_part = GRAVITON2.replace("0xd0c", "0xfff");
        assert_eq!(
            parse_cpuinfo(&unknown_part).model,
            "ARM implementer 0x41 part 0xfff"
        );
        let pi = "processor\t: 0\nmodel name\t: ARMv7 Processor rev 3 (v7l)\n\n\
                  Hardware\t: BCM2711\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n";
        assert_eq!(parse_cpuinfo(pi).model, "ARMv7 Processor rev 3 (v7l)");
        let power = "processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n";
        assert_eq!(
            parse_cpuinfo(power).model,
            "POWER9 (raw), altivec supported"
        );
    }

    #[test]
    fn a_vm_guest_is_flagged_and_its_shared_core_counted_once() {
        let cpu = parse_cpuinfo(KVM_GUEST);
        assert!(cpu.hypervisor);
        assert_eq!(cpu.model, "AMD EPYC 7B13");
        assert_eq!((cpu.logical_cores, cpu.physical_cores), (2, 1));
    }

    #[test]
    fn partial_topology_falls_back_to_logical_and_empty_text_to_unknown() {
        let partial = KVM_GUEST.replacen("core id\t\t: 0\n", "", 1);
        assert_eq!(parse_cpuinfo(&partial).physical_cores, 2);
        let empty = parse_cpuinfo("");
        assert_eq!(empty.model, "unknown");
        assert_eq!((empty.logical_cores, empty.physical_cores), (0, 0));
    }

    #[test]
    fn memory_rounds_to_the_nearest_gib() {
        assert_eq!(
            parse_meminfo("MemTotal:       24684096 kB\nMemFree: 1 kB\n"),
            Some(24)
        );
        assert_eq!(
            parse_meminfo("MemFree: 1 kB\nMemTotal: 16252928 kB\n"),
            Some(16)
        );
        assert_eq!(
            parse_meminfo("MemTotal: 1572864 kB\n"),
            Some(2),
            "1.5 GiB rounds up"
        );
        assert_eq!(parse_meminfo("MemTotal: 1572863 kB\n"), Some(1));
        for bad in [
            "",
            "MemFree: 1 kB",
            "MemTotal: lots kB",
            "MemTotal: 1 MB",
            "MemTotal:",
        ] {
            assert_eq!(parse_meminfo(bad), None, "{bad:?}");
        }
        assert_eq!(parse_meminfo(&format!("MemTotal: {} kB", u64::MAX)), None);
    }

    #[test]
    fn virtualization_prefers_systemd_then_flags_then_dockerenv() {
        assert_eq!(classify_virtualization(Some("kvm\n"), false, true), "kvm");
        assert_eq!(classify_virtualization(Some("none"), true, true), "none");
        assert_eq!(classify_virtualization(None, true, true), "vm");
        assert_eq!(classify_virtualization(None, false, true), "docker");
        assert_eq!(classify_virtualization(None, false, false), "none");
        assert_eq!(
            classify_virtualization(Some("weird output!"), false, false),
            "none"
        );
        assert_eq!(classify_virtualization(Some(""), true, false), "vm");
    }

    #[test]
    fn this_machine_is_detected_consistently() {
        let specs = detect_specs();
        assert!(specs.logical_cores >= 1);
        assert!((1..=specs.logical_cores).contains(&specs.physical_cores));
        assert!(specs.memory_gib >= 1);
        assert_eq!(specs.arch, std::env::consts::ARCH);
        assert!(!specs.cpu_model.is_empty() && !specs.virtualization.is_empty());
        assert_eq!(specs.fingerprint(), detect_specs().fingerprint());
        let env = detect_environment();
        assert!(!env.kernel.is_empty() && env.kernel != "unknown");
        assert!(!env.hostname.is_empty() && !env.governor.is_empty());
        assert!(env.toolchain.is_empty() || env.toolchain.starts_with("rustc "));
    }
}
