//! A minimal VMM: one KVM virtual machine with one vCPU in real mode running a hand
//! assembled guest (listing below). The guest asks the VMM for the current phase through
//! an `in` from port 0x11 and then burns CPU, halts, or does port I/O, so every phase
//! produces real VM exits that the VMM's event loop handles — and records, every tick,
//! into the embedded store.

use std::time::{Duration, Instant};

use kvm_bindings::kvm_userspace_memory_region;
use kvm_ioctls::{Kvm, VcpuExit};
use memmap2::MmapMut;

use super::guest::phase_at;
use super::recorder::{TickCounters, TickRecorder};
use crate::error::{IoContext, KernelError};

const CODE_ADDRESS: usize = 0x1000;
const PORT_PHASE: u16 = 0x11;
const PORT_BURST_DONE: u16 = 0x10;
const PORT_DEVICE: u16 = 0x20;
const PORT_STOP: u16 = 0x12;

/// The guest, 16-bit real mode, loaded at 0x1000:
///
/// ```text
/// 00 top:   in   al, 0x11        ; phase from the VMM
/// 02        cmp  al, 1 / je idle
/// 06        cmp  al, 2 / je io
/// 0a        cmp  al, 3 / je mixed
/// 0e        cmp  al, 4 / je stop
/// 12 cpu:   mov  cx, 0xffff
/// 15 c1:    loop c1              ; CPU burst
/// 17        out  0x10, al        ; burst done
/// 19        jmp  top
/// 1b idle:  hlt                  ; the VMM sleeps until the next tick
/// 1c        jmp  top
/// 1e io:    mov  cx, 64
/// 21 i1:    out  0x20, al        ; device I/O, one exit each
/// 23        loop i1
/// 25        jmp  top
/// 27 mixed: mov  cx, 0x4000
/// 2a m1:    loop m1
/// 2c        out  0x20, al
/// 2e        jmp  top
/// 30 stop:  out  0x12, al
/// 32        hlt
/// 33        jmp  stop
/// ```
const GUEST_CODE: [u8; 0x35] = [
    0xE4, 0x11, // in al, 0x11
    0x3C, 0x01, 0x74, 0x15, // cmp al, 1; je idle
    0x3C, 0x02, 0x74, 0x14, // cmp al, 2; je io
    0x3C, 0x03, 0x74, 0x19, // cmp al, 3; je mixed
    0x3C, 0x04, 0x74, 0x1E, // cmp al, 4; je stop
    0xB9, 0xFF, 0xFF, // mov cx, 0xffff
    0xE2, 0xFE, // loop $
    0xE6, 0x10, // out 0x10, al
    0xEB, 0xE5, // jmp top
    0xF4, // hlt
    0xEB, 0xE2, // jmp top
    0xB9, 0x40, 0x00, // mov cx, 64
    0xE6, 0x20, // out 0x20, al
    0xE2, 0xFC, // loop i1
    0xEB, 0xD9, // jmp top
    0xB9, 0x00, 0x40, // mov cx, 0x4000
    0xE2, 0xFE, // loop $
    0xE6, 0x20, // out 0x20, al
    0xEB, 0xD0, // jmp top
    0xE6, 0x12, // out 0x12, al
    0xF4, // hlt
    0xEB, 0xFB, // jmp stop
];

fn kvm_error(context: &str, e: kvm_ioctls::Error) -> KernelError {
    KernelError::Io {
        context: context.to_string(),
        source: std::io::Error::from_raw_os_error(e.errno()),
    }
}

/// Whether this process can create a KVM virtual machine.
pub fn usable() -> bool {
    Kvm::new().and_then(|kvm| kvm.create_vm()).is_ok()
}

