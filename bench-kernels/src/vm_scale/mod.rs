//! stub
#[derive(Debug, clap::Args)]
pub struct VmmArgs {}
pub fn run_vmm(_a: &VmmArgs) -> anyhow::Result<()> {
    Ok(())
}
