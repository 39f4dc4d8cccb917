//! Process resource usage, for the report.

/// CPU time (user + system) of this process so far, in seconds.
pub fn cpu_seconds() -> f64 {
    cpu_time::ProcessTime::try_now()
        .map(|t| t.as_duration().as_secs_f64())
        .unwrap_or(0.0)
}

/// Peak resident set size of this process in bytes (Linux: VmHWM), 0 when
/// unknown.
pub fn peak_rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Asks Linux for the finest timer slack (1 ns instead of 50 µs) for this
/// process's threads created from now on, so that sleeping modules wake up
/// when asked. Harmless where unsupported.
pub fn fine_timer_slack() {
    let _ = std::fs::write("/proc/self/timerslack_ns", "1");
}
