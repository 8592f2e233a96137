//! Rows scattered over many stored batches, gathered into one array per column.

use foldhash::{HashMap, HashMapExt};
use riffle_core::arrow::array::{Array, ArrayRef};
use riffle_core::arrow::compute::interleave;
use riffle_core::arrow::error::ArrowError;

/// References `(batch, row)` to stored rows, renumbered to the batches they use.
///
/// `interleave` checks the type and nulls of every array it is handed; handing it all
/// of a join side's stored batches made each output cost as much as the whole side
/// (Nexmark q9 spent a fifth of its time comparing data types).
pub struct Referenced {
    /// The stored batches referenced, in order of first reference.
    batches: Vec<usize>,
    /// The references, as (position in `batches`, row).
    rows: Vec<(usize, usize)>,
}

impl Referenced {
    pub fn new(rows: impl IntoIterator<Item = (usize, usize)>) -> Self {
        let mut position: HashMap<usize, usize> = HashMap::new();
        let mut batches = Vec::new();
        let rows = rows
            .into_iter()
            .map(|(batch, row)| {
                let at = *position.entry(batch).or_insert_with(|| {
                    batches.push(batch);
                    batches.len() - 1
                });
                (at, row)
            })
            .collect();
        Self { batches, rows }
    }

    /// The stored batches referenced: `column` takes one array of each, in this order.
    pub fn batches(&self) -> &[usize] {
        &self.batches
    }

    /// One column of the referenced rows; `arrays[i]` is that column of `batches()[i]`.
    pub fn column(&self, arrays: &[&dyn Array]) -> Result<ArrayRef, ArrowError> {
        interleave(arrays, &self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::Referenced;
    use riffle_core::arrow::array::{Array, AsArray, Int64Array};
    use riffle_core::arrow::datatypes::Int64Type;

    #[test]
    fn only_the_referenced_batches_are_handed_over_and_rows_keep_their_order() {
        let stored: Vec<Int64Array> = (0..5)
            .map(|b| Int64Array::from(vec![b * 10, b * 10 + 1]))
            .collect();
        let refs = Referenced::new([(3, 1), (1, 0), (3, 0)]);
        assert_eq!(refs.batches(), &[3, 1]);
        let arrays: Vec<&dyn Array> = refs.batches().iter().map(|&b| &stored[b] as _).collect();
        let column = refs.column(&arrays).unwrap();
        let values: Vec<i64> = column.as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(values, vec![31, 10, 30]);
    }
}
