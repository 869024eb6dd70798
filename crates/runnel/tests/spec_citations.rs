//! Every "spec X.Y" the code and the docs cite names a section of `docs/spec/kafka-semantics.md`.
//!
//! The code cites the semantics it implements by section ("spec E.3", "spec D.1, D.2",
//! "spec Appendix 2"); this test keeps those citations resolvable inside the repository, so a
//! reader who clones it can always look the rule up, and a section renamed in the document
//! breaks the build of the tests rather than silently orphaning its citations.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SPEC: &str = "docs/spec/kafka-semantics.md";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Section ids the document defines: `## A.` -> "A", `### E.3 ` -> "E.3", `## Appendix 2.` ->
/// "Appendix 2".
fn defined_sections(spec: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for line in spec.lines() {
        let Some(rest) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        else {
            continue;
        };
        if let Some(appendix) = rest.strip_prefix("Appendix ") {
            let number: String = appendix.chars().take_while(char::is_ascii_digit).collect();
            ids.insert(format!("Appendix {number}"));
            continue;
        }
        let id: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '.')
            .collect();
        let id = id.trim_end_matches('.');
        if !id.is_empty() {
            ids.insert(id.to_string());
        }
    }
    ids
}

/// Reads one section id (`E`, `E.3`, `Appendix 2`) at the start of `text`.
fn section_id(text: &str) -> Option<(String, &str)> {
    if let Some(rest) = text.strip_prefix("Appendix ") {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        return (digits > 0).then(|| (format!("Appendix {}", &rest[..digits]), &rest[digits..]));
    }
    let mut chars = text.char_indices();
    let (_, letter) = chars.next()?;
    if !letter.is_ascii_uppercase() {
        return None;
    }
    let mut end = 1;
    if let Some(after_dot) = text[1..].strip_prefix('.') {
        let digits = after_dot.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            end = 2 + digits;
        }
    }
    // "spec Each" is prose, not a citation: an id ends at a word boundary.
    if text[end..]
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
    {
        return None;
    }
    Some((text[..end].to_string(), &text[end..]))
}

/// All section ids cited in `text` as "spec X", "spec X.Y, Z.W", "spec X / Y", "spec X and Y".
fn citations(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("spec ") {
        let mut cursor = &rest[at + "spec ".len()..];
        while let Some((id, after)) = section_id(cursor) {
            found.push(id);
            let next = [", ", " / ", "/", " and "]
                .iter()
                .find_map(|sep| after.strip_prefix(sep))
                .filter(|next| section_id(next).is_some());
            match next {
                Some(next) => cursor = next,
                None => break,
            }
        }
        rest = &rest[at + "spec ".len()..];
    }
    found
}

fn cited_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "node_modules" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            cited_files(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("rs" | "md" | "py" | "js")
        ) {
            out.push(path);
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[test]
fn every_spec_citation_names_a_section_of_the_document() {
    let root = repo_root();
    let spec = std::fs::read_to_string(root.join(SPEC)).expect("the spec is in the repository");
    let sections = defined_sections(&spec);
    assert!(
        sections.contains("E.3") && sections.contains("Appendix 2"),
        "{sections:?}"
    );

    let mut files = Vec::new();
    for dir in ["crates", "docs", "tests", "scripts"] {
        cited_files(&root.join(dir), &mut files);
    }
    files.push(root.join("ARCHITECTURE.md"));
    files.push(root.join("README.md"));

    let mut total = 0;
    let mut dangling = Vec::new();
    // The document itself and this test talk about citations in the abstract ("spec X.Y").
    let not_citing = [root.join(SPEC), root.join(file!())];
    for file in files
        .iter()
        .filter(|f| !not_citing.iter().any(|n| same_file(n, f)))
    {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for id in citations(&text) {
            total += 1;
            if !sections.contains(&id) {
                dangling.push(format!("{}: spec {id}", file.display()));
            }
        }
    }
    assert!(
        total > 50,
        "only {total} citations found: is the scan broken?"
    );
    assert!(
        dangling.is_empty(),
        "citations of sections {SPEC} lacks:\n{}",
        dangling.join("\n")
    );
}

#[test]
fn citation_parser_reads_lists_and_ignores_prose() {
    assert_eq!(
        citations("(spec D.1, D.2) and spec Appendix 2; spec H / A, spec D.3, E, F and I.3 item 6"),
        ["D.1", "D.2", "Appendix 2", "H", "A", "D.3", "E", "F", "I.3"]
    );
    assert!(citations("the spec is written; spec Each rule").is_empty());
    assert_eq!(citations("spec Z.9"), ["Z.9"]);
}
