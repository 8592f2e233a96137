//! A real Prometheus scraping a job, running every query of the Grafana dashboard.

use super::common::http::{control_address, try_request};
use super::common::savepoints::{nexmark_run_slow, ok, savepoint};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
        // While it starts (opening its database), Prometheus answers 503 in plain text.
        if answer.status == 503 {
            return Err(format!(
                "Prometheus is not ready yet: {}",
                answer.body.trim()
            ));
        }
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
    let job = nexmark_run_slow("q5", "40M", &out, &state);
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
