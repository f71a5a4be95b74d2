//! Generated blocks in the documents: a report's markdown written between the lines
//! `<!-- NAME: begin -->` and `<!-- NAME: end -->` of a document (NAME is `reproduce
//! PAPER/FILE` for a scenario file's section, `study NAME` for a real-machine study),
//! its headings one level down, the rest of the document untouched.

use anyhow::{bail, Result};

/// Where the block named `name` lies in `text`: the end of its begin marker and the
/// start of its end marker.
pub fn find(text: &str, name: &str) -> Result<(usize, usize)> {
    let begin = format!("<!-- {name}: begin -->");
    let end = format!("<!-- {name}: end -->");
    match (text.find(&begin), text.find(&end)) {
        (Some(b), Some(e)) if b < e => Ok((b + begin.len(), e)),
        _ => bail!(
            "no generated block for {name}: add the lines `{begin}` and `{end}`, in this \
             order, where its tables go"
        ),
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

    #[test]
    fn missing_or_reversed_markers_name_the_lines_to_add() {
        let e = find("<!-- study x: end -->\n<!-- study x: begin -->", "study x").unwrap_err();
        assert!(e.to_string().contains("`<!-- study x: begin -->`"), "{e}");
        assert!(find("nothing", "reproduce casc/fig5").is_err());
    }
}
