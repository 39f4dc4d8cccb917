//! Event tables (`[source] type = "table"`): one row of numbers per event,
//! read from a CSV file, and cuts on their columns (`cut = "njet >= 4"`).
//!
//! Event number `e` (numbered from 1, as the empty source does) reads row
//! `(e − 1) mod rows`, so a job with more events than rows cycles through
//! the table.

use std::path::Path;

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
    /// the line, its event and the column.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("'{}': {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        // A byte-order mark (spreadsheets write one) is not part of the
        // first column's name.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let blank = |l: &str| l.trim().is_empty();
        let mut lines = text.lines().enumerate().skip_while(|(_, l)| blank(l));
        let Some((header_no, header)) = lines.next() else {
            return Err("empty table (a header line of column names is needed)".into());
        };
        let names: Vec<String> = header
            .split(',')
            .enumerate()
            .map(|(i, s)| {
                unquote(s)
                    .map(|n| n.trim().to_string())
                    .map_err(|e| format!("line {}, column {}: {e}", header_no + 1, i + 1))
            })
            .collect::<Result<_, _>>()?;
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() {
                return Err(format!("column {} has an empty name", i + 1));
            }
            if names[..i].contains(name) {
                return Err(format!("column '{name}' appears twice"));
            }
        }
        // Blank lines at the end are no rows; between rows, a blank line
        // would shift every later event onto the next row.
        let mut rows: Vec<(usize, &str)> = lines.collect();
        while rows.last().is_some_and(|(_, l)| blank(l)) {
            rows.pop();
        }
        let mut columns: Vec<Vec<f64>> = vec![Vec::with_capacity(rows.len()); names.len()];
        for (row, (line_no, line)) in rows.into_iter().enumerate() {
            let at = format!("line {} (event {})", line_no + 1, row + 1);
            if blank(line) {
                return Err(format!(
                    "{at} is empty: each event needs a line of {} values",
                    names.len()
                ));
            }
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() != names.len() {
                return Err(format!(
                    "{at}: {} fields, the header names {}",
                    fields.len(),
                    names.len()
                ));
            }
            for ((field, name), column) in fields.iter().zip(&names).zip(&mut columns) {
                let value = unquote(field).and_then(|f| cell(f.trim()));
                column.push(value.map_err(|e| format!("{at}, column '{name}': {e}"))?);
            }
        }
        let rows = columns.first().map_or(0, Vec::len);
        if rows == 0 {
            return Err("the table has no rows".into());
        }
        Ok(Self {
            names,
            columns,
            rows,
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

/// A field without the double quotes that R's `write.csv` and spreadsheets
/// put around names and text (`"njet"`; `""` inside is one quote). A quoted
/// field holding a comma is not split correctly here: refused.
fn unquote(field: &str) -> Result<std::borrow::Cow<'_, str>, String> {
    let trimmed = field.trim();
    let Some(inner) = trimmed.strip_prefix('"') else {
        return Ok(trimmed.into());
    };
    match inner.strip_suffix('"') {
        Some(inner) if !inner.contains(',') => Ok(inner.replace("\"\"", "\"").into()),
        _ => Err(format!(
            "'{trimmed}' is an unclosed quoted field (a quoted field holding a comma is not \
             read: the table takes names and numbers)"
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tables_and_cuts() {
        let t = Table::parse("a, b\n1, 2.5\n3, true\n").unwrap();
        assert_eq!(t.rows(), 2);
        let c = Cut::parse("b >= 1", &t).unwrap();
        assert!(c.passes(&t, 1) && c.passes(&t, 2) && c.passes(&t, 3));
        let c = Cut::parse("a<2", &t).unwrap();
        assert!(c.passes(&t, 1) && !c.passes(&t, 2));
        assert!(
            Cut::parse("zz > 1", &t)
                .unwrap_err()
                .contains("no column 'zz'")
        );
        assert!(Cut::parse("a ~ 1", &t).is_err());
        // A mistyped operator is named as one, not read as a column `a =`.
        for (bad, op) in [
            ("a => 2", "=>"),
            ("a =< 2", "=<"),
            ("b >== 1", ">=="),
            ("a <> 1", "<>"),
        ] {
            let e = Cut::parse(bad, &t).map(|_| ()).unwrap_err();
            assert!(
                e.contains(&format!("'{op}' is not an operator in '{bad}'")),
                "{bad}: {e}"
            );
        }
        assert!(Cut::parse("a>=-2", &t).unwrap().passes(&t, 1));
        for nan in ["a > nan", "a != NaN", "b == -nan"] {
            let e = Cut::parse(nan, &t).map(|_| ()).unwrap_err();
            assert!(e.contains("is not a number"), "{nan}: {e}");
        }
        assert!(Cut::parse("a < inf", &t).unwrap().passes(&t, 1));
        // Booleans compare as the table reads them.
        let c = Cut::parse("b == true", &t).unwrap();
        assert!(!c.passes(&t, 1) && c.passes(&t, 2));
        assert!(Cut::parse("b != False", &t).unwrap().passes(&t, 1));
        // A byte-order mark and CRLF line ends, as spreadsheets write them.
        let t = Table::parse("\u{feff}pt,eta\r\n1,2\r\n3,4\r\n").unwrap();
        assert_eq!(t.rows(), 2);
        let c = Cut::parse("pt > 2", &t).unwrap();
        assert!(!c.passes(&t, 1) && c.passes(&t, 2));
        assert!(Table::parse("a,b\n1\n").unwrap_err().contains("line 2"));
        assert!(Table::parse("a,a\n1,2\n").is_err());
    }

    #[test]
    fn bad_cells_and_rows_are_refused_naming_line_event_and_column() {
        let err = |text: &str| Table::parse(text).map(|_| ()).unwrap_err();
        for (bad, shown) in [
            ("NaN", "'NaN' is not a finite number"),
            ("nan", "'nan' is not a finite number"),
            ("-inf", "'-inf' is not a finite number"),
            ("infinity", "'infinity' is not a finite number"),
            // Beyond the largest f64: read as an infinity.
            ("1e999", "'1e999' is not a finite number"),
            ("", "empty"),
            (" ", "empty"),
            ("4x", "'4x' is not a number"),
        ] {
            let e = err(&format!("met,njet\n30,1\n50,{bad}\n"));
            assert!(
                e.starts_with("line 3 (event 2), column 'njet': ") && e.contains(shown),
                "{bad:?}: {e}"
            );
        }
        // A short row, a long one (a trailing comma), a blank line between
        // rows: each named by its line and event.
        let e = err("met,njet\n30,1\n40\n");
        assert_eq!(e, "line 3 (event 2): 1 fields, the header names 2");
        let e = err("met,njet\n30,1\n40,2,\n");
        assert_eq!(e, "line 3 (event 2): 3 fields, the header names 2");
        let e = err("met\n30\n\n50\n");
        assert!(e.starts_with("line 3 (event 2) is empty"), "{e}");
        // Blank lines before the header and after the last row are no rows.
        let t = Table::parse("\n met\n30\n50\n\n  \n").unwrap();
        assert_eq!(t.rows(), 2);
        let c = Cut::parse("met > 40", &t).unwrap();
        assert!(!c.passes(&t, 1) && c.passes(&t, 2));
        // The event numbers count rows, not lines.
        let e = err("\n\nmet\n1\n2\nnan\n");
        assert!(e.starts_with("line 6 (event 3), column 'met'"), "{e}");
        assert_eq!(err("a,b,a\n1,2,3\n"), "column 'a' appears twice");
        assert_eq!(err("a,,b\n1,2,3\n"), "column 2 has an empty name");
    }

    /// As R's `write.csv` and spreadsheets write them: quoted names (a
    /// cut on `njet` found no column: they were `"njet"`) and TRUE/FALSE.
    #[test]
    fn quoted_names_and_upper_case_booleans_are_read() {
        let t = Table::parse("\"njet\",\"pass\"\n3,TRUE\n\"5\",FALSE\n").unwrap();
        let c = Cut::parse("njet >= 4", &t).unwrap();
        assert!(!c.passes(&t, 1) && c.passes(&t, 2));
        let c = Cut::parse("pass == TRUE", &t).unwrap();
        assert!(c.passes(&t, 1) && !c.passes(&t, 2));
        let e = Table::parse("\"a,b\",c\n1,2\n").map(|_| ()).unwrap_err();
        assert!(
            e.starts_with("line 1, column 1: '\"a' is an unclosed quoted field"),
            "{e}"
        );
        let e = Table::parse("a\n\"1\n").map(|_| ()).unwrap_err();
        assert!(e.starts_with("line 2 (event 1), column 'a': "), "{e}");
    }
}
