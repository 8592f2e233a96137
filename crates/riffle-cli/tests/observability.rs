//! Watching a running job from outside: Prometheus `/metrics` (checked by Prometheus's
//! own `promtool`), the REST API, the token that guards actions and an endpoint open to
//! the network, and no secret in any answer.

#[path = "../../riffle-state/tests/support/moto.rs"]
mod moto;

mod common;

use common::http::{control_address, request, try_request, Answer};
use common::savepoints::{get_metrics, ok, savepoint, start_slow};
use common::stderr;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every sample of metric `name` in exposition `text`: its labels (as written) and value.
fn samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let labels = series.strip_prefix(name)?.strip_prefix('{')?;
            Some((
                labels.trim_end_matches('}').to_string(),
                value.parse().ok()?,
            ))
        })
        .collect()
}

/// The value of the single sample of `name` whose labels contain `labels`.
fn value(text: &str, name: &str, labels: &str) -> f64 {
    let found: Vec<f64> = samples(text, name)
        .into_iter()
        .filter(|(l, _)| l.contains(labels))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(found.len(), 1, "{name} {{{labels}}} in:\n{text}");
    found[0]
}

/// Runs Prometheus's `promtool check metrics` (Debian's `prometheus` package, installed
/// by scripts/test; `RIFFLE_PROMTOOL` names another) over `text`: it parses the
/// exposition and lints names, types, units and help texts.
fn promtool_check(text: &str) {
    let promtool = std::env::var("RIFFLE_PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run `{promtool}` ({e}): scripts/test installs it (Debian package prometheus)")
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{text}"
    );
}

