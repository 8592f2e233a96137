//! `/metrics` as Prometheus's promtool reads it, and the REST API, from a running job.

use super::common::http::{control_address, request, request_naming};
use super::common::savepoints::{ok, savepoint, start_slow};
use super::common::stderr;
use super::wait_for_checkpoints;
use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
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
    // docs/operations.md documents every metric the job serves, and no other; a job
    // whose source cannot tell its backlog (Nexmark), that has no unbounded GROUP BY
    // (q5) and that restored nothing serves all but those three. Sinks commit with a
    // checkpoint that had output: ask until one has.
    let docs = include_str!("../../../../docs/operations.md");
    let mut documented: BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `riffle_"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_string)
        .collect();
    assert!(documented.remove("source_pending_records"));
    assert!(documented.remove("operator_state_bytes"));
    assert!(documented.remove("operator_restore_seconds"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = request(&address, "GET", "/metrics", None).body;
        let served: BTreeSet<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE riffle_"))
            .filter_map(|rest| rest.split(' ').next())
            .map(str::to_string)
            .collect();
        if served == documented || Instant::now() > deadline {
            assert_eq!(documented, served, "docs/operations.md against /metrics");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    let second = request(&address, "GET", "/metrics", None).body;
    assert!(value(&second, "riffle_operator_rows_out_total", &source) > source_rows);

    // One operator, and one that does not exist; asked again a second later, it has
    // rates.
    let one = request(&address, "GET", &format!("/api/operators/{}", ids[1]), None);
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.json()["id"], ids[1]);
    std::thread::sleep(Duration::from_millis(1100));
    let again = request(&address, "GET", &format!("/api/operators/{}", ids[1]), None).json();
    assert!(
        again["rows_in_per_second"].as_f64().unwrap() > 0.0,
        "{again}"
    );
    assert!(again["blocked_share"].as_f64().is_some(), "{again}");
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
    // state file the epoch wrote (as its manifest lists them in its own directory). The
    // job runs on and GC deletes old epochs: take the newest retained one whose
    // manifest is still there. The history gains an epoch's record just after its
    // manifest commits, so the store may list an epoch the same answer's history does
    // not have yet: take the newest retained one the history has.
    let (checkpoints, newest, dir, manifest) = (0..100)
        .find_map(|attempt| {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            let checkpoints = request(&address, "GET", "/api/checkpoints", None).json();
            let recorded: BTreeSet<u64> = checkpoints["history"]
                .as_array()?
                .iter()
                .filter_map(|r| r["epoch"].as_u64())
                .collect();
            let newest = checkpoints["retained"]
                .as_array()?
                .iter()
                .rev()
                .filter(|r| r["files"].is_u64())
                .filter_map(|r| r["epoch"].as_u64())
                .find(|epoch| recorded.contains(epoch))?;
            let dir = format!("checkpoints/epoch={newest:06}/");
            let path = state.join("nexmark-q5").join(&dir).join("_manifest.json");
            let manifest = std::fs::read(path).ok()?;
            let manifest: serde_json::Value = serde_json::from_slice(&manifest).ok()?;
            Some((checkpoints, newest, dir, manifest))
        })
        .expect("a retained checkpoint with its manifest");
    let written = manifest["operators"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["subtasks"].as_array().unwrap())
        .flat_map(|s| s["files"].as_array().unwrap())
        .filter(|f| f["path"].as_str().unwrap().starts_with(&dir))
        .count() as u64;
    let history = checkpoints["history"].as_array().unwrap();
    let record = history
        .iter()
        .find(|r| r["epoch"].as_u64() == Some(newest))
        .unwrap_or_else(|| panic!("epoch {newest} not in {checkpoints}"));
    let requests = &record["requests"];
    // Every task's part: one entry per task subtask, their bytes adding up.
    let tasks = record["subtasks"].as_array().unwrap();
    let task_bytes: u64 = tasks.iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    assert_eq!(Some(task_bytes), record["bytes"].as_u64(), "{record}");
    let named: BTreeSet<(String, u64)> = tasks
        .iter()
        .map(|t| {
            (
                t["task"].as_str().unwrap().to_string(),
                t["subtask"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(named.len(), tasks.len(), "{record}");
    assert!(named.contains(&(ids[0].to_string(), 1)), "{record}");
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
    // A web page of another site re-pointed at 127.0.0.1 (DNS rebinding) names its own
    // host: it reads nothing without the token.
    let rebound = request_naming(&address, "attacker.example", "GET", "/api/job", None);
    assert_eq!(rebound.status, 403, "{}", rebound.body);
    assert!(rebound.body.contains("localhost"), "{}", rebound.body);
    assert!(!rebound.body.contains("pipeline"), "{}", rebound.body);
    assert_eq!(
        request_naming(&address, "attacker.example:80", "GET", "/metrics", None).status,
        403
    );
    assert_eq!(request(&address, "GET", "/api/job", None).status, 200);
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
    // The run's record goes; the job's token stays for its next run.
    assert!(!control.exists());
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), token);
}
