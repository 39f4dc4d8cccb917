//! `evflow run`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use evflow_core::{ErrorPolicy, ExecutorKind, RunError, RunOptions};

use crate::output_files::{check_outputs, write_json};
use crate::{ExecutorArg, OnErrorArg, RunArgs, signals, summary, system};

/// Engine threads when neither `--threads` nor the configuration says: a
/// core each, less the cores the job's device keeps busy (a CUDA device's
/// stream workers), up to a quarter of them. On H200 machines with 16
/// cores, 14 engine threads against 16 ran the device-bound n-body's
/// adaptive split 1.19× as fast (medians of 9: its launches no longer wait
/// for a core) and the host-bound stencil's 0.92× (host-only 0.93–0.96×):
/// a job that keeps its device busy gains more than a host-bound one
/// loses, and `--threads` gives the cores back. The quarter keeps a small
/// machine's host side from losing more than was measured.
fn default_threads(cores: usize, devices: Option<&evflow_device::DeviceContext>) -> usize {
    let reserved = devices.map_or(0, |d| d.service_threads()).min(cores / 4);
    cores.saturating_sub(reserved).max(1)
}

/// Runs the job; the exit status is [`signals::EXIT_INTERRUPTED`] when a
/// signal stopped it early (with the report and outputs complete for the
/// events done).
pub fn run(args: &RunArgs) -> Result<ExitCode, String> {
    let workload = &args.workload;
    if workload.config.extension().is_some_and(|e| e == "py") {
        return run_python_analysis().map(|()| ExitCode::SUCCESS);
    }
    let stop = signals::stop_on_signals()?;
    crate::check_parallel(args.threads, "--threads")?;
    crate::check_parallel(args.events_in_flight, "--events-in-flight")?;
    // The sequential executor runs on the calling thread: more threads asked
    // for were dropped in silence.
    if let (ExecutorArg::Sequential, Some(n @ 2..)) = (args.executor, args.threads) {
        return Err(format!(
            "--threads {n} has no effect with --executor sequential, which runs on one thread \
             (leave --threads out, or use --executor threaded)"
        ));
    }
    check_outputs(
        &[
            ("--report", workload.report.as_deref()),
            ("--trace", args.trace.as_deref()),
        ],
        &[("configuration", Some(&workload.config))],
    )?;
    // Before loading: device threads started while loading inherit it.
    system::fine_timer_slack();
    let loaded = workload.load()?;
    // The files the configuration reads (its event table) are known once
    // it is loaded: a report or trace over one would destroy it.
    check_outputs(
        &[
            ("--report", workload.report.as_deref()),
            ("--trace", args.trace.as_deref()),
        ],
        &crate::output_files::read_by(&loaded),
    )?;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let threads = args
        .threads
        .or(loaded.threads)
        .unwrap_or_else(|| default_threads(cores, loaded.devices.as_ref()));
    if threads > MAX_THREADS {
        // Thousands of threads past this, the runtime aborts the process
        // (a thread's signal stack cannot be mapped) instead of failing.
        return Err(format!(
            "{threads} threads (--threads or the configuration's threads) is too many: at most \
             {MAX_THREADS} (events in flight may be more: --events-in-flight)"
        ));
    }
    // Sleeping work emulates a machine of `threads` cores: so do the
    // helpers of sleeping parallel-for ranges.
    evflow_workloads::set_emulated_cores(threads);
    let executor = match args.executor {
        ExecutorArg::Threaded => ExecutorKind::Threaded,
        ExecutorArg::Sequential => ExecutorKind::Sequential,
    };
    let events_in_flight = args
        .events_in_flight
        .or(loaded.events_in_flight)
        .unwrap_or(match executor {
            ExecutorKind::Threaded => threads,
            ExecutorKind::Sequential => 1,
        })
        // No more slots than events: the others would never fill.
        .min(usize::try_from(loaded.events).unwrap_or(usize::MAX).max(1));
    if let Some(devices) = &loaded.devices {
        devices.set_options(evflow_device::DeviceOptions {
            events_in_flight,
            host_threads: threads,
            ..devices.options()
        });
    }
    let devices = loaded.devices.clone();
    // Calibrate busy work before the clock starts, not inside the first module.
    evflow_workloads::busy_iterations_per_second();
    let progress = progress_bar(workload.quiet, loaded.events);
    let options = RunOptions {
        threads,
        events_in_flight,
        executor,
        on_error: match args.on_error {
            OnErrorArg::Fail => ErrorPolicy::Fail,
            OnErrorArg::SkipEvent => ErrorPolicy::SkipEvent,
        },
        trace: args.trace.is_some(),
        planner: Some(workload.planner(&loaded)),
        progress: progress
            .clone()
            .map(|bar| Arc::new(move |n| bar.set_position(n)) as evflow_core::ProgressFn),
        stop: Some(stop),
        concurrent_lumis: workload.concurrent_lumis,
    };
    let cpu0 = system::cpu_seconds();
    let result = evflow_core::run(loaded.process, &options);
    if let Some(bar) = &progress {
        bar.finish_and_clear();
    }
    let (mut report, error) = match result {
        Ok(report) => (report, None),
        Err(RunError::Config(e)) => return Err(format!("{}: {e}", workload.config.display())),
        Err(RunError::Failed { error, report }) => (*report, Some(error)),
    };
    report.cpu_s = system::cpu_seconds() - cpu0;
    report.peak_rss_bytes = system::peak_rss_bytes();
    let device_reports = devices.map(|d| d.reports()).unwrap_or_default();
    if let Some(path) = &workload.report {
        write_json(path, &crate::device::report_json(&report, &device_reports)?)?;
    }
    if let Some(path) = &args.trace {
        write_json(path, &report.chrome_trace())?;
    }
    if !workload.quiet {
        summary::print(&report);
        crate::device::print_summary(&device_reports);
    }
    match error {
        Some(error) => Err(error.to_string()),
        None if report.interrupted => {
            eprintln!(
                "evflow: interrupted: stopped reading after {} events; events in flight finished, \
                 end transitions ran, outputs closed",
                report.events
            );
            Ok(ExitCode::from(signals::EXIT_INTERRUPTED))
        }
        // `--on-error skip-event` skipped every event: nothing came out of
        // the job, which is a failure however it was reached.
        None if report.events == 0 && !report.failed_events.is_empty() => {
            let first = &report.failed_events[0];
            Err(format!(
                "every event failed ({} events, none written; the first: run {} lumi {} event {}: \
                 module '{}': {})",
                report.failed_events.len(),
                first.run,
                first.lumi,
                first.event,
                first.module,
                first.message
            ))
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

/// `evflow run analysis.py ...`: a Python analysis runs in the Python
/// package's own runner (`python -m evflow run`), with the same options.
/// Most engine threads `evflow run` starts (`--threads`).
pub const MAX_THREADS: usize = 4096;

pub(crate) fn run_python_analysis() -> Result<(), String> {
    // The Python runner stops gracefully itself; signals sent to this
    // process alone (`kill PID`, a batch system's SIGTERM) are passed on.
    let forwarding = signals::forward_signals()?;
    let python = std::env::var_os("EVFLOW_PYTHON")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("VIRTUAL_ENV")
                .map(|v| std::path::Path::new(&v).join("bin").join("python"))
        })
        .unwrap_or_else(|| "python3".into());
    // Without this probe a missing package shows as Python's bare "No module
    // named evflow"; the probe only locates the package (no import), ~30 ms.
    let found = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('evflow') else 3)",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| {
            format!(
                "cannot start {} for a Python analysis: {e} (set EVFLOW_PYTHON, or activate the \
                 virtual environment where the evflow package is installed)",
                python.display()
            )
        })?;
    if found.code() == Some(3) {
        return Err(format!(
            "the evflow Python package is not installed for {} (install it with \
             ./scripts/setup.sh and activate .venv, or set EVFLOW_PYTHON to a Python that has it)",
            python.display()
        ));
    }
    let forwarded: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
    let mut child = std::process::Command::new(&python)
        .args(["-m", "evflow", "run"])
        .args(&forwarded)
        // Its usage and errors name the command the user typed.
        .env("EVFLOW_PROG", "evflow")
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
    forwarding.to(child.id())?;
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {}: {e}", python.display()))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => std::process::exit(code),
        None => Err(format!("{} was stopped by a signal", python.display())),
    }
}