/// Polls `/api/job` until `committed` checkpoints are in.
fn wait_for_checkpoints(control: &Path, committed: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = get_metrics(control);
        if job["checkpoints"]["committed"].as_u64().unwrap_or(0) >= committed {
            return job;
        }
        assert!(
            Instant::now() < deadline,
            "no {committed} checkpoints: {job}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_running_job_serves_metrics_promtool_accepts_and_a_rest_api() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q5", &out, &state);
    let control = state.join("nexmark-q5/_control.json");
    let address = control_address(&control);
    let api = wait_for_checkpoints(&control, 2);

    // The job's graph: every operator with its parallelism and where its input comes from.
    let operators = api["operators"].as_array().unwrap();
    let ids: Vec<&str> = operators
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert!(operators.len() >= 3, "{api}");
    assert_eq!(operators[0]["kind"], "source", "{api}");
    assert_eq!(operators.last().unwrap()["kind"], "sink", "{api}");
    for op in &operators[1..] {
        let from = op["inputs"][0]["from"].as_str().unwrap();
        assert!(ids.contains(&from), "{op}");
        let parallelism = op["parallelism"].as_u64().unwrap();
        assert!(parallelism == 1 || parallelism == 2, "{op}");
        assert_eq!(
            op["subtasks"].as_array().unwrap().len() as u64,
            parallelism,
            "{op}"
        );
    }
    assert!(operators[0]["rows_out"].as_u64().unwrap() > 0, "{api}");

    // Prometheus metrics: valid exposition, one sample per operator subtask, counters
    // that move while the job runs.
    let first = request(&address, "GET", "/metrics", None);
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(
        first
            .head
            .contains("content-type: text/plain; version=0.0.4"),
        "{}",
        first.head
    );
    promtool_check(&first.body);
    let text = &first.body;
    for op in operators {
        let id = op["id"].as_str().unwrap();
        for subtask in 0..op["parallelism"].as_u64().unwrap() {
            let labels = format!("pipeline=\"nexmark-q5\",operator=\"{id}\",subtask=\"{subtask}\"");
            value(text, "riffle_operator_rows_in_total", &labels);
            value(
                text,
                "riffle_operator_output_blocked_seconds_total",
                &labels,
            );
            assert!(
                value(text, "riffle_operator_watermark_seconds", &labels) > 1.0e9,
                "{text}"
            );
        }
    }
    let source = format!("operator=\"{}\",subtask=\"0\"", ids[0]);
    let source_rows = value(text, "riffle_operator_rows_out_total", &source);
    assert!(source_rows > 0.0, "{text}");
    assert!(
        value(text, "riffle_checkpoint_duration_seconds_count", "") >= 2.0,
        "{text}"
    );
    assert!(
        value(text, "riffle_checkpoints_completed_total", "") >= 2.0,
        "{text}"
    );
    assert_eq!(value(text, "riffle_job_restarts_total", ""), 0.0);
    let upload_puts = "phase=\"upload\",kind=\"put\"";
    assert!(value(text, "riffle_object_store_requests_total", upload_puts) > 0.0);
    let written = "phase=\"upload\",direction=\"written\"";
    assert!(value(text, "riffle_object_store_bytes_total", written) > 0.0);
    let state_bytes: f64 = samples(text, "riffle_state_bytes")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert!(state_bytes > 0.0, "{text}");
    // docs/operations.md documents every metric the job serves, and no other.
    let docs = include_str!("../../../docs/operations.md");
    let documented: BTreeSet<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `riffle_"))
        .filter_map(|rest| rest.split('`').next())
        .collect();
    let served: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE riffle_"))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert_eq!(documented, served, "docs/operations.md against /metrics");
    std::thread::sleep(Duration::from_millis(300));
    let second = request(&address, "GET", "/metrics", None).body;
    assert!(value(&second, "riffle_operator_rows_out_total", &source) > source_rows);

    // One operator, and one that does not exist.
    let one = request(&address, "GET", &format!("/api/operators/{}", ids[1]), None);
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.json()["id"], ids[1]);
    assert_eq!(
        request(&address, "GET", "/api/operators/nope", None).status,
        404
    );

    // The checkpoint history of this run, what is retained on storage, how it started.
    let checkpoints = request(&address, "GET", "/api/checkpoints", None).json();
    let history = checkpoints["history"].as_array().unwrap();
    assert!(history.len() >= 2, "{checkpoints}");
    assert_eq!(history[0]["status"], "completed", "{checkpoints}");
    assert!(
        history[0]["duration_ms"].as_f64().unwrap() > 0.0,
        "{checkpoints}"
    );
    assert!(
        !checkpoints["retained"].as_array().unwrap().is_empty(),
        "{checkpoints}"
    );
    assert_eq!(
        checkpoints["recovery"].as_array().unwrap().len(),
        1,
        "{checkpoints}"
    );

    // What each checkpoint cost on the object store: writing its state is one PUT per
    // state file the epoch wrote (as its manifest lists them in its own directory).
    let retained = checkpoints["retained"].as_array().unwrap();
    let newest = retained.last().unwrap()["epoch"].as_u64().unwrap();
    let dir = format!("checkpoints/epoch={newest:06}/");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.join("nexmark-q5").join(&dir).join("_manifest.json")).unwrap(),
    )
    .unwrap();
    let written = manifest["operators"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["subtasks"].as_array().unwrap())
        .flat_map(|s| s["files"].as_array().unwrap())
        .filter(|f| f["path"].as_str().unwrap().starts_with(&dir))
        .count() as u64;
    let record = history
        .iter()
        .find(|r| r["epoch"].as_u64() == Some(newest))
        .unwrap_or_else(|| panic!("epoch {newest} not in {checkpoints}"));
    let requests = &record["requests"];
    assert_eq!(
        requests["upload"]["put"].as_u64(),
        Some(written),
        "{record}"
    );
    assert_eq!(manifest["requests"], requests["upload"], "{manifest}");
    assert!(requests["commit"]["put"].as_u64().unwrap() >= 2, "{record}");

    // Actions need the token, even on loopback; reading paths refuse actions' methods.
    let no_token = request(&address, "POST", "/api/savepoints?label=x", None);
    assert_eq!(no_token.status, 401, "{}", no_token.body);
    assert!(
        no_token.body.contains("_control_token"),
        "{}",
        no_token.body
    );
    assert_eq!(
        request(&address, "POST", "/api/savepoints", Some("guess")).status,
        401
    );
    assert_eq!(request(&address, "GET", "/savepoint", None).status, 405);
    assert_eq!(request(&address, "POST", "/metrics", None).status, 405);
    let token_file = state.join("nexmark-q5/_control_token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{token_file:?}");
    }
    let token = std::fs::read_to_string(&token_file).unwrap();
    let taken = request(
        &address,
        "POST",
        "/api/savepoints?label=by-api",
        Some(&token),
    );
    assert_eq!(taken.status, 200, "{}", taken.body);
    let savepoints = request(&address, "GET", "/api/savepoints", None).json();
    assert_eq!(
        savepoints["savepoints"][0]["label"], "by-api",
        "{savepoints}"
    );
    assert_eq!(
        savepoints["savepoints"][0]["status"], "valid",
        "{savepoints}"
    );

    // The CLI finds the token itself.
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "stop"]));
    let stopped = job.wait_with_output().unwrap();
    let text = stderr(&stopped);
    assert!(stopped.status.success(), "{text}");
    assert!(
        text.contains(&format!("web page http://{address}/#token={token}")),
        "{text}"
    );
    assert!(!token_file.exists() && !control.exists());
}

