//! Helpers shared by the CLI tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

/// The stderr of a finished command, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every published line of an output directory, sorted; fails if a staged
/// (unpublished) file is left over.
pub fn published(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".inprogress"),
            "staged file {name} left in the output after a completed run"
        );
        lines.extend(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .map(String::from),
        );
    }
    lines.sort();
    lines
}
