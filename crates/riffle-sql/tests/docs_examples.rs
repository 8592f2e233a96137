//! Every `sql` block of docs/sql.md and of the README is a whole pipeline: it must plan
//! and run.

use riffle_runtime::job::{self, JobConfig};
use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions};

fn sql_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sql") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap_or_default()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn every_example_in_the_sql_guide_and_readme_plans_and_runs() {
    let read = |file: &str| {
        let path = format!("{}/../../{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let mut blocks = sql_blocks(&read("docs/sql.md"));
    assert!(
        blocks.len() >= 8,
        "found only {} sql examples",
        blocks.len()
    );
    let readme = sql_blocks(&read("README.md"));
    assert!(!readme.is_empty(), "the README has no sql example");
    blocks.extend(readme);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for (i, block) in blocks.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        // File sinks write under the test's directory, not the crate's; README examples
        // run at full size, the test needs them to run, not to last.
        let text = block
            .replace(
                "'path' = 'out/",
                &format!("'path' = '{}/", dir.path().display()),
            )
            .replace("'events' = '5M'", "'events' = '100K'")
            // Example inputs are in the repository's examples/ directory.
            .replace(
                "'path' = 'examples/",
                &format!("'path' = '{}/../../examples/", env!("CARGO_MANIFEST_DIR")),
            );
        let options = PlanOptions {
            name: format!("example{i}"),
            parallelism: 2,
            max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
            settings: Default::default(),
        };
        let pipeline = plan_pipeline(&text, &options, &ConnectorRegistry::default())
            .unwrap_or_else(|e| panic!("example {i} does not plan: {e}\n{block}"));
        let summary = runtime
            .block_on(job::run(&pipeline.graph, &JobConfig::default()))
            .unwrap_or_else(|e| panic!("example {i} does not run: {e}\n{block}"));
        assert!(summary.source_rows > 0, "example {i} read nothing\n{block}");
    }
}