/// Everything the endpoint answers, from every path, concatenated.
fn every_answer(address: &str, token: Option<&str>, operators: &[String]) -> String {
    let mut paths: Vec<String> = [
        "/",
        "/app.js",
        "/style.css",
        "/metrics",
        "/health",
        "/api/job",
        "/api/checkpoints",
        "/api/savepoints",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    paths.extend(operators.iter().map(|id| format!("/api/operators/{id}")));
    paths.push("/nothing".into());
    let answers: Vec<Answer> = paths
        .iter()
        .map(|p| request(address, "GET", p, token))
        .collect();
    answers
        .iter()
        .map(|a| format!("{}\n{}\n", a.head, a.body))
        .collect()
}

#[test]
fn open_to_the_network_every_request_needs_the_token_and_no_answer_holds_a_secret() {
    let server = moto::MotoServer::start("observed");
    let dir = tempfile::tempdir().unwrap();
    let secret = "S3cr3t-K3y-that-must-never-be-served";
    let state_url = format!("s3://{}/root", server.bucket);
    let mut job = Command::new(env!("CARGO_BIN_EXE_riffle"))
        .envs(server.env())
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .args([
            "nexmark", "--query", "q5", "--events", "2M", "--rate", "10K",
        ])
        .args([
            "--parallelism",
            "2",
            "--restart",
            "none",
            "--throttle",
            "300K",
        ])
        .args(["--checkpoint-interval", "200ms", "--state", &state_url])
        .args(["--http-address", "0.0.0.0:0", "--output"])
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The address and the token, as the job prints them at start.
    let said = Arc::new(Mutex::new(String::new()));
    let mut lines = BufReader::new(job.stderr.take().unwrap()).lines();
    let reader = {
        let said = said.clone();
        std::thread::spawn(move || {
            for line in lines.by_ref().map_while(Result::ok) {
                said.lock().unwrap().push_str(&(line + "\n"));
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (port, token) = loop {
        let text = said.lock().unwrap().clone();
        let port = text
            .split("web page http://0.0.0.0:")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .map(str::to_string);
        let token = text
            .split("#token=")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .map(str::to_string);
        if let (Some(port), Some(token)) = (port, token) {
            break (port, token);
        }
        assert!(
            Instant::now() < deadline,
            "no address and token printed: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let address = format!("127.0.0.1:{port}");

    // Without the token nothing is answered; with it everything is.
    // The page's own files hold no data and are served to anyone.
    let page = request(&address, "GET", "/", None);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("/app.js"), "{}", page.body);
    for path in ["/metrics", "/health", "/api/job", "/api/checkpoints"] {
        let denied = request(&address, "GET", path, None);
        assert_eq!(denied.status, 401, "{path}: {}", denied.body);
        assert!(
            denied.head.contains("www-authenticate: bearer"),
            "{}",
            denied.head
        );
        assert_eq!(request(&address, "GET", path, Some("wrong")).status, 401);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let job_json = loop {
        let answer = request(&address, "GET", "/api/job", Some(&token));
        assert_eq!(answer.status, 200, "{}", answer.body);
        let json = answer.json();
        if json["checkpoints"]["committed"].as_u64().unwrap_or(0) >= 1 {
            break json;
        }
        assert!(Instant::now() < deadline, "no checkpoint: {json}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let operators: Vec<String> = job_json["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    let answers = every_answer(&address, Some(&token), &operators);
    assert!(
        answers.contains("riffle_operator_rows_out_total"),
        "{answers}"
    );
    assert!(!answers.contains(secret), "a secret was served:\n{answers}");
    assert!(
        !answers.contains(&token),
        "the token was served:\n{answers}"
    );

    // Stopped through the endpoint with the token.
    let stop = request(
        &address,
        "POST",
        "/api/savepoints?stop=true&label=end",
        Some(&token),
    );
    assert_eq!(stop.status, 200, "{}", stop.body);
    let status = job.wait().unwrap();
    reader.join().unwrap();
    let text = said.lock().unwrap().clone();
    assert!(status.success(), "{text}");
    // The token is printed once, at start; the secret never.
    assert_eq!(text.matches(&token).count(), 1, "{text}");
    assert!(!text.contains(secret), "{text}");
}

/// A Prometheus server (Debian's, unpacked by scripts/test; `RIFFLE_PROMETHEUS` names
/// it) scraping one target every second; killed when dropped.
struct Prometheus {
    child: std::process::Child,
    address: String,
    _data: tempfile::TempDir,
}

impl Prometheus {
    fn scraping(target: &str) -> Self {
        let program = std::env::var("RIFFLE_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
        let data = tempfile::tempdir().unwrap();
        let config = data.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: riffle\n    static_configs: [{{targets: ['{target}']}}]\n"
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let child = Command::new(&program)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.path().join("tsdb").display()))
            .arg(format!("--web.listen-address={address}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start `{program}` ({e}): scripts/test unpacks it (Debian package prometheus)")
            });
        Self {
            child,
            address,
            _data: data,
        }
    }

    /// Evaluates `query` now: the result vector, or `Err` with Prometheus's error.
    fn query(&self, query: &str) -> Result<Vec<serde_json::Value>, String> {
        let encoded: String = query
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let path = format!("/api/v1/query?query={encoded}");
        let answer = try_request(&self.address, "GET", &path, None)
            .map_err(|e| format!("Prometheus is not answering yet: {e}"))?;
        let json = answer.json();
        if json["status"] != "success" {
            return Err(format!("{query}: {json}"));
        }
        Ok(json["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every query of the Grafana dashboard, with its variables set for `pipeline`.
fn dashboard_queries(pipeline: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/riffle.json");
    let dashboard: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel `{title}` has no query");
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$pipeline", pipeline)
                .replace("$__rate_interval", "1m");
            queries.push((title.to_string(), expr));
        }
    }
    queries
}

/// Prometheus scrapes a running job, and every query of the Grafana dashboard
/// (deploy/grafana/riffle.json) evaluates to data: the dashboard names only metrics
/// the job serves, with the labels it serves them with.
#[test]
fn prometheus_scrapes_a_running_job_and_every_dashboard_query_has_data() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = common::savepoints::nexmark_run_slow("q5", "40M", &out, &state);
    let control = state.join("nexmark-q5/_control.json");
    let prometheus = Prometheus::scraping(&control_address(&control));
    let queries = dashboard_queries("nexmark-q5");
    assert!(queries.len() >= 10, "{queries:?}");
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut missing: Vec<String>;
    loop {
        missing = queries
            .iter()
            .filter_map(|(title, expr)| match prometheus.query(expr) {
                Ok(result) if !result.is_empty() => None,
                Ok(_) => Some(format!("{title}: `{expr}` has no data")),
                Err(e) => Some(format!("{title}: {e}")),
            })
            .collect();
        if missing.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(missing.is_empty(), "{missing:#?}");
    // The throughput Prometheus computes is the job's: rows out of the source per second.
    let rate = prometheus
        .query("sum(rate(riffle_operator_rows_out_total{operator=\"bid\"}[1m]))")
        .unwrap();
    let per_second: f64 = rate[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(per_second > 1000.0, "{rate:?}");
    drop(prometheus);
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "end"]));
    assert!(job.wait_with_output().unwrap().status.success());
}

/// The web page in a real browser: headless Chromium driven by selenium
/// (`tests/browser/page.py`; scripts/test installs Debian's chromium and
/// chromium-driver and selenium from PyPI, `RIFFLE_SELENIUM_PYTHON` names the Python
/// with selenium). It sees every operator in the graph and the table, numbers that
/// move, a row per checkpoint and the recovery record; a savepoint asked without the
/// token is refused, one with it is taken. Screenshots go to
/// `{target}/tmp/observability-page/`.
#[test]
fn the_web_page_shows_the_running_job_in_chromium_and_takes_a_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = common::savepoints::nexmark_run_slow("q5", "40M", &out, &state);
    let control = state.join("nexmark-q5/_control.json");
    let address = control_address(&control);
    let token = std::fs::read_to_string(state.join("nexmark-q5/_control_token")).unwrap();
    let operators: Vec<String> = get_metrics(&control)["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("observability-page");
    let python = std::env::var("RIFFLE_SELENIUM_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/page.py");
    let run = Command::new(&python)
        .arg(&script)
        .args([&address, &token, &operators.join(",")])
        .arg(&shots)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{python}` ({e}): scripts/test installs selenium"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "{said}");
    let seen: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&run.stdout)
            .lines()
            .last()
            .unwrap_or(""),
    )
    .unwrap_or_else(|e| panic!("{e}: {said}"));
    assert!(seen["checkpoints"].as_u64().unwrap() >= 2, "{seen}");
    for shot in ["page-running.png", "page-savepoint.png"] {
        let png = std::fs::read(shots.join(shot)).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{shot}");
    }
    // The savepoint the page took is on storage.
    let listed = ok(savepoint(&state, "nexmark-q5").arg("list"));
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("from-page"),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "end"]));
    assert!(job.wait_with_output().unwrap().status.success());
}
