//! Key groups: the unit of keyed partitioning and of state redistribution.
//!
//! `key_group = stable_hash(key) % max_parallelism` and
//! `subtask = key_group * parallelism / max_parallelism` (docs/engine.md, "Key groups"). The hash is
//! XXH3-64 with seed 0 over a canonical encoding of each key column, chained column by
//! column (the previous column's hash is the next one's seed). It must never change:
//! state written by one riffle version is restored by the next. Its name is
//! [`KEY_HASH_ALGORITHM`], recorded in manifests.
//!
//! Canonical encodings: every integer type and timestamps as the little-endian bytes of
//! the value widened to `i64` (unsigned 64-bit as `u64`), floats as the `f64` bits,
//! strings and binaries as their bytes, booleans as one byte, null as the empty input
//! hashed with a distinct seed.

use crate::error::{Error, Result};
use datafusion_common::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, GenericBinaryArray, GenericStringArray,
    OffsetSizeTrait, PrimitiveArray,
};
use datafusion_common::arrow::datatypes::{self as dt, ArrowPrimitiveType, DataType};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Name of the key hash, recorded in manifests so a restore can refuse a mismatch.
pub const KEY_HASH_ALGORITHM: &str = "xxh3-64-seed0-chained-v1";

/// Default number of key groups (the most subtasks a keyed operator can ever have).
pub const DEFAULT_MAX_PARALLELISM: u16 = 128;

const NULL_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// One key group: `stable_hash(key) % max_parallelism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KeyGroup(pub u16);

impl KeyGroup {
    /// The key group of a key hash.
    pub fn of_hash(hash: u64, max_parallelism: u16) -> KeyGroup {
        KeyGroup((hash % u64::from(max_parallelism)) as u16)
    }

    /// The subtask (of `parallelism`) that owns this key group.
    pub fn subtask(self, parallelism: usize, max_parallelism: u16) -> usize {
        usize::from(self.0) * parallelism / usize::from(max_parallelism)
    }
}

/// Computes the stable key hash for rows of key columns.
#[derive(Debug, Default)]
pub struct KeyHasher {
    hashes: Vec<u64>,
}

impl KeyHasher {
    /// Hashes each of `rows` rows of `columns` (all of that length); the returned slice
    /// has one hash per row. The empty key (no columns: a global aggregate) hashes every
    /// row to 0, so all of them go to key group 0.
    ///
    /// # Errors
    /// A key column of a type riffle cannot hash (lists, structs, …).
    pub fn hash_rows(&mut self, columns: &[ArrayRef], rows: usize) -> Result<&[u64]> {
        self.hashes.clear();
        self.hashes.resize(rows, 0);
        for column in columns {
            hash_column(column.as_ref(), &mut self.hashes)?;
        }
        Ok(&self.hashes)
    }
}

fn hash_column(array: &dyn Array, hashes: &mut [u64]) -> Result<()> {
    match array.data_type() {
        DataType::Int8 => hash_ints::<dt::Int8Type>(array, hashes),
        DataType::Int16 => hash_ints::<dt::Int16Type>(array, hashes),
        DataType::Int32 => hash_ints::<dt::Int32Type>(array, hashes),
        DataType::Int64 => hash_ints::<dt::Int64Type>(array, hashes),
        DataType::UInt8 => hash_ints::<dt::UInt8Type>(array, hashes),
        DataType::UInt16 => hash_ints::<dt::UInt16Type>(array, hashes),
        DataType::UInt32 => hash_ints::<dt::UInt32Type>(array, hashes),
        DataType::UInt64 => hash_ints::<dt::UInt64Type>(array, hashes),
        DataType::Date32 => hash_ints::<dt::Date32Type>(array, hashes),
        DataType::Timestamp(unit, _) => match unit {
            dt::TimeUnit::Second => hash_ints::<dt::TimestampSecondType>(array, hashes),
            dt::TimeUnit::Millisecond => hash_ints::<dt::TimestampMillisecondType>(array, hashes),
            dt::TimeUnit::Microsecond => hash_ints::<dt::TimestampMicrosecondType>(array, hashes),
            dt::TimeUnit::Nanosecond => hash_ints::<dt::TimestampNanosecondType>(array, hashes),
        },
        DataType::Float32 => {
            let a = array.as_primitive::<dt::Float32Type>();
            hash_each(a, hashes, |v| f64::from(v).to_bits().to_le_bytes());
        }
        DataType::Float64 => {
            let a = array.as_primitive::<dt::Float64Type>();
            hash_each(a, hashes, |v| v.to_bits().to_le_bytes());
        }
        DataType::Boolean => hash_bools(array.as_boolean(), hashes),
        DataType::Utf8 => hash_strings(array.as_string::<i32>(), hashes),
        DataType::LargeUtf8 => hash_strings(array.as_string::<i64>(), hashes),
        DataType::Binary => hash_binaries(array.as_binary::<i32>(), hashes),
        DataType::LargeBinary => hash_binaries(array.as_binary::<i64>(), hashes),
        other => {
            return Err(Error::plan(format!(
                "cannot use a column of type {other} as a key; use integers, strings, booleans, floats or timestamps"
            )))
        }
    }
    Ok(())
}

