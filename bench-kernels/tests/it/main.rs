//! The `kymo-kernels` binary as a suite runs it.

mod vm_scale;
