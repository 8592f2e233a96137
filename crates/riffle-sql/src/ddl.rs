//! `CREATE TABLE` as riffle reads it: columns, primary key, connector options and the
//! event-time declaration.

use crate::error::{Location, Result, SqlError};
pub use crate::partition_clause::PartitionTerm;
use crate::script::{normalize, Script, WatermarkClause};
use datafusion::arrow::datatypes::{DataType, Field, TimeUnit};
use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, ColumnOption, CreateTable, DateTimeField, Expr, ObjectName, Spanned,
    SqlOption, TableConstraint, Value,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// The event-time column of a source table and how far the watermark trails it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watermark {
    /// Column holding event time.
    pub column: String,
    /// Watermark = newest event time − `delay`.
    pub delay: Duration,
}

/// A table declared in the pipeline file.
#[derive(Debug, Clone)]
pub struct TableDef {
    /// Normalized name.
    pub name: String,
    /// Declared columns (empty: the connector decides, or the query does for a sink).
    pub columns: Vec<Field>,
    /// Declared primary key columns.
    pub primary_key: Vec<String>,
    /// `WITH (…)` options, keys lower-cased.
    pub options: BTreeMap<String, String>,
    /// `WATERMARK FOR …`, if declared.
    pub watermark: Option<Watermark>,
    /// `PARTITIONED BY (…)` terms (empty: not declared). Only a connector that writes
    /// partitions accepts them.
    pub partitioned_by: Vec<PartitionTerm>,
    /// Where the statement starts.
    pub at: Option<Location>,
}

impl TableDef {
    /// The connector name (`'connector' = …`).
    ///
    /// # Errors
    /// The option is missing.
    pub fn connector(&self) -> Result<&str> {
        self.options.get("connector").map(String::as_str).ok_or_else(|| {
            SqlError::connector(
                &self.name,
                "no connector: add WITH ('connector' = 'nexmark' | 'kafka' | 'filesystem' | 'postgres' | 'iceberg' | 'stdout' | 'blackhole', …)",
            )
        })
    }
}

/// The normalized last part of a (possibly qualified) name.
pub fn object_name(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| normalize(&i.value, i.quote_style.is_some()))
        .unwrap_or_else(|| name.to_string())
}

/// Where a statement starts, when the parser knows.
pub fn start_of(node: &impl Spanned) -> Option<Location> {
    let span = node.span();
    (span.start.line > 0).then_some(Location {
        line: span.start.line,
        column: span.start.column,
    })
}

/// Reads a `CREATE TABLE` and the watermark and partition clauses `script` lifted from
/// it.
///
/// # Errors
/// Unsupported column types, options whose value is not a literal, a bad watermark.
pub fn table_def(create: &CreateTable, script: &Script) -> Result<TableDef> {
    let name = object_name(&create.name);
    let at = start_of(&create.name);
    if create.query.is_some() {
        return Err(SqlError::unsupported(
            "CREATE TABLE … AS SELECT",
            "declare the sink table with its connector, then INSERT INTO it",
        )
        .located(at));
    }
    // An option riffle would ignore is refused: a clustered sink written unclustered is
    // not what the user asked for. (PARTITIONED BY is lifted out by the script; the
    // connector accepts or refuses it.)
    let clustering = !matches!(create.hive_distribution, ast::HiveDistributionStyle::NONE)
        || create.partition_by.is_some()
        || create.cluster_by.is_some()
        || create.clustered_by.is_some();
    if clustering {
        return Err(SqlError::unsupported(
            format!("PARTITION BY / CLUSTER BY on `{name}`"),
            "riffle does not cluster tables; drop the clause (an Iceberg sink takes PARTITIONED BY (…))",
        )
        .located(at));
    }
    let partitioned_by = script
        .partitions
        .iter()
        .find(|p| p.table == name)
        .map(|p| p.terms.clone())
        .unwrap_or_default();
    let mut columns = Vec::new();
    let mut primary_key = Vec::new();
    for c in &create.columns {
        let column = normalize(&c.name.value, c.name.quote_style.is_some());
        let data_type = arrow_type(&c.data_type).ok_or_else(|| {
            SqlError::plan(format!(
                "column `{column}` of `{name}`: type {} is not supported (use BIGINT, INT, DOUBLE, FLOAT, DECIMAL(p, s) with p ≤ 38, BOOLEAN, VARCHAR, TIMESTAMP, DATE)",
                c.data_type
            ))
            .located(at)
        })?;
        let not_null = c.options.iter().any(|o| {
            matches!(
                o.option,
                ColumnOption::NotNull | ColumnOption::PrimaryKey(_)
            )
        });
        if c.options
            .iter()
            .any(|o| matches!(o.option, ColumnOption::PrimaryKey(_)))
        {
            primary_key.push(column.clone());
        }
        columns.push(Field::new(column, data_type, !not_null));
    }
    for constraint in &create.constraints {
        if let TableConstraint::PrimaryKey(pk) = constraint {
            for col in &pk.columns {
                match &col.column.expr {
                    Expr::Identifier(i) => {
                        primary_key.push(normalize(&i.value, i.quote_style.is_some()))
                    }
                    other => {
                        return Err(SqlError::plan(format!(
                            "PRIMARY KEY of `{name}` lists `{other}`; list column names"
                        ))
                        .located(at))
                    }
                }
            }
        }
    }
    let mut options = BTreeMap::new();
    let list = match &create.table_options {
        ast::CreateTableOptions::With(list) | ast::CreateTableOptions::Options(list) => {
            list.as_slice()
        }
        _ => &[],
    };
    for option in list {
        match option {
            SqlOption::KeyValue { key, value } => {
                let text = literal_text(value).ok_or_else(|| {
                    SqlError::connector(
                        &name,
                        format!(
                            "option `{}` must be a literal such as '…', got {value}",
                            key.value
                        ),
                    )
                })?;
                options.insert(key.value.to_lowercase(), text);
            }
            other => {
                return Err(SqlError::connector(
                    &name,
                    format!("option `{other}` is not of the form 'key' = 'value'"),
                ))
            }
        }
    }
    let watermark = match script.watermarks.iter().find(|w| w.table == name) {
        Some(clause) => Some(watermark(clause)?),
        None => None,
    };
    Ok(TableDef {
        name,
        columns,
        primary_key,
        options,
        watermark,
        partitioned_by,
        at,
    })
}

