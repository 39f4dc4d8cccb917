//! SIGINT / SIGTERM during `evflow run`: the first asks the job to stop
//! gracefully (no further event is read, the events in flight finish, the
//! end transitions run, the report is written and marked interrupted); the
//! second ends the process at once.

use evflow_core::StopHandle;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

/// Exit status of a run ended early by a signal (128 + SIGINT, as shells
/// report an interrupted command); also the status of the immediate exit on
/// a second signal.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Installs the handlers; the returned handle is requested by the first
/// signal.
pub fn stop_on_signals() -> Result<StopHandle, String> {
    let stop = StopHandle::new();
    for signal in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag as the previous signal left
        // it: already set means this is the second signal.
        flag::register_conditional_shutdown(signal, EXIT_INTERRUPTED.into(), stop.flag().clone())
            .and_then(|_| flag::register(signal, stop.flag().clone()))
            .map_err(|e| format!("cannot install the handler of signal {signal}: {e}"))?;
    }
    Ok(stop)
}