/// Widening to the canonical 8-byte form; `u64` keeps its own bits.
trait CanonicalInt {
    fn canonical(self) -> [u8; 8];
}
macro_rules! canonical_signed {
    ($($t:ty),*) => {$(impl CanonicalInt for $t { fn canonical(self) -> [u8; 8] { (self as i64).to_le_bytes() } })*};
}
canonical_signed!(i8, i16, i32, i64, u8, u16, u32);
impl CanonicalInt for u64 {
    fn canonical(self) -> [u8; 8] {
        self.to_le_bytes()
    }
}

fn hash_ints<T>(array: &dyn Array, hashes: &mut [u64])
where
    T: ArrowPrimitiveType,
    T::Native: CanonicalInt,
{
    hash_each(array.as_primitive::<T>(), hashes, |v| v.canonical());
}

fn hash_each<T: ArrowPrimitiveType>(
    array: &PrimitiveArray<T>,
    hashes: &mut [u64],
    encode: impl Fn(T::Native) -> [u8; 8],
) {
    let values = array.values();
    if array.null_count() == 0 {
        for (h, v) in hashes.iter_mut().zip(values.iter()) {
            *h = xxh3_64_with_seed(&encode(*v), *h);
        }
    } else {
        for (i, h) in hashes.iter_mut().enumerate() {
            *h = if array.is_null(i) {
                xxh3_64_with_seed(&[], *h ^ NULL_SEED)
            } else {
                xxh3_64_with_seed(&encode(values[i]), *h)
            };
        }
    }
}

fn hash_bools(array: &BooleanArray, hashes: &mut [u64]) {
    for (i, h) in hashes.iter_mut().enumerate() {
        *h = if array.is_null(i) {
            xxh3_64_with_seed(&[], *h ^ NULL_SEED)
        } else {
            xxh3_64_with_seed(&[u8::from(array.value(i))], *h)
        };
    }
}

fn hash_strings<O: OffsetSizeTrait>(array: &GenericStringArray<O>, hashes: &mut [u64]) {
    for (i, h) in hashes.iter_mut().enumerate() {
        *h = if array.is_null(i) {
            xxh3_64_with_seed(&[], *h ^ NULL_SEED)
        } else {
            xxh3_64_with_seed(array.value(i).as_bytes(), *h)
        };
    }
}

fn hash_binaries<O: OffsetSizeTrait>(array: &GenericBinaryArray<O>, hashes: &mut [u64]) {
    for (i, h) in hashes.iter_mut().enumerate() {
        *h = if array.is_null(i) {
            xxh3_64_with_seed(&[], *h ^ NULL_SEED)
        } else {
            xxh3_64_with_seed(array.value(i), *h)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion_common::arrow::array::{Int32Array, Int64Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn hash_is_stable_across_versions() {
        // Pinned values: if these change, state written by older versions lands in the
        // wrong key groups. Never update them without a state-format migration.
        let mut hasher = KeyHasher::default();
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![0, 1, 1000, -7]));
        let hashes = hasher.hash_rows(&[keys], 4).unwrap().to_vec();
        let expected: Vec<u64> = [0i64, 1, 1000, -7]
            .iter()
            .map(|v| xxh3_64_with_seed(&v.to_le_bytes(), 0))
            .collect();
        assert_eq!(hashes, expected);
        assert_eq!(
            xxh3_64_with_seed(&0i64.to_le_bytes(), 0),
            0xc77b_3abb_6f87_acd9
        );
    }

    #[test]
    fn integer_widths_hash_alike() {
        let mut hasher = KeyHasher::default();
        let a: ArrayRef = Arc::new(Int32Array::from(vec![5, -3]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![5, -3]));
        let ha = hasher.hash_rows(&[a], 2).unwrap().to_vec();
        let hb = hasher.hash_rows(&[b], 2).unwrap().to_vec();
        assert_eq!(ha, hb);
    }

    #[test]
    fn the_empty_key_sends_every_row_to_key_group_zero() {
        // A global aggregate is keyed by no column: every row has the same key, and
        // a hash per row (not none at all) must come back.
        let mut hasher = KeyHasher::default();
        let hashes = hasher.hash_rows(&[], 3).unwrap().to_vec();
        assert_eq!(hashes.len(), 3);
        assert!(hashes
            .iter()
            .all(|h| KeyGroup::of_hash(*h, DEFAULT_MAX_PARALLELISM) == KeyGroup(0)));
    }

    #[test]
    fn multi_column_keys_depend_on_every_column() {
        let mut hasher = KeyHasher::default();
        let a: ArrayRef = Arc::new(Int64Array::from(vec![1, 1]));
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x", "y"]));
        let h = hasher.hash_rows(&[a, s], 2).unwrap().to_vec();
        assert_ne!(h[0], h[1]);
    }

    #[test]
    fn key_groups_spread_evenly_over_subtasks() {
        let max = DEFAULT_MAX_PARALLELISM;
        for parallelism in [1usize, 2, 3, 4, 8] {
            let mut owned = vec![0usize; parallelism];
            for g in 0..max {
                owned[KeyGroup(g).subtask(parallelism, max)] += 1;
            }
            let (lo, hi) = (owned.iter().min().unwrap(), owned.iter().max().unwrap());
            assert!(hi - lo <= 1, "{parallelism}: {owned:?}");
        }
    }
}
