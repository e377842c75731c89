//! `kymo-kernels`: the benchmark runner; everything lives in the library.

fn main() -> anyhow::Result<()> {
    bench_kernels::run_cli(std::env::args().skip(1).collect())
}
