//! The owner record of a file sink's output directory, `.riffle-owner.json`
//! (docs/engine.md, "One owner per output"). A hidden name: shell globs (`out/*`) and
//! readers of a directory of part files (Hadoop, Spark) pass over it.

use riffle_core::{Error, OutputOwner, Result};
use std::path::{Path, PathBuf};

/// The owner record's file name.
pub(super) const OWNER_FILE: &str = ".riffle-owner.json";

fn owner_path(dir: &Path) -> PathBuf {
    dir.join(OWNER_FILE)
}

/// The owner recorded in `dir`, if any.
pub(super) fn read(dir: &Path) -> Result<Option<OutputOwner>> {
    let path = owner_path(dir);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    serde_json::from_slice(&text).map(Some).map_err(|e| {
        Error::config(
            path.display().to_string(),
            format!("not an owner record of riffle ({e}); remove it if nothing owns this output"),
        )
    })
}

/// Records `owner` in `dir` unless an owner is recorded (or always, with `replace`);
/// returns the owner recorded afterwards. The record is written whole under a
/// temporary name and then linked into place, which fails when the name exists: of two
/// processes only one creates it, and no reader sees half a record.
pub(super) fn claim(dir: &Path, owner: &OutputOwner, replace: bool) -> Result<OutputOwner> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = owner_path(dir);
    let temporary = dir.join(format!("{OWNER_FILE}.{}.tmp", std::process::id()));
    let json = serde_json::to_vec_pretty(owner).map_err(|e| Error::external("owner record", e))?;
    std::fs::write(&temporary, json).map_err(|e| Error::io(&temporary, e))?;
    let placed = if replace {
        std::fs::rename(&temporary, &path)
    } else {
        let linked = std::fs::hard_link(&temporary, &path);
        let _ = std::fs::remove_file(&temporary);
        linked
    };
    match placed {
        Ok(()) => {
            super::file_commit::sync_dir(dir)?;
            Ok(owner.clone())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(dir)?
            .ok_or_else(|| Error::io(&path, std::io::Error::other("owner record vanished"))),
        Err(e) => Err(Error::io(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(id: &str) -> OutputOwner {
        OutputOwner {
            id: id.into(),
            pipeline: "q5".into(),
            state: "/state".into(),
        }
    }

    #[test]
    fn the_first_claim_wins_and_a_replace_takes_over() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        assert_eq!(claim(dir.path(), &owner("a"), false).unwrap(), owner("a"));
        assert_eq!(claim(dir.path(), &owner("b"), false).unwrap(), owner("a"));
        assert_eq!(read(dir.path()).unwrap(), Some(owner("a")));
        assert_eq!(claim(dir.path(), &owner("b"), true).unwrap(), owner("b"));
        assert_eq!(read(dir.path()).unwrap(), Some(owner("b")));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OWNER_FILE], "no temporary file left behind");
    }

    #[test]
    fn a_damaged_record_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(OWNER_FILE), "{").unwrap();
        let err = read(dir.path()).unwrap_err().to_string();
        assert!(err.contains(OWNER_FILE), "{err}");
    }
}
