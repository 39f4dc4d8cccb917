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
    /// numbers per event (`true`/`false` read as 1/0). Errors name the line.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read '{}': {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("'{}': {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        // A byte-order mark (spreadsheets write one) is not part of the
        // first column's name.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let Some((_, header)) = lines.next() else {
            return Err("empty table (a header line of column names is needed)".into());
        };
        let names: Vec<String> = header.split(',').map(|s| s.trim().to_string()).collect();
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() {
                return Err(format!("column {} has an empty name", i + 1));
            }
            if names[..i].contains(name) {
                return Err(format!("column '{name}' appears twice"));
            }
        }
        let mut columns: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for (line_no, line) in lines {
            let mut count = 0;
            for (i, field) in line.split(',').enumerate() {
                let field = field.trim();
                let value = match field {
                    "true" | "True" => 1.0,
                    "false" | "False" => 0.0,
                    _ => field
                        .parse::<f64>()
                        .map_err(|_| format!("line {}: '{field}' is not a number", line_no + 1))?,
                };
                if i < names.len() {
                    columns[i].push(value);
                }
                count += 1;
            }
            if count != names.len() {
                return Err(format!(
                    "line {}: {count} fields, the header names {}",
                    line_no + 1,
                    names.len()
                ));
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
        let value = match number {
            "true" | "True" => Some(1.0),
            "false" | "False" => Some(0.0),
            _ => number.parse::<f64>().ok().filter(|v| !v.is_nan()),
        }
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
}
