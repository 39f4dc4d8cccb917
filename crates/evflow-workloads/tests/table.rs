//! Event tables read as RFC 4180 CSV: quoted commas, doubled quotes, line
//! breaks in quoted fields, LF/CRLF/CR line ends; errors name the file, the
//! line, its event and the column, and never panic.

use evflow_workloads::table::{Cut, Table};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn err(text: &str) -> String {
    Table::parse(text).map(|_| ()).unwrap_err()
}

/// Column `name` of every row.
fn column(t: &Table, name: &str) -> Vec<f64> {
    let c = t.column(name).unwrap_or_else(|| panic!("no column {name}"));
    (1..=t.rows() as u64).map(|e| t.value(c, e)).collect()
}

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
    // A quote left open runs to the end of the text: named by its row and column.
    let e = err("a\n\"1\n");
    assert!(
        e.starts_with("line 2 (event 1), column 'a': a double quote is not closed"),
        "{e}"
    );
    let e = err("a,b\n1,2\n3,\"4\n5,6\n");
    assert!(
        e.starts_with("line 3 (event 2), column 'b': a double quote is not closed"),
        "{e}"
    );
    let e = err("a,\"b\n1,2\n");
    assert!(
        e.starts_with("line 1, column 2: a double quote is not closed"),
        "{e}"
    );
    // A stray quote in an unquoted cell is a bad cell of its column.
    let e = err("a,b\n5\",6\n");
    assert_eq!(e, "line 2 (event 1), column 'a': '5\"' is not a number");
}

#[test]
fn quoted_commas_and_doubled_quotes_are_read() {
    let t =
        Table::parse("\"pt,lead\",\"say \"\"hi\"\"\",n\n\"1.5\",\"2\",3\n4,\"5\",\"6\"\n").unwrap();
    assert_eq!(column(&t, "pt,lead"), [1.5, 4.0]);
    assert_eq!(column(&t, "say \"hi\""), [2.0, 5.0]);
    assert_eq!(column(&t, "n"), [3.0, 6.0]);
    let c = Cut::parse("pt,lead > 2", &t).unwrap();
    assert!(!c.passes(&t, 1) && c.passes(&t, 2));
    // A quoted cell may hold a line break: the next row's line counts it.
    let e = err("a,b\n\"1\n\",2\n3,x\n");
    assert_eq!(e, "line 4 (event 2), column 'b': 'x' is not a number");
}

#[test]
fn crlf_and_cr_line_ends_are_read_and_their_lines_named() {
    for end in ["\r\n", "\r", "\n"] {
        let t = Table::parse(&format!("a,b{end}1,2{end}3,4{end}{end}")).unwrap();
        assert_eq!(
            (column(&t, "a"), column(&t, "b")),
            (vec![1.0, 3.0], vec![2.0, 4.0])
        );
        let e = err(&format!("a,b{end}1,2{end}3,x{end}"));
        assert_eq!(
            e, "line 3 (event 2), column 'b': 'x' is not a number",
            "{end:?}"
        );
        let e = err(&format!("{end}a,b{end}1,2{end}{end}3,4{end}"));
        assert!(e.starts_with("line 4 (event 2) is empty"), "{end:?}: {e}");
        let e = err(&format!("a,b{end}1,2{end} {end}3,4{end}"));
        assert!(e.starts_with("line 3 (event 2) is empty"), "{end:?}: {e}");
        let e = err(&format!("a,b{end}1,2{end}3{end}"));
        assert_eq!(
            e, "line 3 (event 2): 1 fields, the header names 2",
            "{end:?}"
        );
    }
}

#[test]
fn ragged_rows_and_missing_columns_are_named() {
    assert_eq!(
        err("a,b,c\n1,2,3\n4,5\n"),
        "line 3 (event 2): 2 fields, the header names 3"
    );
    assert_eq!(
        err("a,b\n1,2\n4,5,6,7\n"),
        "line 3 (event 2): 4 fields, the header names 2"
    );
    // A missing last cell (a row ending in a comma) is an empty cell.
    let e = err("a,b\n1,2\n4,\n");
    assert!(e.starts_with("line 3 (event 2), column 'b': empty"), "{e}");
    // A cut on a column the table does not have names the ones it has.
    let t = Table::parse("met,\"ht\"\n1,2\n").unwrap();
    let e = Cut::parse("njet >= 2", &t).map(|_| ()).unwrap_err();
    assert_eq!(e, "no column 'njet' in the event table (columns: met, ht)");
}

