//! The compute kernels (`stencil`, `nbody`): the Rust twin and the device
//! give the same bytes and the same products, whichever side runs; with
//! `--features cuda` on a machine with a GPU, the CUDA kernels give exactly
//! the host twin's bytes (skipped, with a message, without one).

use std::sync::{Arc, mpsc};

use evflow_core::{EmptySource, Process, RunOptions, run};
use evflow_device::*;
use evflow_workloads::{self as synthetic, Tally, Timing};

const EVENTS: u64 = 48;

fn spec(kind: ComputeKind, size: usize) -> ComputeDevice {
    ComputeDevice {
        kind,
        size,
        host: true,
        device_cost_s: 0.0,
    }
}

/// `gen` → `work` (compute module) → analyzer `sum`.
fn job(ctx: &DeviceContext, spec: ComputeDevice) -> (Process, Tally) {
    let mut p = Process::new("kernels");
    p.set_source(EmptySource::new(EVENTS));
    p.add(synthetic::producer("gen", Timing::zero(), &[], &[""]));
    p.add(compute_device("work", spec, &["gen"], &["", "copy"], ctx).unwrap());
    let (sum, tally) =
        synthetic::analyzer_with_tally("sum", Timing::zero(), &["work:copy", "work"]);
    p.add(sum);
    p.end_path("e", ["sum"]);
    (p, tally)
}

/// Batches of at most 4 events, 8 events in flight.
fn options(split: SplitMode) -> DeviceOptions {
    let mut options = DeviceOptions {
        split,
        events_in_flight: 8,
        host_threads: 2,
        ..DeviceOptions::default()
    };
    options.combine.max_events = 4;
    options
}

fn run_job(ctx: &DeviceContext, spec: ComputeDevice) -> u64 {
    let (p, tally) = job(ctx, spec);
    let opts = RunOptions {
        threads: 2,
        events_in_flight: 8,
        ..RunOptions::default()
    };
    run(p, &opts).unwrap();
    assert_eq!(tally.events(), EVENTS);
    tally.digest()
}

/// The products on the host only, the reference.
fn host_digest(spec: ComputeDevice) -> u64 {
    let ctx = DeviceContext::host_only(DeviceOptions::default());
    let digest = run_job(&ctx, spec);
    assert_eq!(ctx.reports()[0].host_calls, EVENTS);
    digest
}

const CASES: [(ComputeKind, usize); 4] = [
    (ComputeKind::Stencil, 1),
    (ComputeKind::Stencil, 1000),
    (ComputeKind::Nbody, 1),
    (ComputeKind::Nbody, 70),
];

#[test]
fn products_are_the_same_on_the_emulated_device() {
    for (kind, size) in CASES {
        let reference = host_digest(spec(kind, size));
        for split in [
            SplitMode::Fixed(0.0),
            SplitMode::Fixed(0.35),
            SplitMode::Fixed(1.0),
            SplitMode::Adaptive,
        ] {
            let ctx = DeviceContext::open(
                &DeviceChoice::Emulated(EmulatedConfig::default()),
                options(split),
            )
            .unwrap()
            .0;
            let digest = run_job(&ctx, spec(kind, size));
            assert_eq!(digest, reference, "{kind:?} {size} {split:?}");
            let r = &ctx.reports()[0];
            assert_eq!(r.host_calls + r.device_calls, EVENTS);
            assert_eq!(r.bytes_in, r.device_calls * kind.bytes_in(size) as u64);
            assert_eq!(r.bytes_out, r.device_calls * kind.bytes_out(size) as u64);
            if split == SplitMode::Fixed(1.0) {
                assert_eq!(r.device_calls, EVENTS);
            }
        }
    }
}

#[test]
fn a_device_only_module_needs_a_device_and_sizes_are_checked() {
    let host = DeviceContext::host_only(DeviceOptions::default());
    let device_only = ComputeDevice {
        host: false,
        ..spec(ComputeKind::Nbody, 8)
    };
    let err = compute_device("forces", device_only, &[], &[""], &host)
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("'forces' has no host implementation")
    );
    let err = compute_device("forces", spec(ComputeKind::Nbody, 0), &[], &[""], &host)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("size must be between 1 and 16384 for kernel 'nbody' (got 0)"),
        "{err}"
    );
}

