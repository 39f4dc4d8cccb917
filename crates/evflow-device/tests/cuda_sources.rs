//! The CUDA sources of the compute kernels and of the random stream's
//! fill, compiled as C++ for the host
//! (the ABI's thread indices emulated by loops, one "thread" at a time, no
//! FMA contraction: `-ffp-contract=off`, as NVRTC's `--fmad=false`), give
//! exactly the Rust twins' bytes. This checks the CUDA code's indexing and
//! operation order without a GPU; skipped, saying so, without a C++
//! compiler.

use std::path::Path;
use std::process::Command;

use evflow_device::{ComputeKernel, ComputeKind, Kernel, StreamFill, generate};

/// Runs `evflow_kernel` over every block and thread of a launch.
const HARNESS: &str = r#"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
struct Dim { unsigned long long x; };
static Dim blockIdx, blockDim, threadIdx;
#define __global__
#define __device__
#include "kernel.cu"
static std::vector<unsigned char> slurp(const char* path) {
    std::vector<unsigned char> bytes;
    FILE* f = fopen(path, "rb");
    for (int c; f && (c = fgetc(f)) != EOF;) bytes.push_back((unsigned char)c);
    if (f) fclose(f);
    return bytes;
}
int main(int argc, char** argv) {
    unsigned long long size = atoll(argv[1]), items = atoll(argv[2]);
    unsigned long long bytes_in = atoll(argv[3]), bytes_out = atoll(argv[4]);
    std::vector<unsigned char> in = slurp(argv[5]), out(items * bytes_out, 0xAB);
    std::vector<unsigned long long> ins, outs;
    for (unsigned long long i = 0; i <= items; ++i) {
        ins.push_back(i * bytes_in);
        outs.push_back(i * bytes_out);
    }
    blockDim.x = 256;
    for (blockIdx.x = 0; blockIdx.x * 256 < items * size; ++blockIdx.x)
        for (threadIdx.x = 0; threadIdx.x < 256; ++threadIdx.x)
            evflow_kernel(in.data(), ins.data(), out.data(), outs.data(), items, size);
    FILE* f = fopen(argv[6], "wb");
    fwrite(out.data(), 1, out.size(), f);
    fclose(f);
    return 0;
}
"#;

/// The harness around `kernel`'s CUDA source, built as `harness-NAME`, or
/// `None` (the test is skipped, and says so) without a C++ compiler.
fn compiled(dir: &Path, name: &str, kernel: &dyn Kernel) -> Option<std::path::PathBuf> {
    let source = kernel.source().unwrap().to_string();
    std::fs::write(dir.join("kernel.cu"), source).unwrap();
    std::fs::write(dir.join("harness.cpp"), HARNESS).unwrap();
    let exe = dir.join(format!("harness-{name}"));
    let status = Command::new("c++")
        .args(["-O2", "-ffp-contract=off", "-fno-fast-math", "-o"])
        .arg(&exe)
        .arg(dir.join("harness.cpp"))
        .status();
    match status {
        Ok(s) if s.success() => Some(exe),
        Ok(s) => panic!("the CUDA source of {name} does not compile as C++: {s}"),
        Err(e) => {
            eprintln!("skipped: no C++ compiler ({e})");
            None
        }
    }
}

/// Runs the harness `exe` over `items` invocations of `input` (each
/// `bytes_in` long, `size` GPU threads each) and returns the output.
fn run_harness(
    dir: &Path,
    exe: &Path,
    (size, items, bytes_in, bytes_out): (usize, usize, usize, usize),
    input: &[u8],
) -> Vec<u8> {
    std::fs::write(dir.join("in.bin"), input).unwrap();
    let status = Command::new(exe)
        .args([size, items, bytes_in, bytes_out].map(|v| v.to_string()))
        .arg(dir.join("in.bin"))
        .arg(dir.join("out.bin"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(dir.join("out.bin")).unwrap()
}

#[test]
fn cuda_sources_compute_the_twins_bytes() {
    let dir = std::env::temp_dir().join(format!("evflow-cuda-sources-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (ComputeKind::Stencil, &[(1, 3), (37, 5), (1000, 3)][..]),
        (ComputeKind::Nbody, &[(1, 3), (70, 4), (300, 2)][..]),
    ];
    for (kind, sizes) in cases {
        let Some(exe) = compiled(&dir, kind.name(), &ComputeKernel::new(kind, 1)) else {
            return;
        };
        for &(size, items) in sizes {
            let kernel = ComputeKernel::new(kind, size);
            let mut input = Vec::new();
            for i in 0..items {
                generate(kind, size, 77 + i as u64, &mut input);
            }
            let (bin, bout) = (kind.bytes_in(size), kind.bytes_out(size));
            let ins: Vec<usize> = (0..=items).map(|i| i * bin).collect();
            let outs: Vec<usize> = (0..=items).map(|i| i * bout).collect();
            let mut expected = vec![0u8; items * bout];
            kernel.run(&input, &ins, &mut expected, &outs).unwrap();
            let got = run_harness(&dir, &exe, (size, items, bin, bout), &input);
            assert!(
                got == expected,
                "{kind:?} size {size}: the C++ run of the CUDA source differs"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_random_streams_cuda_source_computes_the_hosts_numbers() {
    let dir = std::env::temp_dir().join(format!("evflow-cuda-prng-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(exe) = compiled(&dir, "prng_fill", &StreamFill::new(1)) else {
        return;
    };
    // Fills of 1, 300 and 1000 numbers (not whole blocks of 256 threads),
    // one starting near the end of the stream (positions wrap).
    for (numbers, starts) in [
        (1usize, &[(0u64, 1u64)][..]),
        (300, &[(5, 42), (u64::MAX - 10, 7)][..]),
        (1000, &[(1 << 40, 3), (12345, 3), (0, 9)][..]),
    ] {
        let fill = StreamFill::new(numbers);
        let input: Vec<u8> = starts
            .iter()
            .flat_map(|&(base, seed)| StreamFill::input(base, seed))
            .collect();
        let items = starts.len();
        let ins: Vec<usize> = (0..=items).map(|i| i * 16).collect();
        let outs: Vec<usize> = (0..=items).map(|i| i * 8 * numbers).collect();
        let mut expected = vec![0u8; items * 8 * numbers];
        fill.run(&input, &ins, &mut expected, &outs).unwrap();
        let got = run_harness(&dir, &exe, (numbers, items, 16, 8 * numbers), &input);
        assert!(got == expected, "{numbers} numbers: the C++ run differs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
