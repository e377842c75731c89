//! `sqlx::migrate!` embeds the migrations when this crate compiles; a migration added without a
//! change to the crate's sources would otherwise be missing from the build.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
