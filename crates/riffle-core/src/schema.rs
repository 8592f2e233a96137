//! The event-time column every stream carries.

use datafusion_common::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef, TimeUnit};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::row_kind::ROW_KIND_FIELD;

/// Name of the event-time column (Timestamp nanoseconds, UTC) in every stream batch.
pub const TIMESTAMP_FIELD: &str = "_timestamp";

/// The Arrow type of [`TIMESTAMP_FIELD`].
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// A stream's schema together with the position of its event-time column.
#[derive(Debug, Clone)]
pub struct StreamSchema {
    /// The Arrow schema of every batch on the stream.
    pub schema: SchemaRef,
    /// Index of [`TIMESTAMP_FIELD`] in `schema`.
    pub timestamp_index: usize,
}

impl StreamSchema {
    /// Wraps `schema`, which must hold a [`TIMESTAMP_FIELD`] of [`timestamp_type`].
    ///
    /// # Errors
    /// The column is missing or has another type.
    pub fn new(schema: SchemaRef) -> Result<Self> {
        let timestamp_index = schema.index_of(TIMESTAMP_FIELD).map_err(|_| {
            Error::plan(format!(
                "stream schema has no `{TIMESTAMP_FIELD}` column: {:?}",
                schema.fields().iter().map(|f| f.name()).collect::<Vec<_>>()
            ))
        })?;
        let ty = schema.field(timestamp_index).data_type();
        if !matches!(ty, DataType::Timestamp(TimeUnit::Nanosecond, _)) {
            return Err(Error::plan(format!(
                "`{TIMESTAMP_FIELD}` must be Timestamp(Nanosecond), found {ty}"
            )));
        }
        Ok(Self {
            schema,
            timestamp_index,
        })
    }

    /// The stream's own columns, in order: every field but [`TIMESTAMP_FIELD`] and a
    /// changelog's [`ROW_KIND_FIELD`].
    pub fn user_fields(&self) -> impl Iterator<Item = &FieldRef> + '_ {
        self.schema
            .fields()
            .iter()
            .enumerate()
            .filter(move |(i, f)| *i != self.timestamp_index && f.name() != ROW_KIND_FIELD)
            .map(|(_, f)| f)
    }

    /// The index of the row-kind column, when the stream is a changelog.
    pub fn row_kind_index(&self) -> Option<usize> {
        self.schema.index_of(ROW_KIND_FIELD).ok()
    }

    /// Builds a stream schema from user fields, appending [`TIMESTAMP_FIELD`].
    pub fn with_timestamp(fields: Vec<Field>) -> Self {
        let mut fields = fields;
        fields.push(Field::new(TIMESTAMP_FIELD, timestamp_type(), false));
        let timestamp_index = fields.len() - 1;
        Self {
            schema: Arc::new(Schema::new(fields)),
            timestamp_index,
        }
    }

    /// Index of a column by name.
    ///
    /// # Errors
    /// No such column; the message lists the columns there are.
    pub fn index_of(&self, name: &str) -> Result<usize> {
        self.schema.index_of(name).map_err(|_| {
            Error::plan(format!(
                "no column `{name}`; the stream has {:?}",
                self.schema
                    .fields()
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
            ))
        })
    }
}
