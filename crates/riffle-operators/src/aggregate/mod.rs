//! Aggregate functions, their columnar accumulators, and group-key interning, shared by
//! the windowed, session and updating aggregates.

mod accumulators;
mod distinct_sets;
mod group_keys;
mod inputs;
mod shared_distinct;
mod shared_set;
mod text_extremes;

pub use accumulators::AccumulatorSet;
pub use distinct_sets::DistinctValues;
pub use group_keys::{touched_in_order, worth_rebuilding, GroupKeys};
pub(crate) use inputs::{normalize_inputs, shared_columns, Input};

use riffle_core::arrow::datatypes::{DataType, Field};
use riffle_core::{Error, Result, StreamSchema};

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateFunction {
    /// `count(*)`: rows.
    CountStar,
    /// `count(col)`: non-null values.
    Count,
    /// `sum(col)`.
    Sum,
    /// `min(col)`.
    Min,
    /// `max(col)`.
    Max,
    /// `avg(col)` as Float64.
    Avg,
    /// `count(DISTINCT col)`.
    CountDistinct,
}

/// One aggregate in a plan: function, input column, output name.
#[derive(Debug, Clone)]
pub struct AggregateSpec {
    /// The function.
    pub function: AggregateFunction,
    /// Input column (`None` only for `count(*)`).
    pub input: Option<String>,
    /// A BOOLEAN column: only rows where it is TRUE are aggregated (SQL's `FILTER
    /// (WHERE …)`).
    pub filter: Option<String>,
    /// Output column name.
    pub output: String,
}

impl AggregateSpec {
    /// `count(*) AS output`.
    pub fn count_star(output: &str) -> Self {
        Self {
            function: AggregateFunction::CountStar,
            input: None,
            filter: None,
            output: output.into(),
        }
    }

    /// `function(input) AS output`.
    pub fn new(function: AggregateFunction, input: &str, output: &str) -> Self {
        Self {
            function,
            input: Some(input.into()),
            filter: None,
            output: output.into(),
        }
    }

    /// The same aggregate over only the rows where the BOOLEAN column `filter` is TRUE.
    pub fn with_filter(self, filter: &str) -> Self {
        Self {
            filter: Some(filter.into()),
            ..self
        }
    }
}

/// How an input column is normalised before accumulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumericKind {
    /// Integers, dates and timestamps, widened to i64.
    Int,
    /// Floats, widened to f64.
    Float,
    /// Strings (count, count distinct, min and max).
    Text,
}

/// An aggregate bound to an input schema.
#[derive(Debug, Clone)]
pub(crate) struct BoundAggregate {
    pub(crate) function: AggregateFunction,
    pub(crate) input: Option<usize>,
    pub(crate) filter: Option<usize>,
    pub(crate) kind: NumericKind,
    pub(crate) output: Field,
}

impl BoundAggregate {
    pub(crate) fn bind(spec: &AggregateSpec, schema: &StreamSchema) -> Result<Self> {
        use AggregateFunction as F;
        let input = match (&spec.input, spec.function) {
            (None, F::CountStar) => None,
            (None, f) => return Err(Error::plan(format!("{f:?} needs an input column"))),
            (Some(name), _) => Some(schema.index_of(name)?),
        };
        let filter = match &spec.filter {
            None => None,
            Some(name) => {
                let i = schema.index_of(name)?;
                let t = schema.schema.field(i).data_type();
                if *t != DataType::Boolean {
                    return Err(Error::plan(format!(
                        "the filter of `{}` is `{name}` of type {t}, not BOOLEAN",
                        spec.output
                    )));
                }
                Some(i)
            }
        };
        let input_type = input.map_or(DataType::Null, |i| {
            schema.schema.field(i).data_type().clone()
        });
        let kind = match &input_type {
            DataType::Float16 | DataType::Float32 | DataType::Float64 => NumericKind::Float,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => NumericKind::Text,
            t if t.is_integer() || t.is_temporal() || *t == DataType::Null => NumericKind::Int,
            t => return Err(Error::plan(format!("cannot aggregate column of type {t}"))),
        };
        let output_type = match (spec.function, kind) {
            (F::CountStar | F::Count | F::CountDistinct, _) => DataType::Int64,
            (F::Avg, NumericKind::Int | NumericKind::Float) => DataType::Float64,
            (F::Sum, NumericKind::Int) => DataType::Int64,
            (F::Sum, NumericKind::Float) => DataType::Float64,
            (F::Min | F::Max, NumericKind::Int | NumericKind::Float) => input_type.clone(),
            (F::Min | F::Max, NumericKind::Text) => DataType::Utf8,
            (f, NumericKind::Text) => {
                return Err(Error::plan(format!(
                    "{f:?} does not apply to strings; use count, count distinct, min or max"
                )))
            }
        };
        let nullable = !matches!(spec.function, F::CountStar | F::Count | F::CountDistinct);
        Ok(Self {
            function: spec.function,
            input,
            filter,
            kind,
            output: Field::new(&spec.output, output_type, nullable),
        })
    }
}

/// Binds every spec, refusing duplicate output names.
pub(crate) fn bind_all(
    specs: &[AggregateSpec],
    schema: &StreamSchema,
) -> Result<Vec<BoundAggregate>> {
    let bound = specs
        .iter()
        .map(|s| BoundAggregate::bind(s, schema))
        .collect::<Result<Vec<_>>>()?;
    for (i, b) in bound.iter().enumerate() {
        if bound[..i]
            .iter()
            .any(|o| o.output.name() == b.output.name())
        {
            return Err(Error::plan(format!(
                "two aggregates are named `{}`",
                b.output.name()
            )));
        }
    }
    Ok(bound)
}

/// Display of a list of aggregates for `explain`.
pub(crate) fn describe(specs: &[AggregateSpec]) -> String {
    specs
        .iter()
        .map(|s| {
            let call = match &s.input {
                None => "count(*)".to_string(),
                Some(i) => format!("{:?}({i})", s.function).to_lowercase(),
            };
            match &s.filter {
                None => format!("{call} as {}", s.output),
                Some(f) => format!("{call} filter (where {f}) as {}", s.output),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}
