//! Planning a pipeline text as `riffle run` would, for the tests of what planning
//! accepts and refuses.
#![allow(dead_code)] // each test binary uses some of these

use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions, SqlError};

pub const BID: &str =
    "CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '1000');\n";

pub fn plan(text: &str) -> Result<riffle_sql::SqlPipeline, SqlError> {
    let options = PlanOptions {
        name: "test".into(),
        parallelism: 2,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: Default::default(),
    };
    plan_pipeline(text, &options, &ConnectorRegistry::default())
}

pub fn error(text: &str) -> String {
    match plan(text) {
        Ok(_) => panic!("planned, but should not have:\n{text}"),
        Err(e) => e.to_string(),
    }
}

pub fn assert_mentions(message: &str, parts: &[&str]) {
    for p in parts {
        assert!(message.contains(p), "`{p}` missing from:\n{message}");
    }
}
