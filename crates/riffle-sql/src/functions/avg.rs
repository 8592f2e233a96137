//! Flink's `AVG`: over an integer column it is an integer of that type — the sum divided
//! by the count, truncated toward zero as Java's integer division is — and over floats a
//! `DOUBLE`. DataFusion's `avg` is always a `DOUBLE` (12.7 where Flink gives 12), so
//! riffle SQL types the call with this one. riffle's aggregate operators compute the
//! average; its integer result is the float average cast to the integer type, which
//! truncates toward zero. Write `AVG(CAST(x AS DOUBLE))` for a fractional average.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::types::{logical_float64, NativeType};
use datafusion::common::{not_impl_err, Result};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Coercion, Signature, TypeSignature,
    TypeSignatureClass, Volatility,
};

#[derive(Debug, PartialEq, Eq, Hash)]
struct FlinkAvg {
    signature: Signature,
    aliases: Vec<String>,
}

impl AggregateUDFImpl for FlinkAvg {
    fn name(&self) -> &str {
        "avg"
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(match arg_types.first() {
            Some(t) if t.is_integer() => t.clone(),
            _ => DataType::Float64,
        })
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        not_impl_err!("AVG runs in riffle's aggregate operators, not in DataFusion")
    }
}

/// `avg` (and `mean`) with Flink's types, to register with the planner.
pub fn avg_udaf() -> AggregateUDF {
    AggregateUDF::from(FlinkAvg {
        signature: Signature::one_of(
            vec![
                // Integers stay integers: the result has their type.
                TypeSignature::Coercible(vec![Coercion::new_exact(TypeSignatureClass::Integer)]),
                TypeSignature::Coercible(vec![Coercion::new_implicit(
                    TypeSignatureClass::Native(logical_float64()),
                    vec![TypeSignatureClass::Float],
                    NativeType::Float64,
                )]),
            ],
            Volatility::Immutable,
        ),
        aliases: vec!["mean".into()],
    })
}