#[test]
fn errors_of_a_file_name_it_and_the_line_event_and_column() {
    let dir = std::env::temp_dir().join(format!("evflow-table-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("events.csv");
    let shown = file.display();
    for (text, message) in [
        (
            &b"met,njet\r\n30,1\r\n50,x\r\n"[..],
            "line 3 (event 2), column 'njet': 'x' is not a number",
        ),
        (
            b"met,njet\n30,1\n50\n",
            "line 3 (event 2): 1 fields, the header names 2",
        ),
        (
            b"met\n30\n5\xe9\n",
            "line 3 is not UTF-8 text (save the table as UTF-8)",
        ),
        (
            b"met\n\"30\n",
            "line 2 (event 1), column 'met': a double quote is not closed",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let e = Table::read(&file).map(|_| ()).unwrap_err();
        assert!(e.starts_with(&format!("'{shown}': {message}")), "{e}");
    }
    let missing = dir.join("none.csv");
    let e = Table::read(&missing).map(|_| ()).unwrap_err();
    assert!(
        e.starts_with(&format!("cannot read '{}': ", missing.display())),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A cell as R, spreadsheets or numpy write it: with or without spaces
/// around it, quoted or not.
fn write_cell(rng: &mut ChaCha8Rng, text: &str) -> String {
    let text = if rng.gen_bool(0.2) {
        format!(" {text} ")
    } else {
        text.to_string()
    };
    if rng.gen_bool(0.3) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

/// Seeded tables of random numbers, written with random quoting, line ends,
/// byte-order mark and trailing blank lines, read back to the same values.
#[test]
fn random_tables_read_back_to_the_values_written() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for case in 0..300 {
        let columns = rng.gen_range(1..5);
        let rows = rng.gen_range(1..20);
        let names: Vec<String> = (0..columns).map(|c| format!("c{c},\"x\"")).collect();
        let values: Vec<Vec<f64>> = (0..columns)
            .map(|_| {
                (0..rows)
                    .map(|_| match rng.gen_range(0..4) {
                        0 => f64::from(rng.gen_range(-5..50)),
                        1 => f64::from(rng.gen_bool(0.5)),
                        _ => rng.gen_range(-1e6..1e6),
                    })
                    .collect()
            })
            .collect();
        let end = ["\n", "\r\n", "\r"][rng.gen_range(0..3)];
        let mut text = if rng.gen_bool(0.2) {
            "\u{feff}".to_string()
        } else {
            String::new()
        };
        let quoted: Vec<String> = names
            .iter()
            .map(|n| format!("\"{}\"", n.replace('"', "\"\"")))
            .collect();
        text += &quoted.join(",");
        for r in 0..rows {
            text += end;
            let cells: Vec<String> = values
                .iter()
                .map(|c| {
                    let v = c[r];
                    let s = if v == 1.0 && rng.gen_bool(0.3) {
                        "TRUE".to_string()
                    } else {
                        v.to_string()
                    };
                    write_cell(&mut rng, &s)
                })
                .collect();
            text += &cells.join(",");
        }
        for _ in 0..rng.gen_range(0..3) {
            text += end;
        }
        let t = Table::parse(&text).unwrap_or_else(|e| panic!("case {case}: {e}\n{text:?}"));
        assert_eq!(t.rows(), rows, "case {case}");
        for (name, written) in names.iter().zip(&values) {
            assert_eq!(&column(&t, name), written, "case {case}: {text:?}");
        }
    }
}

/// Text of CSV's special characters, numbers and names in any order: read
/// or refused with an error naming a line or the table, never a panic.
#[test]
fn random_text_is_read_or_refused_without_a_panic() {
    let pieces = [
        "\"", ",", "\n", "\r", "\r\n", " ", "1", "2.5", "a", "nan", "TRUE", "\u{feff}", "é",
    ];
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for _ in 0..5000 {
        let text: String = (0..rng.gen_range(0..30))
            .map(|_| pieces[rng.gen_range(0..pieces.len())])
            .collect();
        let e = match std::panic::catch_unwind(|| Table::parse(&text)) {
            Ok(Ok(t)) => {
                assert!(t.rows() >= 1, "{text:?}");
                continue;
            }
            Ok(Err(e)) => e,
            Err(_) => panic!("panicked on {text:?}"),
        };
        let named = e.starts_with("line ")
            || e.starts_with("column ")
            || e == "empty table (a header line of column names is needed)"
            || e == "the table has no rows";
        assert!(named, "{text:?}: {e}");
    }
}