fn progress_bar(quiet: bool, events: u64) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(events);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {pos}/{len} events {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use evflow_device::{
        Device, DeviceBusy, DeviceContext, DeviceError, DeviceOptions, Kernel, Launch, LaunchDone,
    };

    use super::default_threads;

    /// A device whose `service` threads stage and launch (no launches run).
    struct Busy {
        service: usize,
    }

    impl Device for Busy {
        fn name(&self) -> &str {
            "busy"
        }
        fn prepare(&self, _: &dyn Kernel) -> Result<(), DeviceError> {
            Ok(())
        }
        fn submit(&self, _: Launch, _: LaunchDone) {}
        fn overlaps(&self) -> bool {
            true
        }
        fn busy(&self) -> DeviceBusy {
            DeviceBusy::default()
        }
        fn service_threads(&self) -> usize {
            self.service
        }
    }

    fn with(service: usize) -> DeviceContext {
        DeviceContext::with_device(Some(Arc::new(Busy { service })), DeviceOptions::default())
    }

    #[test]
    fn default_threads_leave_the_devices_service_threads_their_cores() {
        assert_eq!(default_threads(16, None), 16);
        assert_eq!(
            default_threads(
                16,
                Some(&DeviceContext::host_only(DeviceOptions::default()))
            ),
            16
        );
        assert_eq!(default_threads(16, Some(&with(0))), 16);
        assert_eq!(default_threads(16, Some(&with(2))), 14);
        // At most a quarter of the cores.
        assert_eq!(default_threads(8, Some(&with(3))), 6);
        assert_eq!(default_threads(4, Some(&with(2))), 3);
        assert_eq!(default_threads(2, Some(&with(2))), 2);
        assert_eq!(default_threads(1, Some(&with(3))), 1);
    }
}
