//! Dense ids for group keys: a fast path for one non-null Int64 column, Arrow's row
//! format for everything else. The row-format table keeps each key's bytes once, in
//! its `Rows`, and indexes them by id with the hash beside it: no allocation per key,
//! and growing the index moves ids without hashing a key again.

use riffle_core::arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use riffle_core::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use riffle_core::arrow::row::{RowConverter, Rows, SortField};
use riffle_core::Result;
use std::collections::HashMap;
use std::sync::Arc;

/// A fixed-seed hasher: a deterministic order, and fast on the integers the Int64
/// table holds.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

enum Table {
    /// No key columns: one group.
    Single { present: bool },
    /// One Int64 column.
    Int64 {
        map: FastMap<i64, u32>,
        keys: Vec<i64>,
    },
    /// Any columns, in Arrow's row format: `index` holds (hash, id) of the key
    /// `rows.row(id)`.
    Rows {
        converter: RowConverter,
        index: hashbrown::HashTable<(u64, u32)>,
        rows: Rows,
    },
}

/// The groups of a batch's rows (`groups[row]`, event time `ts[row]`) that `keep`
/// accepts, each once in the order it first appears, with the newest event time of its
/// rows: the groups an unbounded aggregate emits a row for after the batch.
pub fn touched_in_order(groups: &[u32], ts: &[i64], keep: impl Fn(u32) -> bool) -> Vec<(u32, i64)> {
    let mut touched: Vec<(u32, i64)> = Vec::new();
    let mut position: FastMap<u32, usize> =
        FastMap::with_capacity_and_hasher(groups.len(), Default::default());
    for (&g, &t) in groups.iter().zip(ts) {
        if !keep(g) {
            continue;
        }
        match position.get(&g) {
            Some(&p) => touched[p].1 = touched[p].1.max(t),
            None => {
                position.insert(g, touched.len());
                touched.push((g, t));
            }
        }
    }
    touched
}

/// Whether a table of `ids` group ids, `empty` of which hold nothing any more, is worth
/// rebuilding from what is still held: ids are never given back, so keys that came and
/// went (a CDC table's deleted rows) would otherwise hold memory for ever.
pub fn worth_rebuilding(empty: usize, ids: usize) -> bool {
    empty > 1024 && empty * 2 > ids
}

/// Interns key rows into dense group ids `0..len()`.
pub struct GroupKeys {
    table: Table,
    key_schema: SchemaRef,
}

impl GroupKeys {
    /// A table for keys with the fields of `key_schema`.
    ///
    /// # Errors
    /// A key type Arrow's row format cannot encode.
    pub fn new(key_schema: SchemaRef) -> Result<Self> {
        let fields = key_schema.fields();
        let table = if fields.is_empty() {
            Table::Single { present: false }
        } else if fields.len() == 1
            && fields[0].data_type() == &DataType::Int64
            && !fields[0].is_nullable()
        {
            Table::Int64 {
                map: FastMap::default(),
                keys: Vec::new(),
            }
        } else {
            let converter = RowConverter::new(
                fields
                    .iter()
                    .map(|f| SortField::new(f.data_type().clone()))
                    .collect(),
            )?;
            let rows = converter.empty_rows(0, 0);
            Table::Rows {
                converter,
                index: hashbrown::HashTable::new(),
                rows,
            }
        };
        Ok(Self { table, key_schema })
    }

    /// A table for a join's keys with the fields of `key_schema`: rows whose key holds
    /// a NULL are never interned (they match nothing), so nullable columns take the
    /// fast paths of non-null ones.
    ///
    /// # Errors
    /// A key type Arrow's row format cannot encode.
    pub fn for_matchable(key_schema: &SchemaRef) -> Result<Self> {
        let fields: Vec<_> = (key_schema.fields().iter())
            .map(|f| f.as_ref().clone().with_nullable(false))
            .collect();
        let mut table = Self::new(Arc::new(riffle_core::arrow::datatypes::Schema::new(fields)))?;
        table.key_schema = key_schema.clone();
        Ok(table)
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        match &self.table {
            Table::Single { present } => usize::from(*present),
            Table::Int64 { keys, .. } => keys.len(),
            Table::Rows { rows, .. } => rows.num_rows(),
        }
    }

    /// Whether no group exists yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Group ids of `rows` (indices into `keys`' arrays), appended to `out`; new keys get
    /// new ids.
    ///
    /// # Errors
    /// Key columns whose types differ from the table's.
    pub fn intern(&mut self, keys: &[ArrayRef], rows: &[u32], out: &mut Vec<u32>) -> Result<()> {
        out.clear();
        match &mut self.table {
            Table::Single { present } => {
                *present = true;
                out.resize(rows.len(), 0);
            }
            Table::Int64 { map, keys: stored } => {
                let values = keys[0].as_primitive::<Int64Type>().values();
                for &r in rows {
                    let v = values[r as usize];
                    let next = stored.len() as u32;
                    let id = *map.entry(v).or_insert_with(|| {
                        stored.push(v);
                        next
                    });
                    out.push(id);
                }
            }
            Table::Rows {
                converter,
                index,
                rows: stored,
            } => {
                let encoded = converter.convert_columns(keys)?;
                for &r in rows {
                    let row = encoded.row(r as usize);
                    let bytes = row.as_ref();
                    let hash = xxhash_rust::xxh3::xxh3_64(bytes);
                    let held = |&(h, id): &(u64, u32)| {
                        h == hash && stored.row(id as usize).as_ref() == bytes
                    };
                    let id = match index.find(hash, held) {
                        Some(&(_, id)) => id,
                        None => {
                            let id = stored.num_rows() as u32;
                            stored.push(row);
                            index.insert_unique(hash, (hash, id), |&(h, _)| h);
                            id
                        }
                    };
                    out.push(id);
                }
            }
        }
        Ok(())
    }

