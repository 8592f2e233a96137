//! A window join's state batches: each window's buffered rows per side (or a semi
//! join's distinct right keys), tagged with the window, and their restore.

use super::*;

impl WindowJoin {
    /// Adds restored distinct right keys (a semi join's state) to their windows.
    pub(super) fn restore_keys(
        &mut self,
        starts: &riffle_core::arrow::array::TimestampNanosecondArray,
        keys: &[ArrayRef],
    ) -> Result<()> {
        let mut by_window: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
        for (row, start) in starts.values().iter().enumerate() {
            by_window.entry(*start).or_default().push(row as u32);
        }
        self.add_right_keys(keys, by_window)
    }

    /// Adds the right keys at `rows` of `keys` to each window's distinct set.
    pub(super) fn add_right_keys(
        &mut self,
        keys: &[ArrayRef],
        by_window: BTreeMap<EventTime, Vec<u32>>,
    ) -> Result<()> {
        let mut ids = Vec::new();
        for (start, rows) in by_window {
            let buffered = self.windows.entry(start).or_default();
            let set = match &mut buffered.right_keys {
                Some(set) => set,
                None => buffered.right_keys.insert(KeySet {
                    keys: GroupKeys::new(self.plan.key_schema.clone())?,
                    delta: DeltaLog::default(),
                }),
            };
            set.keys.intern(keys, &rows, &mut ids)?;
        }
        Ok(())
    }

    /// One state batch for the distinct right keys `ids` of the window at `start`.
    pub(super) fn key_state_batch(
        &self,
        start: EventTime,
        set: &GroupKeys,
        ids: &[u32],
    ) -> Result<RecordBatch> {
        let keys = set.keys(ids)?;
        let fields = self.plan.key_schema.fields().clone();
        self.struct_state_batch(start, RIGHT_KEYS, &keys, fields, keys.clone())
    }

    /// One state batch for buffered `rows` of `side` in the window at `start`.
    pub(super) fn state_batch(
        &self,
        start: EventTime,
        side: usize,
        rows: &RecordBatch,
    ) -> Result<RecordBatch> {
        let keys = self.keys_of(side, rows)?;
        let name = if side == 0 { "left" } else { "right" };
        let fields = self.plan.buffers[side].schema.fields().clone();
        self.struct_state_batch(start, name, &keys, fields, rows.columns().to_vec())
    }

    /// `_key_group` (of `keys`), `window_start`, and the struct column `name` of
    /// `columns`: the layout of every window join state batch.
    pub(super) fn struct_state_batch(
        &self,
        start: EventTime,
        name: &str,
        keys: &[ArrayRef],
        fields: Fields,
        columns: Vec<ArrayRef>,
    ) -> Result<RecordBatch> {
        let rows = keys.first().map_or(0, |k| k.len());
        let (kg_field, kg) = crate::window::key_group_column(keys, rows, self.max_parallelism)?;
        let schema = window_state_schema(
            vec![
                kg_field,
                Field::new("window_start", timestamp_type(), false),
                Field::new(name, DataType::Struct(fields.clone()), false),
            ],
            start,
            None,
        );
        let columns: Vec<ArrayRef> = vec![
            kg,
            timestamp_array(vec![start; rows]),
            Arc::new(StructArray::new(fields, columns, None)),
        ];
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}
