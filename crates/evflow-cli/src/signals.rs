//! SIGINT / SIGTERM during `evflow run` or `evflow simulate`: the first asks the job to stop
//! gracefully (no further event is read, the events in flight finish, the
//! end transitions run, the report is written and marked interrupted); a
//! later one ends the process at once.
//!
//! One user action can deliver a signal twice: `timeout -s INT` (and a
//! terminal's Ctrl-C under some process managers) signals the child and
//! then its whole process group. Signals that arrive within
//! [`DUPLICATE_WINDOW`] of the first are therefore taken as the same
//! request, not as a second one.

use std::time::{Duration, Instant};

use evflow_core::StopHandle;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Exit status of a run stopped gracefully by a signal (128 + SIGINT, as
/// shells report an interrupted command): the report was written.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Exit status of a run aborted by a second signal (128 + SIGABRT):
/// nothing was written.
pub const EXIT_ABORTED: u8 = 134;

/// Signals this soon after the first are the same request delivered twice.
pub const DUPLICATE_WINDOW: Duration = Duration::from_millis(200);

/// Installs the handlers; the returned handle is requested by the first
/// signal. The signals are handled on a thread of their own (not in a
/// signal handler), which may exit the process.
pub fn stop_on_signals() -> Result<StopHandle, String> {
    let stop = StopHandle::new();
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|e| format!("cannot install the handlers of SIGINT and SIGTERM: {e}"))?;
    let flag = stop.flag().clone();
    std::thread::Builder::new()
        .name("evflow-signals".into())
        .spawn(move || {
            let mut first: Option<Instant> = None;
            for _ in signals.forever() {
                match first {
                    None => {
                        first = Some(Instant::now());
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    Some(t) if t.elapsed() >= DUPLICATE_WINDOW => {
                        eprintln!("evflow: aborted by a second signal; nothing more is written");
                        crate::output_files::abandon_writes();
                        // Not `process::exit`: its exit handlers (the
                        // allocator's among them) can take seconds, while
                        // the other threads go on finishing the job.
                        // SAFETY: `_exit` ends the process at once, running
                        // no handler; nothing of this process is used after.
                        unsafe { libc::_exit(EXIT_ABORTED.into()) };
                    }
                    Some(_) => {}
                }
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(stop)
}

/// Signals this process receives while a child runs the job (`evflow run
/// analysis.py` hands the file to the Python runner).
#[derive(Debug)]
pub struct Forwarding {
    signals: Signals,
}

/// Starts catching SIGINT and SIGTERM before the child starts (a signal in
/// between is held, not lost, and cannot end this process and orphan the
/// child); [`Forwarding::to`] then passes each on.
pub fn forward_signals() -> Result<Forwarding, String> {
    Signals::new([SIGINT, SIGTERM])
        .map(|signals| Forwarding { signals })
        .map_err(|e| format!("cannot install the handlers of SIGINT and SIGTERM: {e}"))
}

impl Forwarding {
    /// Passes every signal on to process `child`, which decides what it
    /// means (a first stops gracefully, a later one aborts; the same
    /// request delivered twice within [`DUPLICATE_WINDOW`], as a
    /// terminal's Ctrl-C that reaches the child itself and through this
    /// process, counts once there). This process never exits on a signal:
    /// it waits for the child's status, so nothing runs on unsupervised.
    pub fn to(mut self, child: u32) -> Result<(), String> {
        let pid =
            libc::pid_t::try_from(child).map_err(|_| format!("process id {child} out of range"))?;
        std::thread::Builder::new()
            .name("evflow-forward-signals".into())
            .spawn(move || {
                for signal in self.signals.forever() {
                    // SAFETY: kill(2) only sends a signal; `pid` is the
                    // child this process started and waits for (it is not
                    // reaped, so its id is not reused, until the wait
                    // returns and this process exits right after).
                    unsafe { libc::kill(pid, signal) };
                }
            })
            .map_err(|e| format!("cannot start the signal thread: {e}"))?;
        Ok(())
    }
}
