//! The Parquet page codec of the data files riffle writes (the connector's
//! `'compression'` option). Every codec here is one that PyIceberg, Spark and Trino
//! read; `lz4` is Parquet's `LZ4_RAW` (the framed `LZ4` is deprecated by the format).

use riffle_core::parquet::basic::{Compression, ZstdLevel};

/// A data file's page codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    #[default]
    Snappy,
    /// Zstandard at level 1 (Iceberg's own default codec; its Java writer uses level 3,
    /// which compresses a few percent smaller and runs slower).
    Zstd,
    Lz4Raw,
    Uncompressed,
}

impl Codec {
    /// Every codec, in the order `--help` lists them.
    pub const ALL: [Codec; 4] = [
        Codec::Snappy,
        Codec::Zstd,
        Codec::Lz4Raw,
        Codec::Uncompressed,
    ];

    /// The option values, in the order of [`Codec::ALL`].
    pub const NAMES: [&'static str; 4] = [
        Codec::ALL[0].name(),
        Codec::ALL[1].name(),
        Codec::ALL[2].name(),
        Codec::ALL[3].name(),
    ];

    /// The codec the option value `name` names (one of [`Codec::NAMES`]).
    pub fn from_name(name: &str) -> Option<Codec> {
        Codec::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The option value naming it.
    pub const fn name(self) -> &'static str {
        match self {
            Codec::Snappy => "snappy",
            Codec::Zstd => "zstd",
            Codec::Lz4Raw => "lz4",
            Codec::Uncompressed => "uncompressed",
        }
    }

    /// The Parquet writer's setting.
    pub fn parquet(self) -> Compression {
        match self {
            Codec::Snappy => Compression::SNAPPY,
            Codec::Zstd => Compression::ZSTD(ZstdLevel::default()),
            Codec::Lz4Raw => Compression::LZ4_RAW,
            Codec::Uncompressed => Compression::UNCOMPRESSED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_names_a_codec() {
        for name in Codec::NAMES {
            assert_eq!(Codec::from_name(name).map(Codec::name), Some(name));
        }
        assert_eq!(Codec::NAMES, ["snappy", "zstd", "lz4", "uncompressed"]);
        assert_eq!(Codec::from_name("gzip"), None);
    }

    #[test]
    fn lz4_is_the_raw_block_format() {
        assert_eq!(Codec::Lz4Raw.parquet(), Compression::LZ4_RAW);
    }
}
