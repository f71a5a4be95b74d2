//! Where in a configuration file a problem is: the line and column of a key found to
//! hold a value out of range after the file was read (the TOML parser gives positions
//! for the errors it finds itself), and of the first byte that is not UTF-8.

use crate::error::{invalid, Error};
use std::path::Path;

/// Line and column (1-based) of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, col)
}

/// The text of `bytes`, read from `path`, or an error naming the line and column of the
/// first byte that is not UTF-8.
pub fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let text = std::str::from_utf8(&e.as_bytes()[..good]).expect("valid up to here");
        let (line, col) = line_col(text, good);
        invalid!(
            "'{}' is not UTF-8 text: line {line}, column {col} (byte {good}) holds a byte \
             that is not; save it as UTF-8",
            path.display()
        )
    })
}

/// Where the value of `key` (dotted: `kernel.ts_quantum_ms`) is set in the TOML `text`:
/// the first table, however deep (a variant's, a mix's, an inline table), that has the
/// whole dotted path, else the first that has its last part. `None` if the key is not
/// written in the file (a default) or the text does not parse.
pub fn locate(text: &str, key: &str) -> Option<(usize, usize)> {
    let doc = toml_edit::ImDocument::parse(text.to_string()).ok()?;
    let parts: Vec<&str> = key.split('.').collect();
    let span =
        find(doc.as_item(), &parts).or_else(|| find(doc.as_item(), &parts[parts.len() - 1..]))?;
    Some(line_col(text, span.start))
}

/// The span of the value at `path` below `item`, searched depth first.
fn find(item: &toml_edit::Item, path: &[&str]) -> Option<std::ops::Range<usize>> {
    if let Some(v) = walk(item, path) {
        return v;
    }
    let children: Vec<&toml_edit::Item> = match item {
        toml_edit::Item::Table(t) => t.iter().map(|(_, v)| v).collect(),
        toml_edit::Item::ArrayOfTables(a) => {
            return a.iter().find_map(|t| find_in_table(t, path));
        }
        toml_edit::Item::Value(v) => return find_in_value(v, path),
        toml_edit::Item::None => return None,
    };
    children.into_iter().find_map(|c| find(c, path))
}

fn find_in_table(t: &toml_edit::Table, path: &[&str]) -> Option<std::ops::Range<usize>> {
    find(&toml_edit::Item::Table(t.clone()), path)
}

fn find_in_value(v: &toml_edit::Value, path: &[&str]) -> Option<std::ops::Range<usize>> {
    match v {
        toml_edit::Value::InlineTable(t) => {
            if let Some(r) = walk_inline(t, path) {
                return r;
            }
            t.iter().find_map(|(_, v)| find_in_value(v, path))
        }
        toml_edit::Value::Array(a) => a.iter().find_map(|v| find_in_value(v, path)),
        _ => None,
    }
}

/// `Some(span)` if `path` leads from `item` to a value (the span may be unknown:
/// `Some(None)` then stops the search with no position).
fn walk(item: &toml_edit::Item, path: &[&str]) -> Option<Option<std::ops::Range<usize>>> {
    let (first, rest) = path.split_first()?;
    let next = match item {
        toml_edit::Item::Table(t) => t.get(first)?,
        toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => {
            return walk_inline(t, path);
        }
        _ => return None,
    };
    if rest.is_empty() {
        return Some(next.span());
    }
    walk(next, rest)
}

fn walk_inline(
    t: &toml_edit::InlineTable,
    path: &[&str],
) -> Option<Option<std::ops::Range<usize>>> {
    let (first, rest) = path.split_first()?;
    let v = t.get(first)?;
    if rest.is_empty() {
        return Some(v.span());
    }
    match v {
        toml_edit::Value::InlineTable(inner) => walk_inline(inner, rest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_at_any_depth_and_bad_bytes_are_placed() {
        let text = "name = \"x\"\nduration_ms = 0\n\n[kernel]\nts_quantum_ms = 1e-9\n\n[[variants]]\nlabel = \"a\"\nkernel = { rr_quantum_ms = 0 }\n";
        assert_eq!(locate(text, "duration_ms"), Some((2, 15)));
        assert_eq!(locate(text, "kernel.ts_quantum_ms"), Some((5, 17)));
        assert_eq!(locate(text, "kernel.rr_quantum_ms"), Some((9, 28)));
        assert_eq!(locate(text, "sample_ms"), None);
        let e = utf8(Path::new("f.toml"), b"a = 1\nb = \"\xff\"\n".to_vec()).unwrap_err();
        assert!(e.to_string().contains("line 2, column 6 (byte 11)"), "{e}");
    }
}
