//! Compressed text files (`.gz`, `.zst`), told by their name and decoded as a stream.
//! Positions stay line numbers of the decompressed text, so a restore decompresses from
//! the start and skips the lines already read.

use crate::sinks::FileFormat;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// How a file's bytes are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    /// gzip; several members one after another (as `cat a.gz b.gz` or pigz write them)
    /// are one stream.
    Gzip,
    /// Zstandard; several frames one after another are one stream.
    Zstd,
}

impl Compression {
    /// By the file's last extension: `.gz`, `.zst`, or none.
    pub(crate) fn of(path: &Path) -> Self {
        match path.extension().and_then(|x| x.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("zst") => Compression::Zstd,
            _ => Compression::None,
        }
    }

    /// The decompressed bytes of `file`.
    pub(crate) fn reader(self, file: File) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(match self {
            Compression::None => Box::new(file),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(file)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(file)?),
        })
    }
}

/// Whether a file in a source directory holds `format`: by its extension (`.json` too
/// for JSON lines), after a `.gz` or `.zst` one for JSON lines and CSV.
pub(crate) fn holds_format(path: &Path, format: FileFormat) -> bool {
    let inner = match Compression::of(path) {
        Compression::None => path.to_path_buf(),
        _ if format == FileFormat::Parquet => return false,
        _ => path.with_extension(""),
    };
    inner
        .extension()
        .is_some_and(|x| x == format.extension() || (format == FileFormat::Jsonl && x == "json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn files_are_told_by_their_extensions() {
        let holds = |name: &str, format| holds_format(Path::new(name), format);
        assert!(holds("a.jsonl", FileFormat::Jsonl) && holds("a.json.gz", FileFormat::Jsonl));
        assert!(holds("a.csv.zst", FileFormat::Csv) && holds("a.parquet", FileFormat::Parquet));
        assert!(!holds("a.parquet.gz", FileFormat::Parquet) && !holds("a.gz", FileFormat::Csv));
        assert!(!holds("a.csv.gz", FileFormat::Jsonl) && !holds("notes.txt", FileFormat::Csv));
        assert_eq!(Compression::of(Path::new("a.jsonl.gz")), Compression::Gzip);
        assert_eq!(Compression::of(Path::new("a.csv.zst")), Compression::Zstd);
        assert_eq!(Compression::of(Path::new("a.csv")), Compression::None);
    }

    #[test]
    fn concatenated_members_and_frames_read_as_one_stream() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = Vec::new();
        let mut zst = Vec::new();
        for part in ["a\nb\n", "c\n"] {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(part.as_bytes()).unwrap();
            gz.extend(e.finish().unwrap());
            zst.extend(zstd::encode_all(part.as_bytes(), 1).unwrap());
        }
        for (name, bytes) in [("x.jsonl.gz", gz), ("x.jsonl.zst", zst)] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let mut text = String::new();
            Compression::of(&path)
                .reader(File::open(&path).unwrap())
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
            assert_eq!(text, "a\nb\nc\n", "{name}");
        }
    }
}
