//! Named behaviours of the join of changelogs, through Arrow batches and its state.

use super::*;
use riffle_core::arrow::array::{Int64Array, StringArray, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::DataType;
use riffle_core::arrow::util::display::array_value_to_string;
use std::collections::BTreeMap;

/// An aggregate's changelog: `k`, `n`.
fn counts() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("n", DataType::Int64, false),
        row_kind_field(),
    ])
}

/// An append-only table: `id`, `name`.
fn names() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, false),
    ])
}

fn count_rows(rows: &[(RowKind, Option<i64>, i64)]) -> RecordBatch {
    RecordBatch::try_new(
        counts().schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(row_kind_array(rows.iter().map(|r| r.0))),
            Arc::new(TimestampNanosecondArray::from(vec![7; rows.len()]).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

fn name_rows(rows: &[(i64, &str)]) -> RecordBatch {
    RecordBatch::try_new(
        names().schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(TimestampNanosecondArray::from(vec![3; rows.len()]).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

fn factory(outer: (bool, bool)) -> ChangelogJoinFactory {
    ChangelogJoinFactory::new(
        &counts(),
        &names(),
        (&["k"], &["id"]),
        (&["k", "n"], &["name"]),
        outer,
    )
    .unwrap()
}

fn operator(f: &ChangelogJoinFactory) -> Box<dyn Operator> {
    f.create(&OperatorContext::detached("join", 0, 1)).unwrap()
}

/// The table a changelog of output batches leaves: each row (as text) and how many
/// times it is there; a withdrawal of a row that is not there fails the test.
fn apply(table: &mut BTreeMap<String, i64>, out: &[RecordBatch]) {
    for b in out {
        let kinds = row_kinds(b).unwrap().unwrap();
        for (r, kind) in kinds.iter().enumerate() {
            let text = (0..b.num_columns() - 2)
                .map(|c| array_value_to_string(b.column(c), r).unwrap())
                .collect::<Vec<_>>()
                .join(",");
            let n = table.entry(text.clone()).or_default();
            *n += if kind.is_retraction() { -1 } else { 1 };
            assert!(*n >= 0, "withdrew {text}, which is not there");
            if *n == 0 {
                table.remove(&text);
            }
        }
    }
}

fn table(rows: &[&str]) -> BTreeMap<String, i64> {
    let mut t = BTreeMap::new();
    for r in rows {
        *t.entry(r.to_string()).or_default() += 1;
    }
    t
}

#[test]
fn an_updated_aggregate_row_replaces_its_joined_rows() {
    let f = factory((false, false));
    let mut op = operator(&f);
    let mut out = Vec::new();
    op.on_batch(1, name_rows(&[(1, "a"), (2, "b")]), &mut out)
        .unwrap();
    op.on_batch(0, count_rows(&[(RowKind::Insert, Some(1), 1)]), &mut out)
        .unwrap();
    op.on_batch(
        0,
        count_rows(&[
            (RowKind::UpdateBefore, Some(1), 1),
            (RowKind::UpdateAfter, Some(1), 2),
            (RowKind::Insert, Some(3), 1),
        ]),
        &mut out,
    )
    .unwrap();
    let mut t = BTreeMap::new();
    apply(&mut t, &out);
    assert_eq!(t, table(&["1,2,a"]));
    assert!(!f.output_schema().schema.field(2).is_nullable());
    assert!(f
        .describe()
        .starts_with("inner join of changelogs on (k) = (id)"));
}

#[test]
fn a_left_join_pads_rows_without_a_partner_and_a_null_key_has_none() {
    let f = factory((true, false));
    let mut op = operator(&f);
    let mut out = Vec::new();
    op.on_batch(
        0,
        count_rows(&[(RowKind::Insert, Some(1), 1), (RowKind::Insert, None, 4)]),
        &mut out,
    )
    .unwrap();
    op.on_batch(1, name_rows(&[(1, "a"), (4, "d")]), &mut out)
        .unwrap();
    op.on_batch(0, count_rows(&[(RowKind::Delete, None, 4)]), &mut out)
        .unwrap();
    let mut t = BTreeMap::new();
    apply(&mut t, &out);
    assert_eq!(t, table(&["1,1,a"]));
    assert!(
        f.output_schema().schema.field(2).is_nullable(),
        "right columns padded"
    );
}

#[test]
fn a_restored_join_withdraws_the_pairs_its_predecessor_emitted_at_another_parallelism() {
    let f = factory((true, true));
    let mut first = operator(&f);
    let mut out = Vec::new();
    first
        .on_batch(1, name_rows(&[(1, "a"), (1, "a"), (2, "b")]), &mut out)
        .unwrap();
    first
        .on_batch(0, count_rows(&[(RowKind::Insert, Some(1), 5)]), &mut out)
        .unwrap();
    let state = first.snapshot(Epoch(1)).unwrap();
    assert_eq!(
        state.rows(),
        3,
        "one left row, two distinct right rows: {state:?}"
    );
    // Two subtasks of the restored operator, each given its own key groups.
    let mut t = BTreeMap::new();
    apply(&mut t, &out);
    for subtask in 0..2 {
        let mine = OperatorState::of(
            (state.batches.iter())
                .map(|b| only_key_groups_of(b, subtask, 2))
                .collect(),
        );
        let mut op = operator(&f);
        op.restore(mine).unwrap();
        let mut out = Vec::new();
        let key = if subtask_of_key(1, 2) == subtask {
            1
        } else {
            2
        };
        if key == 1 {
            op.on_batch(0, count_rows(&[(RowKind::Delete, Some(1), 5)]), &mut out)
                .unwrap();
        } else {
            op.on_batch(1, name_rows(&[(2, "b")]), &mut out).unwrap();
            // Nothing of key 1 is held here: withdrawing it is refused, not ignored.
            let refused = op.on_batch(
                0,
                count_rows(&[(RowKind::Delete, Some(1), 5)]),
                &mut Vec::new(),
            );
            assert!(refused.is_err());
        }
        apply(&mut t, &out);
    }
    assert_eq!(t, table(&[",,a", ",,a", ",,b", ",,b"]));
}

#[test]
fn a_state_batch_of_other_columns_is_refused_by_name() {
    let f = factory((false, false));
    let mut first = operator(&f);
    first
        .on_batch(1, name_rows(&[(1, "a")]), &mut Vec::new())
        .unwrap();
    let state = first.snapshot(Epoch(1)).unwrap();
    let other = ChangelogJoinFactory::new(
        &names(),
        &counts(),
        (&["id"], &["k"]),
        (&["id", "name"], &["n"]),
        (false, false),
    )
    .unwrap();
    let err = operator(&other).restore(state).unwrap_err().to_string();
    assert!(err.contains("the right rows have columns"), "{err}");
}

fn subtask_of_key(key: i64, parallelism: usize) -> usize {
    let keys: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![Some(key)]))];
    let (_, g) =
        crate::window::key_group_column(&keys, 1, riffle_core::DEFAULT_MAX_PARALLELISM).unwrap();
    let g = g
        .as_primitive::<riffle_core::arrow::datatypes::UInt16Type>()
        .value(0);
    riffle_core::KeyGroup(g).subtask(parallelism, riffle_core::DEFAULT_MAX_PARALLELISM)
}

fn only_key_groups_of(b: &RecordBatch, subtask: usize, parallelism: usize) -> RecordBatch {
    let groups = b
        .column(0)
        .as_primitive::<riffle_core::arrow::datatypes::UInt16Type>();
    let keep: riffle_core::arrow::array::BooleanArray = groups
        .values()
        .iter()
        .map(|&g| {
            Some(
                riffle_core::KeyGroup(g).subtask(parallelism, riffle_core::DEFAULT_MAX_PARALLELISM)
                    == subtask,
            )
        })
        .collect();
    riffle_core::arrow::compute::filter_record_batch(b, &keep).unwrap()
}

#[test]
fn keys_whose_rows_all_left_are_forgotten_at_a_snapshot() {
    let f = factory((true, false));
    let mut op = f
        .operator(&OperatorContext::detached("join", 0, 1))
        .unwrap();
    let mut out = Vec::new();
    let added: Vec<_> = (0..3000).map(|k| (RowKind::Insert, Some(k), 1)).collect();
    let withdrawn: Vec<_> = (0..2990).map(|k| (RowKind::Delete, Some(k), 1)).collect();
    op.on_batch(0, count_rows(&added), &mut out).unwrap();
    op.on_batch(0, count_rows(&withdrawn), &mut out).unwrap();
    assert_eq!(op.keyed.len(), 3000);
    let state = op.snapshot(Epoch(1)).unwrap();
    assert_eq!(state.rows(), 10);
    assert_eq!(op.keyed.len(), 10, "only the keys that still hold rows");
    // What is held still joins and withdraws as before.
    op.on_batch(1, name_rows(&[(2995, "x"), (5, "y")]), &mut out)
        .unwrap();
    op.on_batch(0, count_rows(&[(RowKind::Delete, Some(2999), 1)]), &mut out)
        .unwrap();
    let mut t = BTreeMap::new();
    apply(&mut t, &out);
    let expected: Vec<String> = (2990..2999)
        .map(|k| {
            if k == 2995 {
                format!("{k},1,x")
            } else {
                format!("{k},1,")
            }
        })
        .collect();
    assert_eq!(
        t,
        table(&expected.iter().map(String::as_str).collect::<Vec<_>>())
    );
}
