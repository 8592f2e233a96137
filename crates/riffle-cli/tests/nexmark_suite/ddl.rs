//! Replacing a suite query's DDL, and only its DDL (`riffle_bench::flink_suite`): its
//! sink becomes a JSON-lines `filesystem` table with the same columns.

pub use riffle_bench::flink_suite::Replaced;
use riffle_bench::flink_suite::{replace as replace_ddl, Declarations};
use std::path::Path;

/// `flink_text` with its sink writing JSON lines to `out`, with `PRIMARY KEY (keys)`
/// when the result is updating, q13's `side_input` read with the options `side_input`,
/// and `source_ddl` in front.
pub fn replace(
    flink_text: &str,
    source_ddl: &str,
    out: &Path,
    keys: &[&str],
    side_input: &str,
) -> Replaced {
    let sink = format!(
        "'connector' = 'filesystem', 'path' = '{}', 'format' = 'json'",
        out.display()
    );
    replace_ddl(
        flink_text,
        &Declarations {
            sources: source_ddl,
            sink: &sink,
            sink_key: keys,
            side_input,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}
