//! Where a sink's output lands, spelled one way, so that two sinks of one job that
//! name the same output in different spellings (`out`, `./out/`, `file:///abs/out`)
//! are found before they run (docs/engine.md, "One owner per output"). Two such sinks
//! would write the same file names, or append to the same table under two ledgers, and
//! lose or tear each other's committed rows.

use std::path::{Component, Path, PathBuf};

/// The place one sink writes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum OutputPlace {
    /// A directory on this machine's file system: absolute, with `.`, `..`, repeated
    /// and trailing separators resolved, and symbolic links of its existing part
    /// followed.
    Directory(PathBuf),
    /// A named thing of an external system: a table of a catalog or database, a topic
    /// of a cluster. `system` says which system, `name` what in it, both spelled one way
    /// by the sink that made them.
    Named {
        /// The system, e.g. `postgres localhost:5432/db`.
        system: String,
        /// The thing in it, e.g. `public.orders`.
        name: String,
    },
}

impl OutputPlace {
    /// The directory `path` names (`file://` URLs too), relative paths taken from the
    /// process's working directory.
    pub fn directory(path: &Path) -> Self {
        let text = path.to_string_lossy();
        let path = match text.strip_prefix("file://") {
            Some(rest) => PathBuf::from(rest),
            None => path.to_path_buf(),
        };
        let absolute = if path.is_absolute() {
            path
        } else {
            std::env::current_dir()
                .map(|cwd| cwd.join(&path))
                .unwrap_or(path)
        };
        OutputPlace::Directory(follow_links(&lexical(&absolute)))
    }

    /// Whether two sinks writing `self` and `other` would write into one place: the
    /// same named thing, or the same directory or one inside the other (a sink's files
    /// would land among the other's, and taking back one's output could remove the
    /// other's).
    pub fn overlaps(&self, other: &OutputPlace) -> bool {
        match (self, other) {
            (OutputPlace::Directory(a), OutputPlace::Directory(b)) => {
                a.starts_with(b) || b.starts_with(a)
            }
            (a, b) => a == b,
        }
    }
}

impl std::fmt::Display for OutputPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutputPlace::Directory(dir) => write!(f, "directory {}", dir.display()),
            OutputPlace::Named { system, name } => write!(f, "{name} of {system}"),
        }
    }
}

/// The pairs (by index) of `places` that overlap, each pair once, lower index first.
/// A sink may name several places (`places[i].0` is the sink's index).
pub fn overlapping_outputs(places: &[(usize, OutputPlace)]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for (i, (a, place_a)) in places.iter().enumerate() {
        for (b, place_b) in &places[i + 1..] {
            let pair = ((*a).min(*b), (*a).max(*b));
            if a != b && place_a.overlaps(place_b) && !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

/// `path` with `.` and `..` resolved by their spelling (no file system access).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` with the symbolic links of its longest existing ancestor followed, so that a
/// link to an output directory is the directory itself.
fn follow_links(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(p: &str) -> OutputPlace {
        OutputPlace::directory(Path::new(p))
    }

    fn named(system: &str, name: &str) -> OutputPlace {
        OutputPlace::Named {
            system: system.into(),
            name: name.into(),
        }
    }

    #[test]
    fn spellings_of_one_directory_are_one_place() {
        let cwd = std::env::current_dir().unwrap();
        let url = format!("file://{}/out", cwd.display());
        let spellings = ["out", "./out/", "out//", "x/../out", url.as_str()];
        for s in spellings {
            assert_eq!(dir(s), dir("out"), "{s}");
        }
        assert_ne!(dir("out"), dir("out2"));
    }

    #[test]
    fn a_link_to_a_directory_is_that_directory() {
        let tmp = std::env::temp_dir().join(format!("riffle-place-{}", std::process::id()));
        let real = tmp.join("real");
        std::fs::create_dir_all(&real).unwrap();
        let link = tmp.join("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(
            OutputPlace::directory(&link.join("out")),
            OutputPlace::directory(&real.join("out"))
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_directory_inside_another_overlaps_it() {
        assert!(dir("/data/out").overlaps(&dir("/data/out/a")));
        assert!(dir("/data/out/a").overlaps(&dir("/data/out")));
        assert!(!dir("/data/out").overlaps(&dir("/data/out2")));
        assert!(!dir("/data/a").overlaps(&dir("/data/b")));
    }

    #[test]
    fn named_places_overlap_only_when_equal() {
        let a = named("postgres localhost:5432/db", "public.t");
        assert!(a.overlaps(&named("postgres localhost:5432/db", "public.t")));
        assert!(!a.overlaps(&named("postgres localhost:5432/db", "public.u")));
        assert!(!a.overlaps(&named("postgres localhost:5433/db", "public.t")));
        assert!(!a.overlaps(&dir("/public.t")));
    }

    #[test]
    fn overlapping_pairs_are_named_once_by_sink() {
        let places = vec![
            (0, dir("/o/a")),
            (1, dir("/o/b")),
            (2, dir("/o/a/")),
            (3, named("kafka k:9092", "t")),
            (3, named("kafka k:9092", "u")),
            (4, named("kafka k:9092", "t")),
        ];
        assert_eq!(overlapping_outputs(&places), vec![(0, 2), (3, 4)]);
    }
}
