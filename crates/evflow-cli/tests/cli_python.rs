//! `evflow run analysis.py`: the command hands Python analyses to the
//! Python package.

mod common;

use common::*;
use std::process::Command;

/// A Python without the evflow package: a clear error that says how to get
/// it, not Python's bare "No module named evflow".
#[test]
fn python_analysis_without_the_package_says_how_to_install_it() {
    let dir = scratch("nopackage");
    // A Python that sees no site-packages, hence no evflow.
    let python = dir.join("python-without-site");
    std::fs::write(&python, "#!/bin/sh\nexec python3 -S \"$@\"\n").unwrap();
    let mut perms = std::fs::metadata(&python).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&python, perms).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(["run", "analysis.py"])
        .current_dir(&dir)
        .env("EVFLOW_PYTHON", &python)
        .output()
        .expect("the evflow binary runs");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("evflow Python package is not installed") && err.contains("setup.sh"),
        "{err}"
    );
}

/// `evflow run analysis.py` hands every option, including those only the
/// Python runner knows (`--processes`, `--scheduler`, `--input`), to
/// `python -m evflow run` unparsed.
#[test]
fn python_analysis_options_reach_the_python_runner() {
    let out = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args([
            "run",
            "analysis.py",
            "--processes",
            "2",
            "--scheduler",
            "tcp://host:8786",
            "--input",
            "a.parquet",
        ])
        // The "interpreter" echoes what it was given.
        .env("EVFLOW_PYTHON", "echo")
        .output()
        .expect("the evflow binary runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "-m evflow run analysis.py --processes 2 --scheduler tcp://host:8786 --input a.parquet"
    );
}

/// A stand-in for the Python runner: it records each SIGINT / SIGTERM it
/// gets in `log` and exits with status 130 once it got `want` of them.
fn signal_recording_python(dir: &std::path::Path) -> std::path::PathBuf {
    let python = dir.join("python-recording-signals");
    std::fs::write(
        &python,
        "#!/bin/sh\n\
         case \"$1\" in -c) exit 0;; esac\n\
         n=0\n\
         trap 'n=$((n+1)); echo INT >> \"$LOG\"' INT\n\
         trap 'n=$((n+1)); echo TERM >> \"$LOG\"' TERM\n\
         echo started > \"$LOG.started\"\n\
         while [ \"$n\" -lt \"$WANT\" ]; do sleep 0.02; done\n\
         sleep 0.3\n\
         echo done >> \"$LOG\"\n\
         exit 130\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&python).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&python, perms).unwrap();
    python
}

/// Signals sent to `evflow run analysis.py` alone (`kill PID`, a batch
/// system's SIGTERM) reach the Python runner, and the command waits for it
/// to finish, whatever it is sent, and exits with its status: before, the
/// runner never heard of them, and a second signal ended the command at
/// once while the runner went on writing outputs.
#[test]
fn signals_to_a_python_analysis_command_reach_the_runner_and_the_command_waits_for_it() {
    let dir = scratch("forward");
    let python = signal_recording_python(&dir);
    let log = dir.join("signals.log");
    let started = dir.join("signals.log.started");
    let mut child = Command::new(env!("CARGO_BIN_EXE_evflow"))
        .args(["run", "analysis.py"])
        .env("EVFLOW_PYTHON", &python)
        .env("LOG", &log)
        .env("WANT", "2")
        .spawn()
        .expect("the evflow binary runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the runner never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for signal in ["-TERM", "-INT"] {
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let status = child.wait().expect("the command ends");
    // The runner's own status, after it finished (its last line written).
    assert_eq!(status.code(), Some(130));
    let got = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        ["TERM", "INT", "done"],
        "{got}"
    );
}
