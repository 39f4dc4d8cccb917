//! The random-number service: the same stream whatever side made it, from
//! many threads at once, with a fast, a slow and no device.

use std::sync::Arc;

use evflow_device::*;

fn service(device: Option<EmulatedConfig>, cost: f64) -> RandomService {
    let device = device.map(|c| Arc::new(EmulatedDevice::new(c)) as Arc<dyn Device>);
    RandomService::new(7, 4096, device, cost)
}

#[test]
fn concurrent_draws_share_out_exactly_the_stream() {
    let fast = EmulatedConfig::default();
    for (s, device_made_some) in [
        (service(Some(fast), 0.0), true),
        (service(None, 0.0), false),
        // A device so slow that the host computes (nearly) everything.
        (service(Some(EmulatedConfig::default()), 1.0), false),
    ] {
        let per_thread: Vec<Vec<u64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let s = s.clone();
                    scope.spawn(move || {
                        let mut got = Vec::new();
                        for i in 0..200 {
                            s.draw(37 + (i * t) % 300, &mut got);
                            if i % 50 == 0 {
                                std::thread::yield_now();
                            }
                        }
                        got
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<u64> = per_thread.into_iter().flatten().collect();
        let n = all.len() as u64;
        all.sort_unstable();
        let mut expected: Vec<u64> = (0..n).map(|i| stream_value(7, i)).collect();
        expected.sort_unstable();
        assert_eq!(all, expected);
        let stats = s.stats();
        assert_eq!(stats.from_device + stats.from_host, n);
        if !device_made_some {
            assert!(stats.from_host > 0);
        }
    }
}

#[test]
fn once_the_device_filled_a_half_draws_come_from_it() {
    let s = service(Some(EmulatedConfig::default()), 0.0);
    let mut got = Vec::new();
    for round in 1..=5u64 {
        // Wait (bounded) until the device has filled the half ahead: a
        // condition, not a guess about timing.
        let t0 = std::time::Instant::now();
        while s.stats().fills < round {
            assert!(
                t0.elapsed().as_secs() < 10,
                "the device never filled block {round}"
            );
            std::thread::yield_now();
        }
        let before = s.stats().from_device;
        s.draw(4096, &mut got);
        assert_eq!(s.stats().from_device - before, 4096, "round {round}");
    }
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &x)| x == stream_value(7, i as u64))
    );
}

/// A device that cannot compile the fill kernel is not used: the service
/// says why, naming the device and the kernel, and the host draws the same
/// stream.
#[test]
fn a_device_that_cannot_take_the_fill_kernel_is_named_and_left_out() {
    let config = EmulatedConfig {
        faults: Faults {
            compile: vec!["prng_fill".into()],
            ..Faults::default()
        },
        ..EmulatedConfig::default()
    };
    let device: Arc<dyn Device> = Arc::new(EmulatedDevice::new(config));
    let s = RandomService::new(7, 4096, Some(device), 0.0);
    let error = s.device_error().expect("the compile fault is reported");
    assert!(error.contains("prng_fill"), "{error}");
    let mut got = Vec::new();
    s.draw(10_000, &mut got);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &x)| x == stream_value(7, i as u64))
    );
    let stats = s.stats();
    assert_eq!(
        (stats.from_host, stats.from_device, stats.fills),
        (10_000, 0, 0)
    );
}
