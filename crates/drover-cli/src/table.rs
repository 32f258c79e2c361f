//! A plain text table: left-aligned columns two spaces apart, and the one
//! way every listing command prints (JSON when asked, else a note when
//! there is nothing, else the table), with the one error a `--json` output
//! that does not encode becomes.

use std::io::Write;

use serde::Serialize;

use crate::CliError;

/// Prints a listing: with `json`, `items` as one line of JSON; else
/// `empty` when there are no items (a header-only table when `empty` is
/// `None`); else the table of `header` with one row per item, made by
/// `row`.
///
/// # Errors
/// [`CliError`] when the JSON does not encode or the output fails.
pub(crate) fn listing<T: Serialize>(
    out: &mut dyn Write,
    json: bool,
    items: &[T],
    empty: Option<&str>,
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Result<(), CliError> {
    if json {
        let v = serde_json::to_string(items).map_err(json_err)?;
        writeln!(out, "{v}")?;
        return Ok(());
    }
    if let Some(note) = empty
        && items.is_empty()
    {
        writeln!(out, "{note}")?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = items.iter().map(row).collect();
    write(out, header, &rows)?;
    Ok(())
}

/// The error of a value that does not encode as JSON, for every command that
/// prints JSON (`--json`).
pub(crate) fn json_err(e: serde_json::Error) -> CliError {
    CliError::io("encoding JSON", std::io::Error::other(e))
}

/// Writes `header` and `rows` as aligned columns.
pub(crate) fn write(
    out: &mut dyn Write,
    header: &[&str],
    rows: &[Vec<String>],
) -> std::io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line =
        |out: &mut dyn Write, cells: &mut dyn Iterator<Item = &str>| -> std::io::Result<()> {
            let mut text = String::new();
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                let w = widths.get(i).copied().unwrap_or(0);
                text.push_str(&format!("{cell:<w$}"));
            }
            writeln!(out, "{}", text.trim_end())
        };
    line(out, &mut header.iter().copied())?;
    for row in rows {
        line(out, &mut row.iter().map(String::as_str))?;
    }
    Ok(())
}
