//! Loading a configuration: picks the reader of its format, then compiles
//! the process once so that a wrong configuration fails before any event.

use std::path::Path;

use crate::error::{self, ConfigFileError};
use crate::options::{Format, LoadOptions, Loaded};
use crate::{cms_json, toml_format};

/// Reads a configuration file, picking its format with [`Format::detect`].
/// Errors name the file as `path` is written.
pub fn load_file(path: &Path, opts: &LoadOptions) -> Result<Loaded, ConfigFileError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        file: file.clone(),
        source: not_text(source),
    })?;
    // A byte-order mark (some editors write one) is no syntax error.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let format = Format::detect(path, text);
    load_str(text, format, opts, &file).map_err(|e| with_format_hint(e, format, text, path))
}

/// A file that is not UTF-8 text (a ROOT or Parquet data file named where
/// the configuration goes) is no configuration: say so, rather than the
/// reader's "stream did not contain valid UTF-8", which reads as if the
/// file were damaged.
fn not_text(e: std::io::Error) -> std::io::Error {
    if e.kind() != std::io::ErrorKind::InvalidData {
        return e;
    }
    std::io::Error::new(
        e.kind(),
        "it is not UTF-8 text, so no configuration (a TOML or CMS JSON text file); a data file?",
    )
}

/// A syntax error of a file whose extension named one format while its
/// text is the other (a TOML job saved as `.json`, a CMS configuration as
/// `.toml`) says so: the parser's own message ("invalid key") does not.
/// So does one of a file whose extension names no configuration format
/// (an event table `events.csv` given as the configuration), read as TOML.
fn with_format_hint(
    e: ConfigFileError,
    format: Format,
    text: &str,
    path: &Path,
) -> ConfigFileError {
    let ConfigFileError::Parse {
        file,
        line,
        column,
        message,
    } = e
    else {
        return e;
    };
    // Empty text parses as an empty TOML table: no hint to rename it, and
    // the JSON parser's "EOF while parsing a value" does not say why.
    if format == Format::CmsJson && text.trim().is_empty() {
        return ConfigFileError::Parse {
            file,
            line: None,
            column: None,
            message: "the file is empty (a CMS JSON configuration is one JSON object)".into(),
        };
    }
    let hint = match format {
        Format::Toml if crate::options::looks_like_cms_json(text) => {
            " (the file is a CMS JSON configuration: name it .json or .config)"
        }
        Format::CmsJson if toml::from_str::<toml::Table>(text).is_ok() => {
            " (the file is TOML: name it .toml)"
        }
        Format::Toml if Format::named(path).is_none() => {
            " (the file, named neither .toml nor .json or .config, was read as a TOML \
             configuration: is it one?)"
        }
        _ => "",
    };
    ConfigFileError::Parse {
        file,
        line,
        column,
        message: message + hint,
    }
}

/// Reads a configuration from `text` in the given format; `origin` names it
/// in error messages (usually the file name).
pub fn load_str(
    text: &str,
    format: Format,
    opts: &LoadOptions,
    origin: &str,
) -> Result<Loaded, ConfigFileError> {
    let at = error::Origin(origin);
    if !opts.time_scale.is_finite() || opts.time_scale < 0.0 {
        return Err(at.setting(
            "time_scale",
            format!("must be a finite number >= 0, not {}", opts.time_scale),
        ));
    }
    let loaded = match format {
        Format::Toml => toml_format::load(text, opts, at)?,
        Format::CmsJson => cms_json::load(text, opts, at)?,
    };
    loaded.process.compile().map_err(|e| at.process(e))?;
    Ok(loaded)
}
