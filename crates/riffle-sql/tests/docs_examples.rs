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

/// Every `docs/<page>.md, "<section>"` that a code comment or a page cites names a
/// heading of that page (its text, or the start of it), and every relative link between
/// the pages names a page that exists: a cited section that was renamed or never written
/// leaves the reader nowhere.
#[test]
fn every_cited_doc_section_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("crates"), root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs" || x == "md") {
                files.push(path);
            }
        }
    }
    let headings = |page: &str| -> Vec<String> {
        let text = std::fs::read_to_string(root.join(page)).unwrap_or_default();
        text.lines()
            .filter(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim().to_lowercase())
            .collect()
    };
    let cited = regex::Regex::new(r#"(docs/[a-z_-]+\.md),\s+"([^"]+)""#).unwrap();
    let line_break = regex::Regex::new(r"\s*\n\s*(?://[!/]?)?\s*").unwrap();
    let linked =
        regex::Regex::new(r"\]\(((?:\.\./|docs/)?[a-z_-]+\.md)(?:#[a-z0-9_-]+)?\)").unwrap();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // Citations may wrap across comment lines: join them first.
        let joined = line_break.replace_all(&text, " ");
        for c in cited.captures_iter(&joined) {
            let (page, section) = (&c[1], c[2].to_lowercase());
            checked += 1;
            if !headings(page).iter().any(|h| h.starts_with(&section)) {
                broken.push(format!("{}: {page}, \"{}\"", file.display(), &c[2]));
            }
        }
        let dir = file.parent().unwrap();
        for l in linked.captures_iter(&text) {
            let target = &l[1];
            checked += 1;
            if !dir.join(target).exists() && !root.join(target).exists() {
                broken.push(format!("{}: link to {target}", file.display()));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} citations found: the patterns are wrong"
    );
    broken.sort();
    broken.dedup();
    assert!(
        broken.is_empty(),
        "cited sections or pages that do not exist:\n{}",
        broken.join("\n")
    );
}
