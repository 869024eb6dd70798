//! One error-code vocabulary: Kafka's error codes are defined once, in `runnel-codes`
//! (`crates/codes`), and every crate re-exports or imports them from there.
//!
//! Two scans over the workspace's Rust sources keep it that way:
//! * no `const NAME: i16 = ...` for a name of Kafka's error table outside `crates/codes` (a
//!   second definition can drift from Kafka's value, as a local INVALID_REGULAR_EXPRESSION = 114
//!   once did; Kafka's is 128);
//! * no bare number where non-test code compares, builds or matches an error code in the
//!   shapes the code base uses (`e.code == 84`, `ClientError::kafka(3, ..)`, `Kafka { code: 69,
//!   .. }`, `e.code() == Some(36)`), outside the files listed in [`BARE_NUMBERS_PENDING`].

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Files other work was editing when the bare numbers were replaced; their numbers are named
/// when those files are next touched (then the entry goes).
const BARE_NUMBERS_PENDING: &[&str] = &[];

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "vendor" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(path relative to the repository, text)` of every Rust file of every crate but `codes`.
fn workspace_sources() -> Vec<(String, String)> {
    let root = repo_root();
    let mut files = Vec::new();
    rust_sources(&root.join("crates"), &mut files);
    let mut out = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with("crates/codes/") {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap_or_default();
        out.push((rel, text));
    }
    out
}

/// The name of `const NAME: i16 =` on `line`, if it defines one.
fn i16_const_name(line: &str) -> Option<&str> {
    let at = line.find("const ")?;
    // Inside a string literal (this file's own examples), it defines nothing.
    if line[..at].contains('"') {
        return None;
    }
    let rest = &line[at + "const ".len()..];
    let (name, ty) = rest.split_once(':')?;
    ty.trim_start().starts_with("i16 =").then_some(name.trim())
}

#[test]
fn no_crate_defines_its_own_kafka_error_constant() {
    let kafka_names: BTreeSet<&str> = runnel_codes::ALL.iter().map(|e| e.name).collect();
    let mut found = Vec::new();
    for (path, text) in workspace_sources() {
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            if let Some(name) = i16_const_name(line) {
                if kafka_names.contains(name) {
                    found.push(format!("{path}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Kafka error codes are defined once, in runnel_codes; import them instead:\n{}",
        found.join("\n")
    );
}

/// The shapes in which a bare number is an error code: the text before the number.
const CODE_SHAPES: &[&str] = &[
    "ClientError::kafka(",
    "Kafka { code: ",
    ".code() == Some(",
    ".code == ",
    ".code != ",
    "error_code == ",
    "error_code != ",
    "with_error_code(",
];

/// Whether `line` has one of [`CODE_SHAPES`] directly followed by a (possibly negative) number.
fn bare_code(line: &str) -> bool {
    CODE_SHAPES.iter().any(|shape| {
        line.match_indices(shape).any(|(at, _)| {
            let after = line[at + shape.len()..].trim_start_matches('-');
            after.starts_with(|c: char| c.is_ascii_digit())
                && !after.starts_with("0)")
                && !after.starts_with("0 ")
                && !after.starts_with("0,")
        })
    })
}

/// Code outside unit-test modules and test files: everything before `#[cfg(test)]`.
fn non_test_code<'a>(path: &str, text: &'a str) -> &'a str {
    let test_file = path.contains("/tests/")
        || path.ends_with("/tests.rs")
        || path.ends_with("_tests.rs")
        || path.contains("/benches/");
    if test_file {
        return "";
    }
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

#[test]
fn non_test_code_names_the_error_codes_it_compares_and_builds() {
    let mut found = Vec::new();
    for (path, text) in workspace_sources() {
        if BARE_NUMBERS_PENDING.contains(&path.as_str()) {
            continue;
        }
        for (n, line) in non_test_code(&path, &text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if bare_code(code) {
                found.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "name the error code (runnel_codes::NAME) instead of its number:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanners_recognise_what_they_refuse() {
    assert_eq!(
        i16_const_name("pub const NOT_COORDINATOR: i16 = 16;"),
        Some("NOT_COORDINATOR")
    );
    assert_eq!(i16_const_name("const VERSION: i32 = 1;"), None);
    assert_eq!(i16_const_name("x(\"const NONE: i16 = 0;\")"), None);
    assert!(bare_code("Err(e) if e.code == 84 => {}"));
    assert!(bare_code("Err(ClientError::Kafka { code: 69, .. }) => {"));
    assert!(bare_code("ClientError::kafka(-1, None)"));
    assert!(!bare_code("Err(e) if e.code == ELECTION_NOT_NEEDED => {}"));
    assert!(!bare_code("if resp.error_code != 0 {"));
}
