//! [`ConfigError`]: what [`Process::compile`](crate::Process::compile) and
//! [`run`](crate::run) find wrong before any event runs, each naming what
//! is wrong.

/// A configuration error, found before any event runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A [`RunOptions`](crate::options::RunOptions) value out of its range.
    #[error("invalid run options: {0}")]
    InvalidOptions(String),
    #[error("module label '{0}' is used more than once")]
    DuplicateLabel(String),
    #[error("module label '{0}' is invalid: {1}")]
    InvalidLabel(String, String),
    /// `declared`: what the module of the product's label puts, when there
    /// is such a module (" (module 'f' declares no products)"), else the
    /// nearest producer's label (" (did you mean 'x'?)"), else empty.
    #[error("module '{module}' consumes '{product}', which no module produces{declared}")]
    MissingProduct {
        module: String,
        product: String,
        declared: String,
    },
    #[error("module '{module}' declares product instance '{instance}' twice")]
    DuplicateProduct { module: String, instance: String },
    /// Modules that need each other's products, in running order: each
    /// reads a product of the one before; the last is the first again.
    #[error(
        "dependency cycle among modules: {} (each reads a product of the one before)",
        .0.join(" -> ")
    )]
    Cycle(Vec<String>),
    /// The order constraints of a path allow no order: each step of
    /// `cycle` must run before the next (the last is the first again), by
    /// an `after` constraint or, for the pairs in `data`
    /// (`(earlier, later)`), because the later step needs the earlier's
    /// products.
    #[error("{}", path_cycle_message(.path, .cycle, .data))]
    PathCycle {
        path: String,
        cycle: Vec<String>,
        data: Vec<(String, String)>,
    },
    /// `hint`: the nearest module label, as " (did you mean 'x'?)", or empty.
    #[error("{kind} '{path}' names unknown module '{module}'{hint}")]
    UnknownPathModule {
        kind: &'static str,
        path: String,
        module: String,
        hint: String,
    },
    #[error("path name '{0}' is used more than once")]
    DuplicatePath(String),
    #[error("path name '{0}' is invalid: path names are non-empty, without surrounding spaces")]
    InvalidPathName(String),
    /// `hint`: the nearest path name, as " (did you mean 'x'?)", or empty.
    #[error("module '{module}' selects events of unknown path '{path}'{hint}")]
    UnknownSelectPath {
        module: String,
        path: String,
        hint: String,
    },
    #[error("module '{module}': {reason}")]
    InvalidModule { module: String, reason: String },
    #[error("invalid concurrency for module '{module}': {reason}")]
    InvalidConcurrency { module: String, reason: String },
    #[error("the process has no source")]
    NoSource,
}

fn path_cycle_message(path: &str, cycle: &[String], data: &[(String, String)]) -> String {
    let mut message = format!(
        "path '{path}': the 'after' constraints form a cycle{}: {}",
        if data.is_empty() {
            ""
        } else {
            " with the data dependencies"
        },
        cycle.join(" -> ")
    );
    if !data.is_empty() {
        let needs: Vec<String> = data
            .iter()
            .map(|(earlier, later)| format!("'{later}' needs products of '{earlier}'"))
            .collect();
        message += &format!(" ({})", needs.join("; "));
    }
    message
}

/// " (did you mean 'x'?)" with the candidate nearest to `name`, a likely
/// typo of it (a few letters added, dropped, changed or in another case),
/// else empty: the first of the nearest wins.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    let typed: Vec<char> = name.to_lowercase().chars().collect();
    // One edit in a short name (none in a name of one letter, which one
    // edit turns into any other), up to three in a long one.
    let most = (typed.len() / 4)
        .clamp(1, 3)
        .min(typed.len().saturating_sub(1));
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let d = edits(
            &typed,
            &candidate.to_lowercase().chars().collect::<Vec<_>>(),
        );
        if d <= most && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, candidate));
        }
    }
    best.map_or(String::new(), |(_, c)| format!(" (did you mean '{c}'?)"))
}

/// The Levenshtein distance of two strings of characters.
fn edits(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}
