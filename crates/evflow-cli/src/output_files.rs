//! The files a job writes (`--report`, `--trace`): checked before the job
//! starts, written whole at its end.
//!
//! A regular file is written beside itself and renamed over, so that a
//! failed write never leaves a truncated file that looks complete. What is
//! not a regular file is never replaced: a symbolic link is followed (its
//! target is written, atomically), and a device or a pipe (`/dev/null`,
//! `/dev/stdout`, a FIFO read by another program) is written into directly.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The partial files being written, and whether the process is aborting
/// (then no further one is started): [`abandon_writes`] removes them.
static WRITING: Mutex<(bool, Vec<PathBuf>)> = Mutex::new((false, Vec::new()));

/// For a process about to end at once (a second signal): removes the
/// partial files being written and keeps any other from being started, so
/// that nothing half-written is left behind. A file already renamed to its
/// name is complete and stays. Never returns the lock: the caller exits.
pub fn abandon_writes() {
    let mut writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    writing.0 = true;
    for tmp in &writing.1 {
        let _ = std::fs::remove_file(tmp);
    }
    std::mem::forget(writing);
}

/// Where a job's file goes, once symbolic links are followed.
#[derive(Debug, PartialEq, Eq)]
enum Destination {
    /// A regular file, or nothing yet: written beside, then renamed over.
    File(PathBuf),
    /// A device, a pipe or a socket: written into.
    Stream(PathBuf),
}

/// Follows `path`'s symbolic links (also a link to a file not written yet)
/// and says what is there.
fn destination(path: &Path) -> Result<Destination, String> {
    // The system follows the links (also the magic ones of /proc, such as
    // /dev/stdout's).
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_dir() {
            return Err(format!("{}: is a directory", path.display()));
        }
        if !meta.is_file() {
            return Ok(Destination::Stream(path.to_path_buf()));
        }
        let real = std::fs::canonicalize(path)
            .map_err(|e| format!("{}: cannot resolve the path: {e}", path.display()))?;
        return Ok(Destination::File(real));
    }
    // Nothing there yet, or a link to a file not written yet: follow the
    // links to where the file will be.
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)
                    .map_err(|e| format!("{}: cannot read the link: {e}", current.display()))?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(Destination::File(current)),
        }
    }
    Err(format!(
        "{}: too many levels of symbolic links",
        path.display()
    ))
}

/// The file [`write_json`] writes first, then renames to `path`.
fn partial(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// The files a loaded configuration reads besides itself (its event
/// table), as `inputs` of [`check_outputs`].
pub fn read_by(loaded: &evflow_config::Loaded) -> Vec<(&'static str, Option<&Path>)> {
    loaded
        .inputs
        .iter()
        .map(|(what, path)| (*what, Some(path.as_path())))
        .collect()
}

/// Checks, before a job starts, that the files its options name can be
/// written, so that a long job does not end without its report: each is not
/// a directory, its directory exists and takes a new file, and no two
/// options name the same file (one would silently replace the other), nor
/// one of the job's `inputs` (its configuration would be overwritten).
pub fn check_outputs(
    outputs: &[(&str, Option<&Path>)],
    inputs: &[(&str, Option<&Path>)],
) -> Result<(), String> {
    for &(option, path) in outputs {
        let Some(path) = path else { continue };
        for &(what, input) in inputs {
            let same =
                input.is_some_and(|input| match (path.canonicalize(), input.canonicalize()) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => false,
                });
            if same {
                return Err(format!(
                    "{option} {} is the {what}: it would be overwritten",
                    path.display()
                ));
            }
        }
    }
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for &(option, path) in outputs {
        let Some(path) = path else { continue };
        let target = destination(path).map_err(|e| format!("{option} {e}"))?;
        if let Destination::File(file) = &target {
            let dir = match file.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if !dir.is_dir() {
                return Err(format!(
                    "{option} {}: no directory '{}'",
                    path.display(),
                    dir.display()
                ));
            }
            let tmp = partial(file);
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .and_then(|_| std::fs::remove_file(&tmp))
                .map_err(|e| format!("{option} {}: cannot write there: {e}", path.display()))?;
        }
        // A device or a pipe is not opened here: opening a pipe for writing
        // waits for its reader, and a reader would see the end of it.
        let same = match &target {
            Destination::File(file) => file
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .canonicalize()
                .map(|d| d.join(file.file_name().unwrap_or_default()))
                .unwrap_or_else(|_| file.clone()),
            Destination::Stream(p) => p.clone(),
        };
        // Two options may share a stream (both to /dev/null); not a file.
        if let (Destination::File(_), Some((other, _))) =
            (&target, seen.iter().find(|(_, p)| *p == same))
        {
            return Err(format!(
                "{other} and {option} name the same file, {}",
                path.display()
            ));
        }
        seen.push((option, same));
    }
    Ok(())
}