/// A batch of `sizes.len()` invocations of one kernel, inputs generated as
/// a module generates them.
fn batch(kind: ComputeKind, size: usize, items: usize) -> Launch {
    let mut input = LaunchInput::default();
    let mut out_offsets = vec![0];
    for i in 0..items {
        let mut piece = Vec::new();
        generate(kind, size, 1000 + i as u64, &mut piece);
        input.push(piece);
        out_offsets.push((i + 1) * kind.bytes_out(size));
    }
    Launch {
        module: "m".into(),
        kernel: Arc::new(ComputeKernel::new(kind, size)),
        input,
        out_offsets,
        work_s: 0.0,
    }
}

/// The twin, one invocation at a time.
fn twin(launch: &Launch, kind: ComputeKind) -> Vec<u8> {
    let mut out = vec![0u8; launch.bytes_out()];
    for i in 0..launch.items() {
        let input = &launch.input.pieces()[i];
        let output = &mut out[launch.out_offsets[i]..launch.out_offsets[i + 1]];
        match kind {
            ComputeKind::Stencil => stencil(input, output).unwrap(),
            ComputeKind::Nbody => nbody(input, output).unwrap(),
        }
    }
    out
}

fn device_bytes(device: &dyn Device, launch: Launch) -> Result<LaunchOutput, DeviceError> {
    device.prepare(launch.kernel.as_ref())?;
    let (tx, rx) = mpsc::channel();
    device.submit(launch, Box::new(move |r| tx.send(r).unwrap()));
    rx.recv().unwrap()
}

#[test]
fn the_emulated_device_computes_the_twins_bytes() {
    let device = EmulatedDevice::new(EmulatedConfig::default());
    for (kind, size) in CASES {
        let launch = batch(kind, size, 5);
        let expected = twin(&launch, kind);
        let out = device_bytes(&device, launch).unwrap();
        assert_eq!(out.output, expected, "{kind:?} {size}");
        // Not all zeros: the kernels computed something (one particle
        // alone feels no force).
        assert!(size == 1 || expected.iter().any(|&b| b != 0));
    }
}

/// GPU 0 with `streams` streams, or `None` (the test is skipped, and says
/// so) without one.
#[cfg(feature = "cuda")]
fn cuda(streams: usize) -> Option<CudaDevice> {
    CudaDevice::open(0, streams)
        .inspect_err(|e| eprintln!("skipped: no CUDA device ({e})"))
        .ok()
}

/// On a machine with a GPU (`cargo test --release --features cuda`): the
/// CUDA kernels give exactly the host twin's bytes, over batches whose
/// threads do not fill whole blocks, and the same products in a job.
#[cfg(feature = "cuda")]
#[test]
fn cuda_kernels_give_the_twins_bytes() {
    let Some(device) = cuda(2) else { return };
    let device = Arc::new(device);
    let cases = [
        (ComputeKind::Stencil, 1, 3),
        (ComputeKind::Stencil, 1000, 7),
        (ComputeKind::Stencil, 65536, 4),
        (ComputeKind::Nbody, 1, 3),
        (ComputeKind::Nbody, 70, 9),
        (ComputeKind::Nbody, 1024, 2),
    ];
    for (kind, size, items) in cases {
        let launch = batch(kind, size, items);
        let expected = twin(&launch, kind);
        let out = device_bytes(device.as_ref(), launch).unwrap();
        let first_difference = out.output.iter().zip(&expected).position(|(a, b)| a != b);
        assert_eq!(first_difference, None, "{kind:?} size {size}");
        assert_eq!(out.output.len(), expected.len());
    }
    let device: Arc<dyn Device> = device;
    for (kind, size) in CASES {
        let reference = host_digest(spec(kind, size));
        for split in [SplitMode::Fixed(1.0), SplitMode::Adaptive] {
            let ctx = DeviceContext::with_device(Some(device.clone()), options(split));
            assert_eq!(
                run_job(&ctx, spec(kind, size)),
                reference,
                "{kind:?} {size} {split:?}"
            );
        }
    }
}

