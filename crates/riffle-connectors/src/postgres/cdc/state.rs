//! A CDC source's position as a checkpoint row: where it stands, and what it was read
//! from (slot, table, publication), so that a restore with other ones is refused.

use super::{CdcPosition, Phase, PostgresCdcConfig};
use riffle_core::arrow::array::{Array, Int8Array, RecordBatch, StringArray, UInt64Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use riffle_core::{Error, OperatorState, Result};
use std::sync::Arc;

fn state_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("slot", DataType::Utf8, false),
        Field::new("table", DataType::Utf8, false),
        Field::new("publication", DataType::Utf8, false),
        Field::new("phase", DataType::Int8, false),
        Field::new("lsn", DataType::UInt64, false),
        Field::new("skip", DataType::UInt64, false),
    ]))
}

/// What a position was read from: the slot, the table and the publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Origin {
    slot: String,
    table: String,
    publication: String,
}

impl Origin {
    pub(super) fn of(config: &PostgresCdcConfig) -> Self {
        Self {
            slot: config.slot.clone(),
            table: config.qualified(),
            publication: config.publication.clone(),
        }
    }
}

pub(super) fn encode(origin: &Origin, position: CdcPosition) -> Result<RecordBatch> {
    let phase = match position.phase {
        Phase::Snapshot => 0,
        Phase::Stream => 1,
    };
    RecordBatch::try_new(
        state_schema(),
        vec![
            Arc::new(StringArray::from(vec![origin.slot.as_str()])),
            Arc::new(StringArray::from(vec![origin.table.as_str()])),
            Arc::new(StringArray::from(vec![origin.publication.as_str()])),
            Arc::new(Int8Array::from(vec![phase])),
            Arc::new(UInt64Array::from(vec![position.lsn])),
            Arc::new(UInt64Array::from(vec![position.skip])),
        ],
    )
    .map_err(|e| Error::State {
        operator: "postgres-cdc".into(),
        message: e.to_string(),
    })
}

/// The position in `state` (rows of every old subtask; only subtask 0's has one),
/// which must have been read from `origin`: a slot kept while the table or publication
/// changed would resume the new table's stream without its rows.
pub(super) fn decode(state: &OperatorState, origin: &Origin) -> Result<Option<CdcPosition>> {
    let mut found = None;
    for batch in &state.batches {
        let (slots, tables, publications) = (
            column::<StringArray>(batch, "slot")?,
            column::<StringArray>(batch, "table")?,
            column::<StringArray>(batch, "publication")?,
        );
        let phases = column::<Int8Array>(batch, "phase")?;
        let (lsns, skips) = (
            column::<UInt64Array>(batch, "lsn")?,
            column::<UInt64Array>(batch, "skip")?,
        );
        for row in 0..batch.num_rows() {
            let read = Origin {
                slot: slots.value(row).to_string(),
                table: tables.value(row).to_string(),
                publication: publications.value(row).to_string(),
            };
            if read != *origin {
                return Err(Error::config(
                    "slot.name",
                    format!(
                        "the checkpoint read {} through slot `{}` and publication `{}`, not {} through `{}` and `{}`: restore with what it read, or start afresh with a new 'slot.name'",
                        read.table, read.slot, read.publication, origin.table, origin.slot, origin.publication
                    ),
                ));
            }
            found = Some(CdcPosition {
                phase: if phases.value(row) == 0 {
                    Phase::Snapshot
                } else {
                    Phase::Stream
                },
                lsn: lsns.value(row),
                skip: skips.value(row),
            });
        }
    }
    Ok(found)
}

/// Column `name` of a position row, as `T`.
fn column<T: Array + Clone + 'static>(batch: &RecordBatch, name: &str) -> Result<T> {
    let layout = |message: String| Error::State {
        operator: "postgres-cdc".into(),
        message,
    };
    batch
        .column_by_name(name)
        .ok_or_else(|| layout(format!("no `{name}` in its position")))?
        .as_any()
        .downcast_ref::<T>()
        .cloned()
        .ok_or_else(|| layout(format!("`{name}` of another type")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(slot: &str) -> Origin {
        Origin {
            slot: slot.into(),
            table: "\"public\".\"orders\"".into(),
            publication: format!("{slot}_publication"),
        }
    }

    #[test]
    fn a_position_survives_its_checkpoint_row() {
        let position = CdcPosition {
            phase: Phase::Stream,
            lsn: 0x16_B374_D848,
            skip: 3,
        };
        let state = OperatorState::of(vec![encode(&origin("orders_slot"), position).unwrap()]);
        let read = decode(&state, &origin("orders_slot")).unwrap();
        assert_eq!(read, Some(position));
        let empty = decode(&OperatorState::default(), &origin("orders_slot")).unwrap();
        assert_eq!(empty, None);
    }

    #[test]
    fn a_checkpoint_of_another_slot_table_or_publication_is_refused() {
        let state = OperatorState::of(vec![encode(&origin("a"), CdcPosition::fresh(5)).unwrap()]);
        let refused = decode(&state, &origin("b")).unwrap_err().to_string();
        assert!(refused.contains("`a`"), "{refused}");
        let other_table = Origin {
            table: "\"public\".\"items\"".into(),
            ..origin("a")
        };
        assert!(decode(&state, &other_table).is_err());
    }
}
