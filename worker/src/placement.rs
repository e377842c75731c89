//! Where a side's programs sit in memory, drawn afresh for every round of a comparison.
//!
//! Two byte-identical builds of one commit, measured alternately, once differed by a steady
//! +2.7 % over a whole comparison (and another time by −1.7 %) while 19 other comparisons of
//! the same files showed nothing (docs/VERDICTS.md, "Third pass"). More rounds cannot remove
//! such an offset, since every round sees it; what stays the same from round to round is where
//! the kernel keeps each executable's pages: which physical pages hold it and in what folio
//! sizes, fixed from the moment it was written or first read until memory pressure evicts it.
//! Layout effects of that kind are well documented (Mytkowicz et al., "Producing wrong data
//! without doing anything obviously wrong", ASPLOS 2009; Curtsinger and Berger, "Stabilizer",
//! ASPLOS 2013). So before each side runs in a round, its built programs are dropped from the
//! page cache and read back: each round runs them from new pages, and an offset that belonged
//! to one placement becomes round-to-round noise, which the verdict measures and allows for.

use std::fs::File;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Most bytes refreshed a side a round: a suite's programs, not every test binary of a large
/// debug build (reading them back costs a disk read each round).
const MOST_BYTES: u64 = 512 << 20;

/// What [`refresh`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refreshed {
    pub files: usize,
    pub bytes: u64,
}

/// A program found by [`programs`]: its path and its size when found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub path: PathBuf,
    pub bytes: u64,
}

/// The programs built under `dir` (executables and shared libraries, but not build scripts or
/// incremental state), at most [`MOST_BYTES`] of them. The walk does not follow symbolic
/// links; a missing `dir` has none. Found once a comparison, after its builds.
pub fn programs(dir: &Path) -> io::Result<Vec<Program>> {
    let mut found = Vec::new();
    let mut bytes = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        for entry in entries {
            let entry = entry?;
            let kind = entry.file_type()?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                if name != "build" && name != "incremental" && !name.starts_with('.') {
                    pending.push(entry.path());
                }
                continue;
            }
            if !kind.is_file() {
                continue;
            }
            let meta = entry.metadata()?;
            let program = meta.permissions().mode() & 0o111 != 0 || is_shared_library(&name);
            if program && bytes + meta.len() <= MOST_BYTES {
                bytes += meta.len();
                found.push(Program {
                    path: entry.path(),
                    bytes: meta.len(),
                });
            }
        }
    }
    Ok(found)
}

/// Drops `programs` from the page cache and reads them back, so that they sit in pages of
/// their own this round. Files that cannot be opened (gone since) are skipped.
pub fn refresh(programs: &[Program]) -> io::Result<Refreshed> {
    let mut done = Refreshed::default();
    for program in programs {
        if let Ok(file) = File::open(&program.path) {
            reread(&file)?;
            done.files += 1;
            done.bytes += program.bytes;
        }
    }
    Ok(done)
}

fn is_shared_library(name: &str) -> bool {
    name.ends_with(".so") || name.contains(".so.")
}

/// Drops a file's pages from the page cache (written back first, since dirty pages stay) and
/// reads it whole, into pages allocated now.
fn reread(file: &File) -> io::Result<()> {
    file.sync_data()?;
    drop_cached(file)?;
    io::copy(&mut &*file, &mut io::sink())?;
    Ok(())
}

fn drop_cached(file: &File) -> io::Result<()> {
    // SAFETY: a valid open descriptor; the call reads no memory of ours.
    let err = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    match err {
        0 => Ok(()),
        err => Err(io::Error::from_raw_os_error(err)),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Pages of `file` in the page cache, by `mincore` over a mapping of it.
    fn resident_pages(file: &File) -> usize {
        let len = file.metadata().unwrap().len() as usize;
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: a read-only shared mapping of an open file, unmapped before returning.
        unsafe {
            let at = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(at, libc::MAP_FAILED);
            let mut cached = vec![0u8; len.div_ceil(page)];
            assert_eq!(libc::mincore(at, len, cached.as_mut_ptr()), 0);
            libc::munmap(at, len);
            cached.iter().filter(|c| **c & 1 == 1).count()
        }
    }

    fn write(path: &Path, bytes: &[u8], mode: u32) {
        let mut file = File::create(path).unwrap();
        file.write_all(bytes).unwrap();
        file.sync_all().unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_dropped_program_leaves_the_page_cache_and_a_refreshed_one_is_back_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("bench-1a2b");
        let bytes: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        write(&program, &bytes, 0o755);
        let file = File::open(&program).unwrap();
        io::copy(&mut &file, &mut io::sink()).unwrap();
        assert!(resident_pages(&file) > 0, "read, so cached");
        drop_cached(&file).unwrap();
        assert_eq!(resident_pages(&file), 0, "dropped from the page cache");

        let done = refresh(&programs(dir.path()).unwrap()).unwrap();
        assert_eq!(
            done,
            Refreshed {
                files: 1,
                bytes: bytes.len() as u64
            }
        );
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        assert_eq!(
            resident_pages(&file),
            bytes.len().div_ceil(page),
            "read back whole"
        );
        assert_eq!(std::fs::read(&program).unwrap(), bytes, "the same bytes");
    }

    #[test]
    fn only_programs_are_refreshed_and_build_scripts_and_links_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        for sub in ["deps", "build/kymo-1a2b", "incremental/x", ".fingerprint"] {
            std::fs::create_dir_all(release.join(sub)).unwrap();
        }
        let files: [(&str, &[u8], u32); 7] = [
            ("deps/bench-1a2b", b"\x7fELF program", 0o755),
            ("deps/libplugin.so", b"\x7fELF library", 0o644),
            ("deps/libdep-1a2b.rlib", b"archive", 0o644),
            ("deps/bench-1a2b.d", b"deps", 0o644),
            ("build/kymo-1a2b/build-script-build", b"x", 0o755),
            ("incremental/x/obj", b"x", 0o755),
            (".fingerprint/x", b"x", 0o755),
        ];
        for (path, bytes, mode) in files {
            write(&release.join(path), bytes, mode);
        }
        std::os::unix::fs::symlink(release.join("deps/bench-1a2b"), release.join("bench")).unwrap();
        let done = refresh(&programs(dir.path()).unwrap()).unwrap();
        assert_eq!(
            done.files, 2,
            "the program and the shared library: {done:?}"
        );
        assert_eq!(
            refresh(&programs(&dir.path().join("missing")).unwrap()).unwrap(),
            Refreshed::default()
        );
    }
}
