//! The worker's own secrets, blanked where suites could read them: Landlock keeps suites from
//! the worker's memory and files, but Linux (6.18) still lets a process of the same user read
//! another's `/proc/PID/environ` and `/proc/PID/cmdline`. Both show the bytes the process
//! started with, whatever `std::env` holds later, so the values are overwritten in place.

use std::fs;

unsafe extern "C" {
    static environ: *const *mut libc::c_char;
}

/// Blanks the values of the worker's `KYMO_*` variables (its token among them) and of its
/// `--token` argument. Values already read (the command line was parsed) are kept in memory.
pub fn blank_own_secrets() {
    // SAFETY: `environ` is the process's own, null-terminated array; see `blank_values`.
    unsafe { blank_values(environ, b"KYMO_") };
    if let Some(area) = argument_area() {
        // SAFETY: the kernel's record of this process's argument strings, on its own stack.
        let arguments = unsafe { std::slice::from_raw_parts_mut(area.0 as *mut u8, area.1) };
        blank_flag_values(arguments, b"--token");
    }
}

/// Overwrites with NUL bytes the values of the variables in `env` whose names start with
/// `prefix`, in place.
///
/// # Safety
/// `env` must be null or a null-terminated array of NUL-terminated strings that no other
/// thread reads or writes meanwhile.
pub(super) unsafe fn blank_values(env: *const *mut libc::c_char, prefix: &[u8]) {
    if env.is_null() {
        return;
    }
    let mut entry = env;
    // SAFETY: per the contract, every pointer up to the terminating null is a C string.
    unsafe {
        while !(*entry).is_null() {
            let text = *entry;
            let bytes = std::ffi::CStr::from_ptr(text).to_bytes();
            if let Some(equals) = bytes
                .iter()
                .position(|b| *b == b'=')
                .filter(|_| bytes.starts_with(prefix))
            {
                std::ptr::write_bytes(text.add(equals + 1), 0, bytes.len() - equals - 1);
            }
            entry = entry.add(1);
        }
    }
}

/// Start address and length of the process's argument strings (what `/proc/self/cmdline`
/// shows), from fields 48 and 49 of `/proc/self/stat`.
fn argument_area() -> Option<(usize, usize)> {
    area_at_field(48)
}

/// The start address and length of the argument strings and of the environment strings
/// (what `/proc/PID/cmdline` and `/proc/PID/environ` show): a process forked from this one
/// without exec blanks them in its own copy ([`blank_areas`]), so that it shows nothing of the
/// worker.
pub(super) fn text_areas() -> [Option<(usize, usize)>; 2] {
    [area_at_field(48), area_at_field(50)]
}

/// Overwrites `areas` with NUL bytes. Runs between fork and exec: no allocation.
///
/// # Safety
/// Each area must be writable memory of this process that nothing else reads meanwhile
/// (the argument and environment strings of [`text_areas`], in a forked child).
pub(super) unsafe fn blank_areas(areas: &[Option<(usize, usize)>; 2]) {
    for (start, length) in areas.iter().flatten() {
        // SAFETY: per the contract.
        unsafe { std::ptr::write_bytes(*start as *mut u8, 0, *length) };
    }
}

/// The area whose start and end addresses are fields `field` and `field + 1` of
/// `/proc/self/stat`.
fn area_at_field(field: usize) -> Option<(usize, usize)> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields are counted after
    // its closing parenthesis, which starts at field 3.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(field - 3);
    let start: usize = fields.next()?.parse().ok()?;
    let end: usize = fields.next()?.parse().ok()?;
    (start != 0 && end > start).then(|| (start, end - start))
}

/// In a run of NUL-separated arguments, overwrites with NUL bytes the value of `flag`, given
/// as the next argument or after `flag=`.
fn blank_flag_values(arguments: &mut [u8], flag: &[u8]) {
    let mut value_follows = false;
    let mut position = 0;
    while position < arguments.len() {
        let length = arguments[position..]
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(arguments.len() - position);
        let argument = &mut arguments[position..position + length];
        if value_follows {
            argument.fill(0);
            value_follows = false;
        } else if argument == flag {
            value_follows = true;
        } else if argument.starts_with(flag) && argument.get(flag.len()) == Some(&b'=') {
            argument[flag.len() + 1..].fill(0);
        }
        position += length + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn kymo_values_are_blanked_in_place_and_others_kept() {
        let texts = ["HOME=/root", "KYMO_TOKEN=secret", "KYMO_X", "PATH=/bin"];
        let mut owned: Vec<Vec<u8>> = texts
            .iter()
            .map(|t| CString::new(*t).unwrap().into_bytes_with_nul())
            .collect();
        let mut pointers: Vec<*mut libc::c_char> =
            owned.iter_mut().map(|b| b.as_mut_ptr().cast()).collect();
        pointers.push(std::ptr::null_mut());
        // SAFETY: a null-terminated array of C strings owned by this test.
        unsafe { blank_values(pointers.as_ptr(), b"KYMO_") };
        assert_eq!(owned[0], b"HOME=/root\0");
        assert_eq!(owned[1], b"KYMO_TOKEN=\0\0\0\0\0\0\0");
        assert_eq!(owned[2], b"KYMO_X\0");
        assert_eq!(owned[3], b"PATH=/bin\0");
    }

    #[test]
    fn token_arguments_are_blanked_in_both_spellings_and_others_kept() {
        let mut arguments =
            b"kymo\0worker\0--token\0kymo_w_1\0--tokens\0x\0--token=kymo_w_2\0--token\0".to_vec();
        blank_flag_values(&mut arguments, b"--token");
        assert_eq!(
            arguments,
            b"kymo\0worker\0--token\0\0\0\0\0\0\0\0\0\0--tokens\0x\0--token=\0\0\0\0\0\0\0\0\0--token\0"
        );
        let mut unterminated = b"--token\0abc".to_vec();
        blank_flag_values(&mut unterminated, b"--token");
        assert_eq!(unterminated, b"--token\0\0\0\0");
    }

    #[test]
    fn this_process_finds_its_own_argument_area() {
        let (start, length) = argument_area().expect("Linux shows arg_start and arg_end");
        // SAFETY: the area was just read from the kernel's record of this process.
        let area = unsafe { std::slice::from_raw_parts(start as *const u8, length) };
        let first = std::env::args().next().unwrap();
        assert!(area.starts_with(first.as_bytes()), "{first}");
    }
}
