//! Checks and helpers shared by both formats.

use evflow_core::EmptySource;
use evflow_workloads::{Timing, Work};

use crate::error::{ConfigFileError, Origin};
use crate::options::LoadOptions;

/// Longest time a module may take on one event, after `time_scale`: longer
/// is certainly a mistake (and `Duration` could not hold much more).
pub const MAX_SECONDS: f64 = 1e6;

/// Most events in flight or threads a file may ask for.
pub const MAX_PARALLEL: u64 = 1 << 16;

/// Most instances of a cloned module.
pub const MAX_CLONES: u64 = 4096;

/// Checks one per-event time; `what` names it in the message
/// (`time`, `times[3]`, `eventTimes[3]`).
pub fn check_time(value: f64, scale: f64, what: &str) -> Result<(), String> {
    if !value.is_finite() {
        return Err(format!("{what} is not a finite number ({value})"));
    }
    if value < 0.0 {
        return Err(format!("{what} is negative ({value})"));
    }
    if value * scale > MAX_SECONDS {
        // `{:?}`: 1e300 as written, not as three hundred digits.
        return Err(format!(
            "{what} is too long ({value:?} s times time_scale {scale:?} exceeds {MAX_SECONDS:?} s)"
        ));
    }
    Ok(())
}

/// Builds the timing of a module whose times were checked.
pub fn timing(times: Vec<f64>, scale: f64, work: Work) -> Timing {
    Timing::new(times, scale, work)
}

/// Reads a `work` name.
pub fn parse_work(name: &str) -> Result<Work, String> {
    match name {
        "busy" => Ok(Work::Busy),
        "sleep" => Ok(Work::Sleep),
        other => Err(format!("unknown work '{other}' (known: busy, sleep)")),
    }
}

/// Checks a suggested number of events in flight or of threads.
pub fn check_parallel(value: u64) -> Result<usize, String> {
    if value == 0 {
        return Err("must be at least 1".into());
    }
    if value > MAX_PARALLEL {
        return Err(format!("{value} is too large (at most {MAX_PARALLEL})"));
    }
    Ok(value as usize)
}

/// A stable seed derived from a module label (FNV-1a), so that filters with
/// the same pass fraction select different events.
pub fn seed_from_label(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// 1-based line and column of byte `offset` in `text`.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// The caller's events per luminosity block ([`LoadOptions::events_per_lumi`])
/// over the file's, the file's blocks per run and first run kept; then the
/// check that the last event's run and block numbers fit (`key`: the file's
/// source settings, named in the error).
pub(crate) fn events_per_lumi(
    source: EmptySource,
    opts: &LoadOptions,
    key: &str,
    at: Origin<'_>,
) -> Result<EmptySource, ConfigFileError> {
    let source = match opts.events_per_lumi {
        Some(0) => return Err(at.setting(key, "events per luminosity block must be at least 1")),
        Some(n) => source.events_per_lumi(n),
        None => source,
    };
    source.check_numbers().map_err(|e| at.setting(key, e))?;
    Ok(source)
}
