//! The rows an outer window join emits for a closed window: every matched pair, then
//! the rows of an outer side that matched nothing, with the other side's columns NULL.

use riffle_core::arrow::array::{new_null_array, ArrayRef, UInt32Array};
use riffle_core::arrow::compute::take as take_kernel;
use riffle_core::Result;

/// The row each output row takes from the left and the right buffered rows (`None`:
/// padded). `pairs_left`/`pairs_right` are the matched pairs; `rows` how many rows each
/// side buffered; `outer` which sides' unmatched rows are emitted.
pub(crate) fn picks(
    pairs_left: Vec<u32>,
    pairs_right: Vec<u32>,
    rows: (usize, usize),
    outer: (bool, bool),
) -> (Vec<Option<u32>>, Vec<Option<u32>>) {
    let unmatched = |pairs: &[u32], n: usize| {
        let mut matched = vec![false; n];
        for &r in pairs {
            matched[r as usize] = true;
        }
        (0..n as u32)
            .filter(|&r| !matched[r as usize])
            .collect::<Vec<_>>()
    };
    let lonely_left = if outer.0 {
        unmatched(&pairs_left, rows.0)
    } else {
        Vec::new()
    };
    let lonely_right = if outer.1 {
        unmatched(&pairs_right, rows.1)
    } else {
        Vec::new()
    };
    let mut left: Vec<Option<u32>> = pairs_left.into_iter().map(Some).collect();
    let mut right: Vec<Option<u32>> = pairs_right.into_iter().map(Some).collect();
    left.extend(lonely_left.iter().map(|&r| Some(r)));
    right.extend(lonely_left.iter().map(|_| None));
    left.extend(lonely_right.iter().map(|_| None));
    right.extend(lonely_right.iter().map(|&r| Some(r)));
    (left, right)
}

/// `columns` at the picked rows, NULL where none is picked.
pub(crate) fn take(columns: &[ArrayRef], picks: &[Option<u32>]) -> Result<Vec<ArrayRef>> {
    let indices = UInt32Array::from(picks.to_vec());
    columns
        .iter()
        .map(|c| {
            if c.is_empty() {
                // Only NULLs can be picked from a side that buffered nothing.
                return Ok(new_null_array(c.data_type(), picks.len()));
            }
            Ok(take_kernel(c.as_ref(), &indices, None)?)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outer_side_adds_its_unmatched_rows_padded() {
        // Left rows 0..3, right rows 0..2; pairs (0, 1) and (2, 1).
        let pairs = || (vec![0, 2], vec![1, 1]);
        let (l, r) = pairs();
        assert_eq!(
            picks(l, r, (3, 2), (false, false)),
            (vec![Some(0), Some(2)], vec![Some(1), Some(1)])
        );
        let (l, r) = pairs();
        assert_eq!(
            picks(l, r, (3, 2), (true, false)),
            (
                vec![Some(0), Some(2), Some(1)],
                vec![Some(1), Some(1), None]
            )
        );
        let (l, r) = pairs();
        assert_eq!(
            picks(l, r, (3, 2), (true, true)),
            (
                vec![Some(0), Some(2), Some(1), None],
                vec![Some(1), Some(1), None, Some(0)]
            )
        );
    }
}
