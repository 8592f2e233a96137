use super::*;
use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::DFSchema;
use datafusion::functions::string::expr_fn::upper;
use datafusion::logical_expr::execution_props::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{col, lit, when};
use datafusion::physical_expr::create_physical_expr;

fn batch() -> RecordBatch {
    let x = StringArray::from(vec![
        Some("apple"),
        Some("google"),
        None,
        Some("other"),
        Some("apple"),
        Some("baidu"),
    ]);
    let y = StringArray::from(vec![Some("a"), Some("b"), Some("c"), None, Some("e"), None]);
    let schema = Schema::new(vec![
        Field::new("x", DataType::Utf8, true),
        Field::new("y", DataType::Utf8, true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![Arc::new(x), Arc::new(y)]).unwrap()
}

/// `expr` evaluated on `batch()` by DataFusion.
fn evaluate(expr: &Expr) -> ArrayRef {
    let batch = batch();
    let schema = DFSchema::try_from(batch.schema().as_ref().clone()).unwrap();
    let physical = create_physical_expr(
        expr,
        &schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
    .unwrap();
    physical
        .evaluate(&batch)
        .unwrap()
        .into_array(batch.num_rows())
        .unwrap()
}

/// The rewrite of `expr`, after checking it evaluates as `expr` does.
fn rewritten(expr: Expr) -> Transformed<Expr> {
    let out = as_lookup(expr.clone());
    assert_eq!(
        evaluate(&out.data).as_ref(),
        evaluate(&expr).as_ref(),
        "{expr} and {}",
        out.data
    );
    out
}

fn mapping_case(otherwise: Option<Expr>) -> Expr {
    let mut branches = when(col("x").eq(lit("apple")), lit("0"))
        .when(lit("google").eq(col("x")), lit("1"))
        .when(col("x").eq(lit("baidu")), lit("3"));
    match otherwise {
        Some(e) => branches.otherwise(e),
        None => branches.end(),
    }
    .unwrap()
}

#[test]
fn a_mapping_case_with_a_column_else_is_a_lookup_or_the_column() {
    let out = rewritten(mapping_case(Some(col("y"))));
    assert!(out.transformed);
    assert_eq!(
        out.data.to_string(),
        "riffle_or_else(CASE x WHEN Utf8(\"apple\") THEN Utf8(\"0\") WHEN Utf8(\"google\") THEN Utf8(\"1\") WHEN Utf8(\"baidu\") THEN Utf8(\"3\") END, y)"
    );
}

#[test]
fn a_mapping_case_with_a_literal_or_no_else_is_a_lookup() {
    for otherwise in [Some(lit("none")), None] {
        let out = rewritten(mapping_case(otherwise));
        assert!(out.transformed);
        assert!(
            out.data.to_string().starts_with("CASE x WHEN"),
            "{}",
            out.data
        );
    }
}

#[test]
fn cases_a_lookup_would_change_stay_as_they_are() {
    let unchanged = [
        // An ELSE that is not a column could fail on rows a branch took.
        mapping_case(Some(upper(col("y")))),
        // A NULL label would read as "no branch matched".
        when(col("x").eq(lit("apple")), lit(ScalarValue::Utf8(None)))
            .when(col("x").eq(lit("google")), lit("1"))
            .otherwise(col("y"))
            .unwrap(),
        // Two compared expressions.
        when(col("x").eq(lit("apple")), lit("0"))
            .when(col("y").eq(lit("b")), lit("1"))
            .otherwise(col("y"))
            .unwrap(),
        // Not an equality.
        when(col("x").eq(lit("apple")), lit("0"))
            .when(col("x").gt(lit("m")), lit("1"))
            .otherwise(col("y"))
            .unwrap(),
        // One branch: nothing to gain.
        when(col("x").eq(lit("apple")), lit("0"))
            .otherwise(col("y"))
            .unwrap(),
        // A label that is not a literal.
        when(col("x").eq(lit("apple")), col("y"))
            .when(col("x").eq(lit("google")), lit("1"))
            .otherwise(col("y"))
            .unwrap(),
    ];
    for case in unchanged {
        let out = rewritten(case.clone());
        assert!(!out.transformed, "{case}");
    }
}

#[test]
fn float_keys_are_not_looked_up() {
    assert!(is_lookup_key(&ScalarValue::Int64(Some(3))));
    assert!(is_lookup_key(&ScalarValue::Utf8(Some("a".into()))));
    assert!(!is_lookup_key(&ScalarValue::Float64(Some(0.0))));
    assert!(!is_lookup_key(&ScalarValue::Int64(None)));
}
