//! An endpoint open to the network: HTTPS, the token for every request, and no secret
//! in any answer.

use super::common::http::{request, Answer};
use super::moto;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    let tls = riffle_cluster::tls::WorkerCertificates::local(&dir.path().join("tls"))
        .unwrap()
        .files;
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
        .args(["--http-address", "0.0.0.0:0", "--http-tls-cert"])
        .arg(&tls.cert)
        .arg("--http-tls-key")
        .arg(&tls.key)
        .arg("--output")
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
            .split("web page https://0.0.0.0:")
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
    // `/livez` too, for probes that carry no token; it tells nothing about the job.
    let live = request(&address, "GET", "/livez", None);
    assert_eq!((live.status, live.body.trim()), (200, "ok"));
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
    // Over TLS, as a client on another machine must speak: the certificate checks out
    // against the authority, and the token is still needed.
    let curl = |token: Option<&str>| {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(&tls.ca)
            .arg(format!("https://127.0.0.1:{port}/metrics"));
        if let Some(token) = token {
            cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    assert_eq!(curl(Some(&token)), "200");
    assert_eq!(curl(None), "401");
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

#[test]
fn an_endpoint_beyond_loopback_without_tls_is_refused_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_riffle"))
        .args(["nexmark", "--query", "q1", "--events", "10K"])
        .args(["--checkpoint-interval", "1s", "--state"])
        .arg(dir.path().join("state"))
        .args(["--http-address", "0.0.0.0:0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("--http-tls-cert") && text.contains("--http-insecure"),
        "{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_riffle"))
        .args(["nexmark", "--query", "q1", "--events", "10K"])
        .args(["--checkpoint-interval", "1s", "--state"])
        .arg(dir.path().join("state"))
        .args(["--http-address", "0.0.0.0:0", "--http-insecure"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("web page http://0.0.0.0:"), "{text}");
}