    /// The group id of every row of `keys`, `None` for a row whose key holds a NULL:
    /// a join's rows, which match nothing with a NULL key and so are never interned
    /// (the contract of [`for_matchable`](Self::for_matchable)).
    ///
    /// # Errors
    /// Key columns whose types differ from the table's.
    pub fn intern_matchable(&mut self, keys: &[ArrayRef]) -> Result<Vec<Option<u32>>> {
        let rows = crate::window_join::non_null_rows(keys);
        let mut ids = Vec::new();
        self.intern(keys, &rows, &mut ids)?;
        let mut by_row = vec![None; keys.first().map_or(0, |k| k.len())];
        for (&r, &id) in rows.iter().zip(&ids) {
            by_row[r as usize] = Some(id);
        }
        Ok(by_row)
    }

    /// The key columns of groups `ids`, in that order.
    ///
    /// # Errors
    /// Arrow failures decoding rows.
    pub fn keys(&self, ids: &[u32]) -> Result<Vec<ArrayRef>> {
        match &self.table {
            Table::Single { .. } => Ok(Vec::new()),
            Table::Int64 { keys, .. } => Ok(vec![Arc::new(Int64Array::from(
                ids.iter().map(|&i| keys[i as usize]).collect::<Vec<_>>(),
            ))]),
            Table::Rows {
                converter, rows, ..
            } => {
                let columns = converter.convert_rows(ids.iter().map(|&i| rows.row(i as usize)))?;
                Ok(self.with_key_types(columns))
            }
        }
    }

