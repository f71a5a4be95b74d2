//! Generated blocks in the documents: a report's markdown written between the lines
//! `<!-- NAME: begin -->` and `<!-- NAME: end -->` of a document (NAME is `reproduce
//! PAPER/FILE` for a scenario file's section, `study NAME` for a real-machine study),
//! its headings one level down, the rest of the document untouched.

use crate::error::{invalid, Result};

/// Where the block named `name` lies in `text`: the end of its begin marker and the
/// start of its end marker. A marker counts only alone on its own line (a marker quoted
/// in prose is text); there must be exactly one begin line and exactly one end line,
/// after it. Anything else is an error, and the caller changes nothing.
pub fn find(text: &str, name: &str) -> Result<(usize, usize)> {
    let begin = format!("<!-- {name}: begin -->");
    let end = format!("<!-- {name}: end -->");
    let mut begins = Vec::new();
    let mut ends = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == begin {
            begins.push(at + bare.len());
        } else if bare == end {
            ends.push(at);
        }
        at += line.len();
    }
    match (&begins[..], &ends[..]) {
        ([b], [e]) if b < e => Ok((*b, *e)),
        ([], _) | (_, []) => Err(invalid!(
            "no generated block for {name}: add the lines `{begin}` and `{end}`, each alone \
             on its line, in this order, where its tables go"
        )),
        ([_], [_]) => Err(invalid!("the generated block for {name} ends before it begins: put the line `{begin}` before `{end}`")),
        _ => Err(invalid!(
            "the generated block for {name} is marked {} time(s) at its beginning and {} at its end: keep exactly one line `{begin}` and one `{end}`; nothing was changed",
            begins.len(),
            ends.len()
        )),
    }
}

/// `text` with the block named `name` replaced by `md`, whose headings go one level
/// down.
pub fn replace(text: &str, name: &str, md: &str) -> Result<String> {
    let (b, e) = find(text, name)?;
    let body: String = md
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("#{l}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    Ok(format!("{}\n{}\n{}", &text[..b], body.trim(), &text[e..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_its_block_and_lowers_headings() {
        let doc = "# Doc\n<!-- study x: begin -->\nold\n<!-- study x: end -->\ntail\n\
                   <!-- study y: begin -->\nkeep\n<!-- study y: end -->\n";
        let new = replace(doc, "study x", "## Title\nrow\n").unwrap();
        assert_eq!(
            new,
            "# Doc\n<!-- study x: begin -->\n### Title\nrow\n<!-- study x: end -->\ntail\n\
             <!-- study y: begin -->\nkeep\n<!-- study y: end -->\n"
        );
        // the block is found again in what was written: rewriting is idempotent
        assert_eq!(replace(&new, "study x", "## Title\nrow\n").unwrap(), new);
    }

    /// A begin marker quoted in prose above the block is text, not a marker (it used
    /// to swallow everything between it and the block's end); markers repeated on their
    /// own lines are an error.
    #[test]
    fn only_markers_alone_on_their_lines_count() {
        let doc = "# Doc\nUse `<!-- study x: begin -->` to mark a block.\nprose\n\
                   <!-- study x: begin -->\nold\n<!-- study x: end -->\ntail\n";
        let new = replace(doc, "study x", "row\n").unwrap();
        assert!(
            new.contains("Use `<!-- study x: begin -->` to mark a block.\nprose\n"),
            "{new}"
        );
        assert!(
            new.contains("<!-- study x: begin -->\nrow\n<!-- study x: end -->\ntail"),
            "{new}"
        );
        let twice = format!("{doc}<!-- study x: begin -->\n");
        let e = replace(&twice, "study x", "row\n").unwrap_err().to_string();
        assert!(e.contains("2 time(s) at its beginning"), "{e}");
    }

    #[test]
    fn missing_or_reversed_markers_name_the_lines_to_add() {
        let e = find("<!-- study x: end -->\n<!-- study x: begin -->", "study x").unwrap_err();
        assert!(e.to_string().contains("`<!-- study x: begin -->`"), "{e}");
        assert!(find("nothing", "reproduce casc/fig5").is_err());
    }
}
