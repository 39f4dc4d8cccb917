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
