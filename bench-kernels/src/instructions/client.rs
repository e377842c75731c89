//! Callgrind's client requests to switch instrumentation on and off, so that the count run
//! instruments only its counted regions: process start-up (the dynamic loader's relocations of
//! this large binary) and each kernel's set-up run uninstrumented, which is most of what a
//! count run cost.
//!
//! A client request is valgrind's documented "special instruction" sequence
//! (`valgrind.h`, amd64): four rotations of `rdi` that add up to none, then
//! `xchg rbx, rbx`, with the request's block in `rax` and its default result in `rdx`. On a
//! real CPU it does nothing; valgrind recognises it. Other architectures do without: their
//! count run instruments from the start ([`INSTRUMENTED_FROM_START`]).

/// `VG_USERREQ_TOOL_BASE('C', 'T')`: where callgrind's requests are numbered from.
const CALLGRIND_BASE: usize = ((b'C' as usize) << 24) | ((b'T' as usize) << 16);
/// `VG_USERREQ__START_INSTRUMENTATION`, the fifth of callgrind's requests.
const START_INSTRUMENTATION: usize = CALLGRIND_BASE + 4;
/// `VG_USERREQ__STOP_INSTRUMENTATION`, the sixth.
const STOP_INSTRUMENTATION: usize = CALLGRIND_BASE + 5;

/// Whether the count run must instrument from the start: without client requests, a run
/// started with instrumentation off would count nothing.
pub const INSTRUMENTED_FROM_START: bool = !cfg!(target_arch = "x86_64");

/// Switches callgrind's instrumentation on (from the next instruction on). Outside valgrind,
/// nothing happens.
pub fn start_instrumentation() {
    request(START_INSTRUMENTATION);
}

/// Switches it off again.
pub fn stop_instrumentation() {
    request(STOP_INSTRUMENTATION);
}

#[cfg(target_arch = "x86_64")]
fn request(code: usize) {
    let block: [usize; 6] = [code, 0, 0, 0, 0, 0];
    // SAFETY: the sequence reads `block` through `rax` (valid for its whole length), leaves
    // `rdi` as it was (3 + 13 + 61 + 51 = 128 bits of rotation), and writes only `rdx` and the
    // flags, which are declared; valgrind, when present, writes its result to `rdx`.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") block.as_ptr(),
            inout("rdx") 0usize => _,
            inout("rdi") 0usize => _,
            options(nostack),
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn request(_code: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_valgrind_a_request_does_nothing() {
        let before = [1u64, 2, 3];
        start_instrumentation();
        stop_instrumentation();
        assert_eq!(std::hint::black_box(before), [1, 2, 3]);
        assert_eq!(START_INSTRUMENTATION, 0x4354_0004);
    }
}
