//! The `kymo-kernels` binary as a suite runs it.

mod instructions;
mod vm_scale;