/// The text of a literal option value.
fn literal_text(value: &Expr) -> Option<String> {
    match value {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => Some(s.clone()),
            Value::Number(n, _) => Some(n.to_string()),
            Value::Boolean(b) => Some(b.to_string()),
            _ => None,
        },
        Expr::Identifier(i) => Some(i.value.clone()),
        _ => None,
    }
}

/// `col` or `col - INTERVAL '…' UNIT`.
fn watermark(clause: &WatermarkClause) -> Result<Watermark> {
    let wrong = || SqlError::Plan {
        at: Some(clause.at),
        message: format!("unsupported watermark `{}`", clause.expr),
        hint: Some(format!(
            "write WATERMARK FOR {0} AS {0} - INTERVAL '4' SECOND (or AS {0} for no delay)",
            clause.column
        )),
    };
    let (column, delay) = match &clause.expr {
        Expr::Identifier(i) => (i, Duration::ZERO),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Minus,
            right,
        } => match (left.as_ref(), right.as_ref()) {
            (Expr::Identifier(i), Expr::Interval(interval)) => {
                (i, interval_duration(interval).ok_or_else(wrong)?)
            }
            _ => return Err(wrong()),
        },
        _ => return Err(wrong()),
    };
    if normalize(&column.value, column.quote_style.is_some()) != clause.column {
        return Err(wrong());
    }
    Ok(Watermark {
        column: clause.column.clone(),
        delay,
    })
}

/// `INTERVAL '4' SECOND`, `INTERVAL '4 seconds'`, `INTERVAL '500' MILLISECOND`.
pub fn interval_duration(interval: &ast::Interval) -> Option<Duration> {
    let text = literal_text(&interval.value)?;
    let (number, unit) = match &interval.leading_field {
        Some(field) => (text.trim().to_string(), unit_name(field)?.to_string()),
        None => {
            let mut parts = text.split_whitespace();
            let n = parts.next()?.to_string();
            (n, parts.next().unwrap_or("second").to_lowercase())
        }
    };
    parse_duration(&number, &unit)
}

fn unit_name(field: &DateTimeField) -> Option<&'static str> {
    Some(match field {
        DateTimeField::Millisecond | DateTimeField::Milliseconds => "millisecond",
        DateTimeField::Second | DateTimeField::Seconds => "second",
        DateTimeField::Minute | DateTimeField::Minutes => "minute",
        DateTimeField::Hour | DateTimeField::Hours => "hour",
        DateTimeField::Day | DateTimeField::Days => "day",
        _ => return None,
    })
}

/// A number of `unit`s (singular or plural, or ms/s/m/h/d) as a duration.
pub fn parse_duration(number: &str, unit: &str) -> Option<Duration> {
    let n: f64 = number.parse().ok()?;
    if !(n.is_finite() && n >= 0.0) {
        return None;
    }
    let seconds = match unit.to_lowercase().as_str() {
        "ms" | "millisecond" | "milliseconds" => 0.001,
        "s" | "sec" | "second" | "seconds" => 1.0,
        "m" | "min" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(n * seconds))
}

/// Arrow type of a declared column type.
fn arrow_type(t: &ast::DataType) -> Option<DataType> {
    use ast::DataType as T;
    Some(match t {
        T::BigInt(_) | T::Int64 => DataType::Int64,
        T::Int(_) | T::Integer(_) | T::Int32 => DataType::Int32,
        T::SmallInt(_) => DataType::Int16,
        T::TinyInt(_) => DataType::Int8,
        T::Double(_) | T::DoublePrecision | T::Float64 => DataType::Float64,
        T::Float(_) | T::Real | T::Float32 => DataType::Float32,
        T::Boolean | T::Bool => DataType::Boolean,
        T::Varchar(_) | T::Text | T::String(_) | T::Char(_) | T::CharVarying(_) => DataType::Utf8,
        T::Timestamp(_, _) => DataType::Timestamp(TimeUnit::Nanosecond, None),
        T::Date => DataType::Date32,
        // Flink's exact numbers; a precision past Arrow's 38 digits is refused.
        T::Decimal(info) | T::Numeric(info) | T::Dec(info) => {
            let (precision, scale) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, u64::try_from(*s).ok()?),
            };
            let precision = u8::try_from(precision)
                .ok()
                .filter(|p| (1..=38).contains(p))?;
            let scale = i8::try_from(scale).ok().filter(|s| *s as u8 <= precision)?;
            DataType::Decimal128(precision, scale)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_spelling() {
        assert_eq!(parse_duration("4", "second"), Some(Duration::from_secs(4)));
        assert_eq!(parse_duration("4", "seconds"), Some(Duration::from_secs(4)));
        assert_eq!(
            parse_duration("500", "ms"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_duration("2", "milliseconds"),
            Some(Duration::from_millis(2))
        );
        assert_eq!(parse_duration("1", "minute"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("x", "second"), None);
        assert_eq!(parse_duration("1", "fortnight"), None);
    }
}