    /// Row decoding may drop nullability or field metadata; restores the key types.
    fn with_key_types(&self, columns: Vec<ArrayRef>) -> Vec<ArrayRef> {
        columns
            .into_iter()
            .zip(self.key_schema.fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    c
                } else {
                    riffle_core::arrow::compute::cast(&c, f.data_type()).unwrap_or(c)
                }
            })
            .collect()
    }

    /// The schema of the key columns.
    pub fn key_schema(&self) -> &SchemaRef {
        &self.key_schema
    }

    /// Whether keys have bytes of their own ([`key_bytes`](Self::key_bytes)): all but
    /// the single group of an aggregate without keys.
    pub fn has_key_bytes(&self) -> bool {
        !matches!(self.table, Table::Single { .. })
    }

    /// Group `id`'s key as bytes that identify it (Arrow's row format, or an Int64's
    /// big-endian bytes), replacing `out`: the spill tier's key.
    pub fn key_bytes(&self, id: u32, out: &mut Vec<u8>) {
        out.clear();
        match &self.table {
            Table::Single { .. } => {}
            Table::Int64 { keys, .. } => out.extend_from_slice(&keys[id as usize].to_be_bytes()),
            Table::Rows { rows, .. } => out.extend_from_slice(rows.row(id as usize).as_ref()),
        }
    }

    /// The [`key_bytes`](Self::key_bytes) each of `rows` rows of `keys` would have once
    /// interned, to `each(row, bytes)`, without interning them.
    ///
    /// # Errors
    /// Key columns whose types differ from the table's.
    pub fn for_each_key_bytes(
        &self,
        keys: &[ArrayRef],
        rows: usize,
        mut each: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        match &self.table {
            Table::Single { .. } => (0..rows).for_each(|row| each(row, &[])),
            Table::Int64 { .. } => {
                let values = (keys.first())
                    .and_then(|k| k.as_primitive_opt::<Int64Type>())
                    .ok_or_else(|| {
                        riffle_core::arrow::error::ArrowError::InvalidArgumentError(
                            "the group key is not one Int64 column".into(),
                        )
                    })?
                    .values();
                for (row, v) in values.iter().enumerate() {
                    each(row, &v.to_be_bytes());
                }
            }
            Table::Rows { converter, .. } => {
                let encoded = converter.convert_columns(keys)?;
                for (row, bytes) in encoded.iter().enumerate() {
                    each(row, bytes.as_ref());
                }
            }
        }
        Ok(())
    }

    /// The length of group `id`'s [`key_bytes`](Self::key_bytes).
    pub fn key_len(&self, id: u32) -> usize {
        match &self.table {
            Table::Single { .. } => 0,
            Table::Int64 { .. } => 8,
            Table::Rows { rows, .. } => rows.row(id as usize).as_ref().len(),
        }
    }

    /// The key columns of keys given as [`key_bytes`](Self::key_bytes) made them.
    ///
    /// # Errors
    /// Bytes that are not such a key (a spill tier from another plan).
    pub fn keys_from_bytes(&self, bytes: &[&[u8]]) -> Result<Vec<ArrayRef>> {
        match &self.table {
            Table::Single { .. } => Ok(Vec::new()),
            Table::Int64 { .. } => {
                let values = bytes
                    .iter()
                    .map(|b| {
                        let b: [u8; 8] = (*b).try_into().map_err(|_| {
                            riffle_core::Error::Spill("a spilled Int64 key is not 8 bytes".into())
                        })?;
                        Ok(i64::from_be_bytes(b))
                    })
                    .collect::<Result<Vec<i64>>>()?;
                Ok(vec![Arc::new(Int64Array::from(values))])
            }
            Table::Rows { converter, .. } => {
                let parser = converter.parser();
                let columns = converter.convert_rows(bytes.iter().map(|b| parser.parse(b)))?;
                Ok(self.with_key_types(columns))
            }
        }
    }

    /// Bytes this table holds: keys, and the index over them.
    pub fn memory_size(&self) -> usize {
        match &self.table {
            Table::Single { .. } => 0,
            Table::Int64 { map, keys } => keys.capacity() * 8 + map.capacity() * 17,
            Table::Rows { index, rows, .. } => rows.size() + index.capacity() * 17,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{touched_in_order, worth_rebuilding, GroupKeys};
    use riffle_core::arrow::array::{Array, ArrayRef, Int64Array, StringArray};
    use riffle_core::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn intern(table: &mut GroupKeys, keys: &[ArrayRef]) -> Vec<u32> {
        let rows: Vec<u32> = (0..keys[0].len() as u32).collect();
        let mut ids = Vec::new();
        table.intern(keys, &rows, &mut ids).expect("interned");
        ids
    }

    #[test]
    fn equal_keys_of_many_columns_share_an_id_across_batches_and_each_reads_back() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
        ]));
        let mut table = GroupKeys::new(schema).expect("table");
        // 10,000 keys, each twice, the second time in another batch and order; NULLs
        // are keys like any other.
        let a: Vec<Option<i64>> = (0..10_000).map(|i| (i % 7 != 0).then_some(i / 3)).collect();
        let b: Vec<Option<String>> = (0..10_000)
            .map(|i: i64| (i % 5 != 0).then(|| format!("k{}", i % 3)))
            .collect();
        let columns = |order: &[usize]| -> Vec<ArrayRef> {
            vec![
                Arc::new(Int64Array::from_iter(order.iter().map(|&i| a[i]))),
                Arc::new(StringArray::from_iter(order.iter().map(|&i| b[i].clone()))),
            ]
        };
        let forward: Vec<usize> = (0..10_000).collect();
        let backward: Vec<usize> = (0..10_000).rev().collect();
        let first = intern(&mut table, &columns(&forward));
        let second = intern(&mut table, &columns(&backward));
        let distinct: std::collections::HashSet<_> = (0..10_000).map(|i| (a[i], &b[i])).collect();
        assert_eq!(table.len(), distinct.len(), "one id per distinct key");
        for (i, &j) in backward.iter().enumerate() {
            assert_eq!(
                second[i], first[j],
                "row {j} got another id the second time"
            );
        }
        let keys = table.keys(&first).expect("keys");
        let read = |r: usize| {
            let a = keys[0].as_any().downcast_ref::<Int64Array>().expect("a");
            let b = keys[1].as_any().downcast_ref::<StringArray>().expect("b");
            (
                a.is_valid(r).then(|| a.value(r)),
                b.is_valid(r).then(|| b.value(r).to_string()),
            )
        };
        for r in 0..10_000 {
            assert_eq!(read(r), (a[r], b[r].clone()), "key of row {r}");
        }
    }

    #[test]
    fn a_joins_nullable_key_keeps_its_type_when_it_takes_the_non_null_path() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
        let mut table = GroupKeys::for_matchable(&schema).expect("table");
        let keys: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![5, 7, 5, 9]))];
        assert_eq!(intern(&mut table, &keys), [0, 1, 0, 2]);
        assert_eq!(table.key_schema(), &schema);
        let read = table.keys(&[2, 0]).expect("keys");
        assert_eq!(
            read[0].as_ref(),
            &Int64Array::from(vec![9, 5]) as &dyn Array
        );
    }

    #[test]
    fn a_table_is_rebuilt_only_when_most_of_many_ids_are_empty() {
        assert!(!worth_rebuilding(1024, 1024), "a small table is kept");
        assert!(!worth_rebuilding(2000, 4000), "half empty is kept");
        assert!(worth_rebuilding(2001, 4000));
    }

    #[test]
    fn each_group_once_in_first_touched_order_with_its_newest_time() {
        let groups = [3, 1, 3, 2, 1];
        let ts = [10, 40, 30, 5, 20];
        assert_eq!(
            touched_in_order(&groups, &ts, |_| true),
            [(3, 30), (1, 40), (2, 5)]
        );
        assert_eq!(
            touched_in_order(&groups, &ts, |g| g != 1),
            [(3, 30), (2, 5)]
        );
    }
}
