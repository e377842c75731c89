//! `#[bench]` functions run only to produce libtest's `cargo bench` golden output (see
//! regenerate.sh, which needs RUSTC_BOOTSTRAP=1 on a stable toolchain for `feature(test)`).
#![feature(test)]

extern crate test;

use test::{Bencher, black_box};

#[bench]
fn sum_100(b: &mut Bencher) {
    b.iter(|| (0..black_box(100u64)).map(|x| x * x).sum::<u64>());
}

#[bench]
fn copy_4k(b: &mut Bencher) {
    let data = vec![1u8; 4096];
    b.bytes = data.len() as u64;
    b.iter(|| black_box(data.clone()));
}

#[bench]
fn alloc_small(b: &mut Bencher) {
    b.iter(|| black_box(vec![0u64; 8]));
}

#[bench]
#[ignore]
fn ignored_bench(b: &mut Bencher) {
    b.iter(|| 1);
}

#[test]
fn a_plain_test() {
    assert_eq!(1 + 1, 2);
}
