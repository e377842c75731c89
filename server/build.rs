//! Copies htmx (installed from the npm registry by `npm ci`) into the build, or an empty
//! file when it is absent, so that the binary serves it without reading the disk at run time.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let source = manifest.join("../node_modules/htmx.org/dist/htmx.min.js");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("htmx.min.js");
    println!("cargo::rerun-if-changed={}", source.display());
    println!("cargo::rerun-if-changed=../templates");
    let contents = std::fs::read_to_string(&source).unwrap_or_default();
    std::fs::write(&out, contents).expect("OUT_DIR is writable");
}