/// With one stream (no overlap) the CUDA device computes the same bytes.
#[cfg(feature = "cuda")]
#[test]
fn cuda_one_stream_gives_the_same_bytes() {
    let Some(device) = cuda(1) else { return };
    assert!(!device.overlaps());
    for (kind, size) in CASES {
        let launch = batch(kind, size, 3);
        let expected = twin(&launch, kind);
        assert_eq!(device_bytes(&device, launch).unwrap().output, expected);
    }
}

/// Three fills of the random-number stream in one launch, of different
/// lengths and seeds (the last wrapping past the end of the stream and not
/// filling its block of GPU threads), and the host's bytes of them.
fn random_fill_batch() -> (Launch, Vec<u8>) {
    let fills = [
        (0u64, 7u64, 1000usize),
        (123_456_789, 42, 1),
        (u64::MAX - 3, 9, 999),
    ];
    let input: LaunchInput = fills
        .iter()
        .map(|&(base, seed, _)| StreamFill::input(base, seed))
        .collect();
    let mut out_offsets = vec![0];
    for &(_, _, n) in &fills {
        out_offsets.push(out_offsets.last().unwrap() + 8 * n);
    }
    let expected: Vec<u8> = fills
        .iter()
        .flat_map(|&(base, seed, n)| {
            (0..n as u64).flat_map(move |k| stream_value(seed, base.wrapping_add(k)).to_le_bytes())
        })
        .collect();
    let launch = Launch {
        module: "random".into(),
        kernel: Arc::new(StreamFill::new(1000)),
        input,
        out_offsets,
        work_s: 0.0,
    };
    (launch, expected)
}

#[test]
fn the_emulated_device_fills_the_random_stream() {
    let (launch, expected) = random_fill_batch();
    let device = EmulatedDevice::new(EmulatedConfig::default());
    assert_eq!(device_bytes(&device, launch).unwrap().output, expected);
}

/// On a machine with a GPU: the random-number stream's CUDA kernel gives
/// exactly the host's numbers, and the double-buffered service on the GPU
/// draws the host's stream.
#[cfg(feature = "cuda")]
#[test]
fn cuda_random_stream_is_the_hosts() {
    let Some(device) = cuda(2) else { return };
    let (launch, expected) = random_fill_batch();
    assert_eq!(device_bytes(&device, launch).unwrap().output, expected);

    let service = RandomService::new(5, 1 << 16, Some(Arc::new(device)), 0.0);
    assert_eq!(service.device_error(), None);
    // Before each round, wait (bounded) until the device has filled the
    // half ahead: a condition, not a guess about timing. Each round then
    // draws that block from the device.
    let (mut numbers, mut position) = (Vec::new(), 0u64);
    for round in 1..=5u64 {
        let t0 = std::time::Instant::now();
        while service.stats().fills < round {
            assert!(
                t0.elapsed().as_secs() < 10,
                "the GPU never filled block {round}"
            );
            std::thread::yield_now();
        }
        let before = service.stats().from_device;
        numbers.clear();
        service.draw(1 << 16, &mut numbers);
        assert_eq!(
            service.stats().from_device - before,
            1 << 16,
            "round {round}"
        );
        for &x in &numbers {
            assert_eq!(x, stream_value(5, position), "number {position}");
            position += 1;
        }
    }
    let stats = service.stats();
    assert_eq!(stats.from_device + stats.from_host, position);
}

/// A fill asked for more numbers than its threads per invocation is an
/// error on the host too (a GPU would leave the rest unwritten).
#[test]
fn a_fill_longer_than_its_lanes_is_refused() {
    let fill = StreamFill::new(4);
    let mut output = vec![0u8; 40];
    let e = fill
        .run(&StreamFill::input(0, 1), &[0, 16], &mut output, &[0, 40])
        .unwrap_err();
    assert!(e.contains("5 numbers asked of a fill of at most 4"), "{e}");
}
