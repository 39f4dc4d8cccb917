//! Event tables (`[source] type = "table"`): one row of numbers per event,
//! read from a CSV file (RFC 4180, by the `csv` crate), and cuts on their
//! columns (`cut = "njet >= 4"`).
//!
//! Event number `e` (numbered from 1, as the empty source does) reads row
//! `(e − 1) mod rows`, so a job with more events than rows cycles through
//! the table.

use std::path::Path;

use csv::StringRecord;

/// The columns of an event table, column-major.
#[derive(Debug)]
pub struct Table {
    names: Vec<String>,
    columns: Vec<Vec<f64>>,
    rows: usize,
}

impl Table {
    /// Reads a CSV file: a header line of column names, then one line of
    /// finite numbers per event (`true`/`false` read as 1/0). Errors name
    /// the file, the line, its event and the column.
    pub fn read(path: &Path) -> Result<Self, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let line = Lines::new(e.as_bytes()).of(e.utf8_error().valid_up_to());
            format!(
                "'{}': line {line} is not UTF-8 text (save the table as UTF-8)",
                path.display()
            )
        })?;
        Self::parse(&text).map_err(|e| format!("'{}': {e}", path.display()))
    }

    /// Reads CSV text (RFC 4180: quoted fields may hold commas, line breaks
    /// and quotes written twice; lines end with LF, CRLF or CR). Names and
    /// cells are read without the spaces around them.
    pub fn parse(text: &str) -> Result<Self, String> {
        // A byte-order mark (spreadsheets write one) is not part of the
        // first column's name.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut records = Records::new(text);
        let header = loop {
            match records.next()? {
                None => {
                    return Err("empty table (a header line of column names is needed)".into());
                }
                Some(r) if r.blank => {}
                Some(r) => break r,
            }
        };
        if header.open_quote {
            let column = header.fields.len();
            return Err(format!(
                "line {}, column {column}: {OPEN_QUOTE}",
                header.line
            ));
        }
        let names: Vec<String> = header.fields.iter().map(|n| n.trim().to_string()).collect();
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() {
                return Err(format!("column {} has an empty name", i + 1));
            }
            if names[..i].contains(name) {
                return Err(format!("column '{name}' appears twice"));
            }
        }
        let mut columns: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        // Blank lines at the end are no rows; between rows, a blank line
        // would shift every later event onto the next row.
        let mut blank_since_last_row = None;
        let mut event = 0;
        while let Some(record) = records.next()? {
            if record.blank {
                blank_since_last_row.get_or_insert(record.line);
                continue;
            }
            event += 1;
            if let Some(line) = blank_since_last_row.or(record.empty_line_before) {
                return Err(format!(
                    "line {line} (event {event}) is empty: each event needs a line of {} values",
                    names.len()
                ));
            }
            let at = format!("line {} (event {event})", record.line);
            let fields = &record.fields;
            if record.open_quote {
                let last = fields.len().saturating_sub(1);
                let column = names.get(last).map_or_else(
                    || format!("column {}", last + 1),
                    |n| format!("column '{n}'"),
                );
                return Err(format!("{at}, {column}: {OPEN_QUOTE}"));
            }
            if fields.len() != names.len() {
                return Err(format!(
                    "{at}: {} fields, the header names {}",
                    fields.len(),
                    names.len()
                ));
            }
            for ((field, name), column) in fields.iter().zip(&names).zip(&mut columns) {
                let value = cell(field.trim());
                column.push(value.map_err(|e| format!("{at}, column '{name}': {e}"))?);
            }
        }
        if event == 0 {
            return Err("the table has no rows".into());
        }
        Ok(Self {
            names,
            columns,
            rows: event,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn column(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The value of column `c` for event number `event` (from 1).
    pub fn value(&self, c: usize, event: u64) -> f64 {
        let row = (event.max(1) - 1) % self.rows as u64;
        self.columns[c][row as usize]
    }
}

const OPEN_QUOTE: &str = "a double quote is not closed (a quoted field ends with a quote; \
                          a quote inside one is written twice)";

/// One record of the CSV text, with where it is.
struct Record {
    fields: StringRecord,
    /// The line it starts on (a quoted field may hold line breaks).
    line: usize,
    /// The first of the empty lines the csv reader skipped before it.
    empty_line_before: Option<usize>,
    /// Spaces only: a blank line.
    blank: bool,
    /// Its last field opened a quote that the text never closes.
    open_quote: bool,
}

/// The csv reader's records, with line numbers counted here: its own
/// (`Position::line`) lag behind on CRLF line ends, and the empty lines it
/// skips are no rows but shift the events after them.
struct Records<'a> {
    text: &'a str,
    reader: csv::Reader<&'a [u8]>,
    lines: Lines<'a>,
    /// Where the previous record's text ends (its line end excluded).
    end: Option<usize>,
}

impl<'a> Records<'a> {
    fn new(text: &'a str) -> Self {
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            // Rows of another length are named here, with their line.
            .flexible(true)
            .from_reader(text.as_bytes());
        Self {
            text,
            reader,
            lines: Lines::new(text.as_bytes()),
            end: None,
        }
    }

    fn next(&mut self) -> Result<Option<Record>, String> {
        let bytes = self.text.as_bytes();
        let line_end = |b: &u8| *b == b'\r' || *b == b'\n';
        let from = (self.reader.position().byte() as usize).min(bytes.len());
        let mut fields = StringRecord::new();
        match self.reader.read_record(&mut fields) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) => return Err(format!("line {}: {e}", self.lines.of(from))),
        }
        // The reader's position is where it began looking: the record starts
        // after the line ends (and empty lines) it skipped.
        let start = from + bytes[from..].iter().take_while(|b| line_end(b)).count();
        let to = (self.reader.position().byte() as usize).clamp(start, bytes.len());
        let end = start
            + bytes[start..to]
                .iter()
                .rposition(|b| !line_end(b))
                .map_or(0, |i| i + 1);
        // One line end closes the previous record; more are empty lines.
        let empty_line_before = self.end.and_then(|previous| {
            let previous = self.lines.of(previous);
            (self.lines.of(start) > previous + 1).then_some(previous + 1)
        });
        self.end = Some(end);
        // A quote left open runs to the end of the text, inside the record's
        // last field, and leaves an odd number of quotes; one in another
        // field is a stray quote in an unquoted cell, named as a bad cell.
        let quotes = |t: &[u8]| t.iter().filter(|&&b| b == b'"').count();
        let last = fields.len().saturating_sub(1);
        let open_quote = to == bytes.len()
            && quotes(&bytes[start..]) % 2 == 1
            && fields.iter().take(last).all(|f| !f.contains('"'));
        Ok(Some(Record {
            line: self.lines.of(start),
            empty_line_before,
            blank: self
                .text
                .get(start..end)
                .is_none_or(|t| t.trim().is_empty()),
            open_quote,
            fields,
        }))
    }
}

