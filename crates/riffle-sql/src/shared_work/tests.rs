use super::*;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::functions::math::expr_fn::random;
use datafusion::functions::string::expr_fn::upper;
use datafusion::logical_expr::{col, lit, table_scan, LogicalPlanBuilder};

fn scan() -> LogicalPlanBuilder {
    let schema = Schema::new(vec![
        Field::new("url", DataType::Utf8, true),
        Field::new("channel", DataType::Utf8, true),
        Field::new("price", DataType::Int64, true),
    ]);
    table_scan(Some("t"), &schema, None).unwrap()
}

/// The plan before and after, as `display_indent` lines.
fn rewrite(plan: LogicalPlanBuilder) -> (String, String) {
    let plan = plan.build().unwrap();
    let before = plan.display_indent().to_string();
    let after = share_filter_work(plan.clone()).unwrap();
    assert_eq!(
        after.schema(),
        plan.schema(),
        "the rewrite keeps the output's columns and names"
    );
    let after = after.display_indent().to_string();
    (before, after)
}

#[test]
fn a_call_the_filter_and_the_projection_both_make_is_made_once_below_the_filter() {
    let plan = scan()
        .filter(
            upper(col("url"))
                .is_not_null()
                .or(col("channel").eq(lit("a"))),
        )
        .unwrap()
        .project(vec![col("price"), upper(col("url")).alias("u")])
        .unwrap();
    let (_, after) = rewrite(plan);
    assert_eq!(
        after,
        "Projection: t.price, __riffle_shared_0 AS u\
         \n  Filter: __riffle_shared_0 IS NOT NULL OR t.channel = Utf8(\"a\")\
         \n    Projection: t.channel, t.price, upper(t.url) AS __riffle_shared_0\
         \n      TableScan: t"
    );
}

#[test]
fn calls_the_filter_may_skip_rows_for_stay_in_the_filter() {
    let projected = || vec![col("price"), upper(col("url")).alias("u")];
    // The right side of OR and AND, a CASE branch, a later argument of coalesce.
    for predicate in [
        col("channel")
            .eq(lit("a"))
            .or(upper(col("url")).is_not_null()),
        col("channel")
            .eq(lit("a"))
            .and(upper(col("url")).is_not_null()),
        datafusion::logical_expr::when(col("price").gt(lit(1)), upper(col("url")))
            .otherwise(lit("x"))
            .unwrap()
            .eq(lit("y")),
        coalesce(vec![col("channel"), upper(col("url"))]).eq(lit("y")),
    ] {
        let plan = scan()
            .filter(predicate)
            .unwrap()
            .project(projected())
            .unwrap();
        let (before, after) = rewrite(plan);
        assert_eq!(after, before);
    }
}

#[test]
fn a_call_no_projection_repeats_or_a_volatile_one_stays_where_it_is() {
    let plan = scan()
        .filter(upper(col("url")).eq(lit("A")))
        .unwrap()
        .project(vec![col("price")])
        .unwrap();
    let (before, after) = rewrite(plan);
    assert_eq!(after, before);
    let plan = scan()
        .filter(random().gt(lit(0.5)))
        .unwrap()
        .project(vec![random().alias("r")])
        .unwrap();
    let (before, after) = rewrite(plan);
    assert_eq!(after, before);
}

#[test]
fn a_shared_value_is_passed_up_through_renaming_projections_and_its_text_is_left_behind() {
    let plan = scan()
        .filter(upper(col("url")).is_not_null())
        .unwrap()
        .project(vec![col("url").alias("link"), col("price")])
        .unwrap()
        .project(vec![upper(col("link")), col("price")])
        .unwrap();
    let (_, after) = rewrite(plan);
    assert_eq!(
        after,
        "Projection: __riffle_shared_0 AS upper(link), t.price\
         \n  Projection: t.price, __riffle_shared_0\
         \n    Filter: __riffle_shared_0 IS NOT NULL\
         \n      Projection: t.price, upper(t.url) AS __riffle_shared_0\
         \n        TableScan: t"
    );
}

#[test]
fn the_largest_shared_expression_is_taken_and_names_in_use_are_skipped() {
    let schema = Schema::new(vec![
        Field::new("url", DataType::Utf8, true),
        Field::new("__riffle_shared_0", DataType::Int64, true),
    ]);
    let inner = upper(col("url"));
    let outer = upper(inner.clone());
    let plan = table_scan(Some("t"), &schema, None)
        .unwrap()
        .filter(outer.clone().eq(lit("A")))
        .unwrap()
        .project(vec![outer.alias("o"), col("__riffle_shared_0")])
        .unwrap();
    let (_, after) = rewrite(plan);
    assert_eq!(
        after,
        "Projection: __riffle_shared_1 AS o, t.__riffle_shared_0\
         \n  Filter: __riffle_shared_1 = Utf8(\"A\")\
         \n    Projection: t.__riffle_shared_0, upper(upper(t.url)) AS __riffle_shared_1\
         \n      TableScan: t"
    );
}
