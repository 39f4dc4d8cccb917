//! `evflow`: run event-processing jobs from the command line.

mod device;
mod inspect;
mod output_files;
mod run;
mod signals;
mod simulate;
mod summary;
mod system;
mod times_from;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

// Many threads allocate and free small scheduling objects (rayon's task
// boxes, follow-up lists) on one another's behalf; glibc's malloc then
// contends on its arenas. See docs/performance.md (many cores).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "evflow",
    version,
    about = "Process many events through a graph of modules, on every core"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job: a configuration file (.toml, a CMS task-queue .config/.json) or a Python analysis (.py).
    // Negative numbers are values (refused by name: "--time-scale must
    // be ..."), not options.
    #[command(allow_negative_numbers = true)]
    Run(RunArgs),
    /// Predict a job's throughput on a machine with N cores, with the engine's own scheduling decisions.
    // The shared CONFIG help tells of Python analyses, which only `run` takes.
    #[command(
        allow_negative_numbers = true,
        mut_arg("config", |a| a
            .help("The process configuration (.toml, or a CMS task-queue .config/.json)")
            .long_help(
                "The process configuration (.toml, or a CMS task-queue .config/.json). \
                 A Python analysis (.py) runs with `evflow run`, not simulated"
            ))
    )]
    Simulate(simulate::SimulateArgs),
    /// Read a report or trace written by `evflow run` (or a report of `evflow simulate`) and print where the time went.
    Report(inspect::ReportArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WorkArg {
    Busy,
    Sleep,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExecutorArg {
    Threaded,
    Sequential,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OnErrorArg {
    Fail,
    SkipEvent,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FilterOrderArg {
    Fixed,
    Adaptive,
    Hepframe,
}

impl FilterOrderArg {
    /// The ordering options of a loaded configuration, with this policy
    /// for its reorderable paths (paths naming their own keep it).
    pub fn apply(
        order: Option<Self>,
        mut options: evflow_core::ordering::OrderingOptions,
    ) -> evflow_core::ordering::OrderingOptions {
        use evflow_core::ordering::Policy;
        if let Some(order) = order {
            let policy = match order {
                FilterOrderArg::Fixed => Policy::Fixed,
                FilterOrderArg::Adaptive => Policy::Adaptive,
                FilterOrderArg::Hepframe => Policy::HepFrame,
            };
            // The command line decides for every path: a per-path key
            // silently winning made `--filter-order fixed` a no-op on the
            // paths a user most wanted to compare.
            let mut overridden: Vec<&String> = options
                .per_path
                .iter()
                .filter(|(_, p)| **p != policy)
                .map(|(name, _)| name)
                .collect();
            if !overridden.is_empty() {
                overridden.sort();
                let names: Vec<&str> = overridden.iter().map(|s| s.as_str()).collect();
                eprintln!(
                    "evflow: note: --filter-order overrides the filter_order of path(s) {}",
                    names.join(", ")
                );
            }
            options.default = policy;
            options.per_path.clear();
        }
        options
    }
}

/// Most threads (cores) or events in flight the options take, as a
/// configuration file: each event in flight holds its slot's state, so
/// `-k 100000000` would ask for tens of GB before the first event.
pub const MAX_PARALLEL: usize = 1 << 16;

/// Checks a thread, core or events-in-flight count given on the command line.
pub fn check_parallel(value: Option<usize>, option: &str) -> Result<(), String> {
    match value {
        Some(0) => Err(format!("{option} must be at least 1")),
        Some(n) if n > MAX_PARALLEL => Err(format!(
            "{option} {n} is too large (at most {MAX_PARALLEL})"
        )),
        _ => Ok(()),
    }
}

/// Filters and analyzers that no path or end path reaches: they never run
/// (an output there is an error of the configuration; a producer there is
/// an on-demand one nobody asks for, as in the CMS files). Most likely an
/// entry forgotten in `[[path]]` or `[[end_path]]`. Also a configuration
/// without modules.
fn never_run(process: &evflow_core::Process) -> Vec<String> {
    use evflow_core::ModuleKind;
    // An empty file, or one whose modules are all commented out, is a
    // valid configuration: its events pass through nothing.
    if process.modules().is_empty() {
        return vec!["the configuration has no modules: its events run through nothing".into()];
    }
    let Ok(graph) = process.compile() else {
        return Vec::new();
    };
    graph
        .modules
        .iter()
        .zip(&graph.reachable)
        .filter(|(m, reached)| {
            !**reached && matches!(m.kind, ModuleKind::Filter | ModuleKind::Analyzer)
        })
        .map(|(m, _)| {
            format!(
                "{} '{}' is on no path or end path: it never runs",
                m.kind, m.label
            )
        })
        .chain(
            // An empty path accepts every event: most likely its modules
            // were forgotten (an output selecting it writes everything).
            process
                .paths()
                .iter()
                .filter(|p| p.modules.is_empty())
                .map(|p| format!("path '{}' has no modules: it accepts every event", p.name)),
        )
        .collect()
}

/// What to run: the options `evflow run` and `evflow simulate` share.
#[derive(clap::Args, Debug)]
pub struct WorkloadArgs {
    /// The process configuration (.toml, or a CMS task-queue .config/.json).
    /// `evflow run ANALYSIS.py` runs a Python analysis instead, with the
    /// Python runner's options (`evflow run ANALYSIS.py --help` lists them).
    pub config: PathBuf,
    /// Number of events (cycles through recorded per-event times when larger).
    #[arg(long, short = 'n')]
    pub events: Option<u64>,
    /// Multiply every configured module time by this factor.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Override how synthetic modules spend their time.
    #[arg(long, value_enum)]
    pub work: Option<WorkArg>,
    /// Order of the filters of every reorderable path, over the configuration's
    /// `filter_order` keys (default: the configuration's, else adaptive).
    #[arg(long, value_enum)]
    pub filter_order: Option<FilterOrderArg>,
    /// Events per luminosity block, instead of the configuration's
    /// `[source] events_per_lumi` (to measure block boundaries): a run still
    /// holds the configuration's `lumis_per_run` blocks, now of N events
    /// each, from its `first_run`, as CMSSW's EmptySource numbers them.
    #[arg(long, value_name = "N")]
    pub events_per_lumi: Option<u64>,
    /// Luminosity blocks whose events may be in flight at once (>= 1).
    #[arg(long, default_value_t = evflow_core::DEFAULT_CONCURRENT_LUMIS)]
    pub concurrent_lumis: usize,
    /// Write the JSON report here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print only errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub device: device::DeviceArgs,
}

impl WorkloadArgs {
    /// Loads the configuration with these options applied.
    pub fn load(&self) -> Result<evflow_config::Loaded, String> {
        if self.concurrent_lumis == 0 {
            return Err("--concurrent-lumis must be at least 1".into());
        }
        if !self.time_scale.is_finite() || self.time_scale < 0.0 {
            return Err(format!(
                "--time-scale must be a finite number >= 0, not {}",
                self.time_scale
            ));
        }
        if self.events_per_lumi == Some(0) {
            return Err("--events-per-lumi must be at least 1".into());
        }
        let (devices, notice) = self.device.open()?;
        let load = evflow_config::LoadOptions {
            device: Some(devices),
            events: self.events,
            events_per_lumi: self.events_per_lumi,
            time_scale: self.time_scale,
            work: self.work.map(|w| match w {
                WorkArg::Busy => evflow_workloads::Work::Busy,
                WorkArg::Sleep => evflow_workloads::Work::Sleep,
            }),
        };
        let loaded = evflow_config::load_file(&self.config, &load).map_err(|e| e.to_string())?;
        // Information, not an error: `--quiet` prints only errors.
        if let (Some(notice), Some(_), false) = (notice, &loaded.devices, self.quiet) {
            eprintln!("evflow: {notice}");
        }
        if !self.quiet {
            for note in &loaded.notes {
                eprintln!("evflow: warning: {}: {note}", self.config.display());
            }
            for warning in never_run(&loaded.process) {
                eprintln!("evflow: warning: {}: {warning}", self.config.display());
            }
        }
        Ok(loaded)
    }

    /// The planner for reorderable paths of a loaded configuration.
    pub fn planner(&self, loaded: &evflow_config::Loaded) -> evflow_core::PlannerFactory {
        FilterOrderArg::apply(self.filter_order, loaded.ordering.clone()).factory()
    }
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Worker threads (default: the configuration's, else the number of cores, less a CUDA
    /// device's stream workers, at most a quarter of the cores).
    #[arg(long, short = 'j')]
    pub threads: Option<usize>,
    /// Events processed at once (default: the configuration's, else the thread count).
    #[arg(long, short = 'k')]
    pub events_in_flight: Option<usize>,
    #[arg(long, value_enum, default_value = "threaded")]
    pub executor: ExecutorArg,
    /// What a module error does: stop the job, or record the event as failed and go on.
    #[arg(long, value_enum, default_value = "fail")]
    pub on_error: OnErrorArg,
    /// Write a Chrome trace-event JSON (for Perfetto) here (every module
    /// execution, kept in memory to the end: about 110 bytes each at the
    /// peak).
    #[arg(long)]
    pub trace: Option<PathBuf>,
}

/// Lets a closed pipe end the command quietly, as it ends other Unix tools
/// (`evflow simulate ... | head`): Rust starts programs with SIGPIPE
/// ignored, which turns every later print into a panic.
#[cfg(unix)]
fn default_sigpipe() {
    // SAFETY: `signal` with SIG_DFL only changes this process's disposition
    // of SIGPIPE; it runs first in `main`, before any other thread exists,
    // and installs no handler code. Tested by
    // tests/cli.rs::a_closed_pipe_ends_the_command_quietly.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    default_sigpipe();
    // `evflow run analysis.py ...` takes the Python runner's options too
    // (`--input`, `--processes`, `--scheduler`, ...): hand it over unparsed.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().take(3).collect();
    let python = argv.len() == 3
        && argv[1] == "run"
        && std::path::Path::new(&argv[2])
            .extension()
            .is_some_and(|e| e == "py");
    let result = if python {
        run::run_python_analysis().map(|()| ExitCode::SUCCESS)
    } else {
        let matches = Cli::command().get_matches();
        let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        // Which `--device-*` options were given, not defaulted: one that
        // cannot apply to the device chosen is refused, not ignored.
        let given = match matches.subcommand() {
            Some(("run" | "simulate", sub)) => device::given(sub),
            _ => Vec::new(),
        };
        match cli.command {
            Command::Run(mut args) => {
                args.workload.device.given = given;
                run::run(&args)
            }
            Command::Simulate(mut args) => {
                args.workload.device.given = given;
                args.workload.device.launches_measured = args.times_from.is_some();
                simulate::simulate(&args)
            }
            Command::Report(args) => inspect::report(&args).map(|()| ExitCode::SUCCESS),
        }
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("evflow: error: {message}");
            ExitCode::FAILURE
        }
    }
}