/// Line numbers of byte offsets, counted as the csv reader ends lines:
/// LF, CRLF or a lone CR.
struct Lines<'a> {
    text: &'a [u8],
    at: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    fn new(text: &'a [u8]) -> Self {
        Self {
            text,
            at: 0,
            line: 1,
        }
    }

    /// The line (from 1) of byte `offset`; offsets come in increasing order.
    fn of(&mut self, offset: usize) -> usize {
        while self.at < offset.min(self.text.len()) {
            let b = self.text[self.at];
            self.at += 1;
            if b == b'\n' || (b == b'\r' && self.text.get(self.at) != Some(&b'\n')) {
                self.line += 1;
            }
        }
        self.line
    }
}

/// One cell of a table: a finite number, or `true`/`false` (1/0). NaN and
/// infinities are refused: NaN fails every comparison and an infinity
/// (often an overflow, `1e999`, or a stand-in for a missing value) passes
/// every bound, so a cut would decide on them in silence.
fn cell(field: &str) -> Result<f64, String> {
    if let Some(v) = boolean(field) {
        return Ok(v);
    }
    match field {
        "" => Err("empty (a missing value has no number to cut on)".into()),
        _ => match field.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            Ok(_) => Err(format!(
                "'{field}' is not a finite number (NaN and infinities are refused)"
            )),
            Err(_) => Err(format!("'{field}' is not a number")),
        },
    }
}

/// `true`/`false` as a cell or a cut's number reads them: 1/0.
fn boolean(text: &str) -> Option<f64> {
    match text {
        "true" | "True" | "TRUE" => Some(1.0),
        "false" | "False" | "FALSE" => Some(0.0),
        _ => None,
    }
}

/// A comparison of a column with a number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cut {
    column: usize,
    op: Op,
    value: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
    Ne,
}

impl Cut {
    /// Parses `column op number`, with op one of `>=`, `>`, `<=`, `<`,
    /// `==`, `!=`.
    pub fn parse(text: &str, table: &Table) -> Result<Self, String> {
        let ops = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let Some((at, symbol, op)) = ops
            .iter()
            .filter_map(|&(s, op)| text.find(s).map(|i| (i, s, op)))
            .min_by_key(|&(i, s, _)| (i, usize::MAX - s.len()))
        else {
            return Err(format!(
                "'{text}' is not 'column op number' (op: >=, >, <=, <, ==, !=)"
            ));
        };
        // The whole run of operator characters around the match must be the
        // operator: `a => 2` would otherwise read as column `a =`.
        let is_op = |c: char| "=!<>".contains(c);
        let start = text[..at].trim_end_matches(is_op).len();
        let end = text.len() - text[at..].trim_start_matches(is_op).len();
        if text[start..end] != *symbol {
            return Err(format!(
                "'{}' is not an operator in '{text}' (op: >=, >, <=, <, ==, !=)",
                &text[start..end]
            ));
        }
        let name = text[..at].trim();
        let number = text[at + symbol.len()..].trim();
        let column = table.column(name).ok_or_else(|| {
            format!(
                "no column '{name}' in the event table (columns: {})",
                table.names.join(", ")
            )
        })?;
        // NaN parses, but compares false with everything: the cut would
        // reject every event (`!=`: pass every one) without a word.
        // `true`/`false` read as 1/0, as in the table's cells.
        let value = boolean(number)
            .or_else(|| number.parse::<f64>().ok().filter(|v| !v.is_nan()))
            .ok_or_else(|| format!("'{number}' is not a number"))?;
        Ok(Self { column, op, value })
    }

    pub fn passes(&self, table: &Table, event: u64) -> bool {
        let x = table.value(self.column, event);
        match self.op {
            Op::Ge => x >= self.value,
            Op::Gt => x > self.value,
            Op::Le => x <= self.value,
            Op::Lt => x < self.value,
            Op::Eq => x == self.value,
            Op::Ne => x != self.value,
        }
    }
}
