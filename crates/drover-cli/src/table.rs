//! A plain text table: left-aligned columns two spaces apart.

use std::io::Write;

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
