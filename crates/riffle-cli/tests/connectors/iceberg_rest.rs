//! Iceberg tables behind a REST catalog: the test catalog server
//! (`iceberg_rest_catalog.py`), commits whose answers are lost, and signing in with
//! OAuth2 client credentials or a token.

use super::*;

/// The REST catalog of tests (`iceberg_rest_catalog.py`, PyIceberg's REST models over a
/// SQL catalog in the lake's SQLite file), on a free port of 127.0.0.1.
struct RestCatalogServer {
    child: std::process::Child,
    uri: String,
    /// Where the server's stdout goes (a line per token it issued).
    log: PathBuf,
}

impl RestCatalogServer {
    /// Serves `lake`'s catalog; the first `lose` commits that add a snapshot are applied
    /// and answered with 503.
    fn start(lake: &Lake, lose: usize) -> Self {
        Self::start_with(lake, &["--lose-commit-answers", &lose.to_string()])
    }

    /// Serves `lake`'s catalog with the server's `options`.
    fn start_with(lake: &Lake, options: &[&str]) -> Self {
        let python = std::env::var("RIFFLE_PYICEBERG_PYTHON")
            .expect("RIFFLE_PYICEBERG_PYTHON: a Python with pyiceberg (scripts/test installs it)");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = lake.root.join(format!("rest-catalog-{port}.log"));
        let child = Command::new(python)
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/connectors/iceberg_rest_catalog.py"),
            )
            .arg(port.to_string())
            .arg(&lake.reader_uri)
            .arg(&lake.warehouse)
            .args(options)
            .stdout(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the REST catalog did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Self {
            child,
            uri: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// How many lines of the server's log start with `what` (`issued `: tokens
    /// issued; `served`: requests served with a valid token).
    fn logged(&self, what: &str) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter(|l| l.starts_with(what)).count()
    }
}

impl Drop for RestCatalogServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_rest_catalog_takes_the_commits_and_its_lost_answers_are_checked_not_retried() {
    let mut lake = Lake::new();
    let server = RestCatalogServer::start(&lake, 1);
    lake.catalog_type = "rest";
    lake.catalog_uri = server.uri.clone();
    lake.catalog_name = "rest";

    let file = lake.bids_pipeline("lost", "bids_lost", "20K");
    let out = lake
        .run(&file, &lake.state("lost"), 2)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("but the table holds them: the commit had landed"),
        "{text}"
    );
    let read = lake.read("bids_lost");
    assert_eq!(read.rows.len(), bids_of(20_000));
    assert!(assert_each_epoch_once(&read) >= 2, "{:?}", read.snapshots);

    let file = lake.bids_pipeline("crash", "bids_crash", "40K");
    let state = lake.state("crash");
    crash(&mut lake.run(&file, &state, 2), "after-sink-commit:3");
    succeed(&mut lake.run(&file, &state, 1));
    let read = lake.read("bids_crash");
    assert_eq!(read.rows.len(), bids_of(40_000));
    assert_each_epoch_once(&read);
    assert_eq!(read.stored, read.listed);
}

/// A REST catalog that wants OAuth2: riffle exchanges the client credentials (from
/// the environment) for tokens, and a token that stops working (good for 10 requests
/// here, as one past its expiry) costs nothing: each commit signs in anew. Without the
/// credentials the run fails, naming the refusal; and a SQL catalog refuses the options.
#[test]
fn a_rest_catalog_that_wants_oauth2_tokens_gets_fresh_ones_for_every_commit() {
    let mut lake = Lake::new();
    let server =
        RestCatalogServer::start_with(&lake, &["--client", "riffle:s3cret", "--token-uses", "10"]);
    lake.catalog_type = "rest";
    lake.catalog_uri = server.uri.clone();
    lake.catalog_name = "rest";
    let signed_in = |name: &str| {
        let file = lake.bids_pipeline(name, name, "40K");
        with_options(&file, "'catalog.credential.env' = 'LAKE_CREDENTIAL'");
        file
    };

    let file = signed_in("oauth");
    let text = succeed(
        lake.run(&file, &lake.state("oauth"), 2)
            .env("LAKE_CREDENTIAL", "riffle:s3cret"),
    );
    assert!(!text.contains("s3cret"), "{text}");
    let read = lake.read("oauth");
    assert_eq!(read.rows.len(), bids_of(40_000));
    let snapshots = assert_each_epoch_once(&read);
    // Far more requests than one token's ten could carry, on fresh tokens.
    assert!(snapshots >= 2, "{:?}", read.snapshots);
    let (served, issued) = (server.logged("served"), server.logged("issued "));
    assert!(served > 20 && issued > snapshots, "{served} {issued}");

    let text = fails(
        lake.run(&signed_in("wrong"), &lake.state("wrong"), 1)
            .env("LAKE_CREDENTIAL", "riffle:guess"),
    );
    assert!(text.contains("unknown client credentials"), "{text}");
    assert!(!text.contains("guess"), "{text}");

    let unsigned = lake.bids_pipeline("unsigned", "unsigned", "5K");
    let text = fails(&mut lake.run(&unsigned, &lake.state("unsigned"), 1));
    assert!(text.contains("no valid bearer token"), "{text}");

    let text = fails(&mut lake.run(&signed_in("unset"), &lake.state("unset"), 1));
    assert!(
        text.contains("`LAKE_CREDENTIAL`, which is not set"),
        "{text}"
    );

    let sql = Lake::new();
    let file = sql.bids_pipeline("sql", "sql", "5K");
    with_options(&file, "'catalog.token.env' = 'LAKE_CREDENTIAL'");
    let text = fails(&mut sql.run(&file, &sql.state("sql"), 1));
    assert!(
        text.contains("'catalog.token.env' signs in to a REST catalog"),
        "{text}"
    );
}