/// Writes `value` as pretty JSON into `out`, as it is encoded: a large
/// trace is never held twice in memory, as objects and as text.
fn encode_into(
    out: impl std::io::Write,
    value: &impl serde::Serialize,
    newline: bool,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, out);
    serde_json::to_writer_pretty(&mut out, value).map_err(std::io::Error::from)?;
    if newline {
        out.write_all(b"\n")?;
    }
    out.into_inner().map(drop).map_err(|e| e.into_error())
}

/// Writes JSON whole: a regular file atomically (a failed run never leaves
/// a truncated file that looks complete, nor its partial file), through a
/// symbolic link to its target, into a device or a pipe directly.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    let failed = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    match destination(path)? {
        Destination::Stream(stream) => std::fs::OpenOptions::new()
            .write(true)
            .open(&stream)
            .and_then(|file| encode_into(file, value, true))
            .map_err(failed),
        Destination::File(file) => {
            let tmp = partial(&file);
            {
                let mut writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
                if writing.0 {
                    return Err(format!("{}: not written, aborting", path.display()));
                }
                writing.1.push(tmp.clone());
            }
            let result = std::fs::File::create(&tmp)
                .and_then(|out| encode_into(out, value, false))
                .and_then(|()| std::fs::rename(&tmp, &file))
                .map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    failed(e)
                });
            WRITING
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .1
                .retain(|p| *p != tmp);
            result
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("evflow-output-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_regular_file_is_replaced_whole() {
        let dir = scratch("regular");
        let report = dir.join("report.json");
        std::fs::write(&report, "old").unwrap();
        check_outputs(&[("--report", Some(&report))], &[]).unwrap();
        write_json(&report, &serde_json::json!({"events": 3})).unwrap();
        let text = std::fs::read_to_string(&report).unwrap();
        assert!(text.contains("\"events\": 3"), "{text}");
        assert!(!partial(&report).exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_followed_not_replaced() {
        let dir = scratch("link");
        std::fs::create_dir(dir.join("elsewhere")).unwrap();
        let target = dir.join("elsewhere").join("target.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.join("report.json");
        std::os::unix::fs::symlink("elsewhere/target.json", &link).unwrap();
        check_outputs(&[("--report", Some(&link))], &[]).unwrap();
        write_json(&link, &serde_json::json!({"events": 5})).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::read_to_string(&target)
                .unwrap()
                .contains("\"events\": 5")
        );
        // A link to a file not written yet: the file appears at its target.
        let dangling = dir.join("trace.json");
        std::os::unix::fs::symlink("elsewhere/new.json", &dangling).unwrap();
        write_json(&dangling, &serde_json::json!([])).unwrap();
        assert!(
            std::fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(dir.join("elsewhere").join("new.json").is_file());
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_written_into_not_replaced() {
        let null = Path::new("/dev/null");
        if !null.exists() {
            return;
        }
        assert_eq!(
            destination(null).unwrap(),
            Destination::Stream(null.to_path_buf())
        );
        check_outputs(&[("--report", Some(null)), ("--trace", Some(null))], &[]).unwrap();
        write_json(null, &serde_json::json!({"events": 1})).unwrap();
        let meta = std::fs::metadata(null).unwrap();
        assert!(!meta.is_file(), "/dev/null was replaced by a file");
    }

    #[test]
    fn two_options_naming_one_file_are_refused() {
        let dir = scratch("same");
        let a = dir.join("out.json");
        let err = check_outputs(&[("--report", Some(&a)), ("--trace", Some(&a))], &[]).unwrap_err();
        assert!(
            err.contains("--report and --trace name the same file"),
            "{err}"
        );
        let err = check_outputs(&[("--report", Some(&dir))], &[]).unwrap_err();
        assert!(err.contains("is a directory"), "{err}");
    }
}