/// Boots the guest with `memory_bytes` of RAM and runs its workload for `duration`,
/// recording every `tick`. Returns the number of VM exits handled.
pub fn run_guest(
    memory_bytes: usize,
    duration: Duration,
    tick: Duration,
    recorder: &mut TickRecorder,
) -> Result<u64, KernelError> {
    let kvm = Kvm::new().map_err(|e| kvm_error("opening /dev/kvm", e))?;
    let vm = kvm
        .create_vm()
        .map_err(|e| kvm_error("creating the VM", e))?;
    let mut memory = MmapMut::map_anon(memory_bytes.max(CODE_ADDRESS + 4096))
        .io_context("allocating guest memory")?;
    memory[CODE_ADDRESS..CODE_ADDRESS + GUEST_CODE.len()].copy_from_slice(&GUEST_CODE);
    let region = kvm_userspace_memory_region {
        slot: 0,
        guest_phys_addr: 0,
        memory_size: memory.len() as u64,
        userspace_addr: memory.as_mut_ptr() as u64,
        flags: 0,
    };
    // SAFETY: the mapping outlives the VM (both live until the end of this function) and
    // is not otherwise used while the guest runs.
    unsafe { vm.set_user_memory_region(region) }.map_err(|e| kvm_error("guest memory", e))?;
    let mut vcpu = vm
        .create_vcpu(0)
        .map_err(|e| kvm_error("creating the vCPU", e))?;
    let mut sregs = vcpu.get_sregs().map_err(|e| kvm_error("get_sregs", e))?;
    sregs.cs.base = 0;
    sregs.cs.selector = 0;
    vcpu.set_sregs(&sregs)
        .map_err(|e| kvm_error("set_sregs", e))?;
    let mut regs = vcpu.get_regs().map_err(|e| kvm_error("get_regs", e))?;
    regs.rip = CODE_ADDRESS as u64;
    regs.rflags = 2;
    vcpu.set_regs(&regs).map_err(|e| kvm_error("set_regs", e))?;

    let started = Instant::now();
    let mut next_tick = started;
    let mut counters = TickCounters::default();
    loop {
        let now = Instant::now();
        if now >= next_tick {
            recorder.record_tick(&counters)?;
            next_tick += tick;
        }
        let phase = phase_at(now - started, duration);
        counters.phase = phase as u64;
        let entered = Instant::now();
        let exit = vcpu.run().map_err(|e| kvm_error("running the vCPU", e))?;
        counters.run_ns += entered.elapsed().as_nanos() as u64;
        counters.exits_total += 1;
        match exit {
            VcpuExit::IoIn(PORT_PHASE, data) => {
                counters.exits_io_in += 1;
                data.fill(0);
                data[0] = phase as u8;
            }
            VcpuExit::IoOut(PORT_BURST_DONE, _) => {
                counters.exits_io_out += 1;
                counters.cpu_bursts += 1;
            }
            VcpuExit::IoOut(PORT_DEVICE, _) => {
                counters.exits_io_out += 1;
                counters.io_ops += 1;
            }
            VcpuExit::IoOut(PORT_STOP, _) => {
                counters.exits_io_out += 1;
                break;
            }
            VcpuExit::Hlt => {
                counters.exits_hlt += 1;
                let idle = next_tick.saturating_duration_since(Instant::now());
                std::thread::sleep(idle);
                counters.idle_ns += idle.as_nanos() as u64;
            }
            other => {
                return Err(KernelError::Corrupt(format!(
                    "unexpected VM exit {other:?}"
                )));
            }
        }
    }
    recorder.record_tick(&counters)?;
    Ok(counters.exits_total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_guest_goes_through_every_phase_when_kvm_is_usable() {
        if !usable() {
            // Nothing to boot on this machine; the fallback has its own test.
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut recorder = TickRecorder::create(&dir.path().join("vm.store")).unwrap();
        let exits = run_guest(
            1 << 20,
            Duration::from_millis(400),
            Duration::from_millis(50),
            &mut recorder,
        )
        .unwrap();
        // How many ticks land in 400 ms depends on the machine's load (8 exits were seen
        // beside a full test run on two cores): the guest must tick and exit, not keep a pace.
        assert!(exits > 2, "{exits}");
        assert!(recorder.ticks() >= 2, "{}", recorder.ticks());
    }
}
