//! The emulated device's engines: overlap of successive launches is shown
//! by kernels that block until another launch reached a given stage, so the
//! checks hold whatever the timing; a seeded stress test checks that every
//! invocation of every launch comes back exactly once.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use evflow_device::*;

/// A kernel that copies its input, after waiting (at most `patience`) for a
/// signal — the signal is sent by the test when another launch reached a
/// stage. Records whether the signal came.
struct Gated {
    gate: Mutex<Option<Receiver<()>>>,
    got_signal: Arc<Mutex<Option<bool>>>,
}

const PATIENCE: Duration = Duration::from_secs(1);

impl Kernel for Gated {
    fn name(&self) -> &str {
        "gated"
    }
    fn run(&self, i: &[u8], _: &[usize], o: &mut [u8], _: &[usize]) -> Result<(), String> {
        let gate = self.gate.lock().unwrap().take();
        if let Some(gate) = gate {
            let got = gate.recv_timeout(PATIENCE).is_ok();
            *self.got_signal.lock().unwrap() = Some(got);
        }
        o.copy_from_slice(&i[..o.len()]);
        Ok(())
    }
}

struct Copy;
impl Kernel for Copy {
    fn name(&self) -> &str {
        "copy"
    }
    fn run(&self, i: &[u8], _: &[usize], o: &mut [u8], _: &[usize]) -> Result<(), String> {
        o.copy_from_slice(&i[..o.len()]);
        Ok(())
    }
}

fn launch(kernel: Arc<dyn Kernel>, bytes: usize) -> Launch {
    Launch {
        module: "m".into(),
        kernel,
        input: LaunchInput::from((0..bytes).map(|b| b as u8).collect::<Vec<u8>>()),
        out_offsets: vec![0, bytes],
        work_s: 0.0,
    }
}

fn notify(tx: Sender<()>) -> LaunchDone {
    Box::new(move |_| {
        let _ = tx.send(());
    })
}

fn config(overlap: bool) -> EmulatedConfig {
    EmulatedConfig {
        overlap,
        memory_bytes: 1000,
        ..EmulatedConfig::default()
    }
}

/// Launch 0's kernel waits until launch 1 has passed the transfer in
/// (launch 1 is too big for the device: its out-of-memory error is
/// reported at the transfer in, so its callback marks that moment).
fn transfer_in_overlaps_kernel(overlap: bool) -> bool {
    let device = EmulatedDevice::new(config(overlap));
    let (gate_tx, gate_rx) = channel();
    let got = Arc::new(Mutex::new(None));
    let gated = Arc::new(Gated {
        gate: Mutex::new(Some(gate_rx)),
        got_signal: got.clone(),
    });
    let (done0_tx, done0) = channel();
    device.submit(launch(gated, 10), notify(done0_tx));
    device.submit(launch(Arc::new(Copy), 5000), notify(gate_tx));
    done0.recv_timeout(PATIENCE * 5).unwrap();
    got.lock().unwrap().unwrap()
}

/// Writes zeros; records at its start whether a flag was set.
struct Probe {
    flag: Arc<Mutex<bool>>,
    flag_at_start: Arc<Mutex<Option<bool>>>,
}

impl Kernel for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn run(&self, _: &[u8], _: &[usize], o: &mut [u8], _: &[usize]) -> Result<(), String> {
        *self.flag_at_start.lock().unwrap() = Some(*self.flag.lock().unwrap());
        o.fill(0);
        Ok(())
    }
}

/// Whether launch 1's kernel starts before launch 0's long transfer out
/// (0.3 s) has ended.
fn kernel_overlaps_transfer_out(overlap: bool) -> bool {
    let device = EmulatedDevice::new(EmulatedConfig {
        overlap,
        bandwidth_bytes_s: 1e6,
        ..EmulatedConfig::default()
    });
    let landed = Arc::new(Mutex::new(false));
    let at_start = Arc::new(Mutex::new(None));
    let probe = |flag: &Arc<Mutex<bool>>| {
        Arc::new(Probe {
            flag: flag.clone(),
            flag_at_start: at_start.clone(),
        })
    };
    let mut first = launch(probe(&landed), 10);
    first.out_offsets = vec![0, 300_000];
    let set = landed.clone();
    device.submit(first, Box::new(move |_| *set.lock().unwrap() = true));
    let (done1_tx, done1) = channel();
    device.submit(launch(probe(&landed), 10), notify(done1_tx));
    done1.recv_timeout(PATIENCE * 5).unwrap();
    let launch0_had_landed = at_start.lock().unwrap().unwrap();
    !launch0_had_landed
}

#[test]
fn engines_overlap_successive_launches_only_when_asked() {
    assert!(transfer_in_overlaps_kernel(true));
    assert!(kernel_overlaps_transfer_out(true));
    // Without overlap the signal can only come after the kernel gave up.
    assert!(!transfer_in_overlaps_kernel(false));
    assert!(!kernel_overlaps_transfer_out(false));
}

#[test]
fn every_invocation_comes_back_once_with_its_own_bytes() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    for overlap in [true, false] {
        let device = EmulatedDevice::new(EmulatedConfig {
            overlap,
            launch_latency_s: 0.0,
            transfer_latency_s: 0.0,
            bandwidth_bytes_s: 1e12,
            memory_bytes: 4096,
            faults: Faults {
                launches: vec![5, 11],
                ..Faults::default()
            },
            ..EmulatedConfig::default()
        });
        let (tx, rx) = channel();
        let mut expected = Vec::new();
        for l in 0..60u64 {
            let items = rng.gen_range(1..20);
            // Each invocation its own piece, empty ones among them; the
            // reference joins them here, independently of the device.
            let (mut pieces, mut input) = (LaunchInput::default(), Vec::new());
            let mut offsets = vec![0];
            for _ in 0..items {
                let n = rng.gen_range(0..80);
                let piece: Vec<u8> = (0..n).map(|_| rng.r#gen::<u8>()).collect();
                input.extend_from_slice(&piece);
                offsets.push(input.len());
                pieces.push(piece);
            }
            let l_ = Launch {
                module: "m".into(),
                kernel: Arc::new(Copy),
                input: pieces,
                out_offsets: offsets.clone(),
                work_s: 0.0,
            };
            expected.push((input, offsets));
            let tx = tx.clone();
            device.submit(l_, Box::new(move |r| tx.send((l, r)).unwrap()));
        }
        drop(tx);
        let mut seen = [false; 60];
        let mut order = Vec::new();
        for (l, result) in rx.iter() {
            assert!(!seen[l as usize], "launch {l} came back twice");
            seen[l as usize] = true;
            order.push(l);
            let (input, offsets) = &expected[l as usize];
            match result {
                Ok(out) => {
                    assert!(![5, 11].contains(&l));
                    assert_eq!(&out.output, input);
                    assert_eq!(&out.out_offsets, offsets);
                }
                Err(DeviceError::OutOfMemory { needed, .. }) => {
                    assert_eq!(needed, 2 * input.len());
                    assert!(needed > 4096);
                }
                Err(DeviceError::Launch { message, .. }) => {
                    assert!([5, 11].contains(&l), "{message}");
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(seen.iter().all(|&s| s));
        // Successful launches complete in order of submission (FIFO engines).
        let mut ok: Vec<u64> = order.clone();
        ok.retain(|l| ![5, 11].contains(l) && 2 * expected[*l as usize].0.len() <= 4096);
        assert!(ok.windows(2).all(|w| w[0] < w[1]), "{ok:?}");
        assert_eq!(device.busy().launches, ok.len() as u64);
    }
}
