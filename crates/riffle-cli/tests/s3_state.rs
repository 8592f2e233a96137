//! The `s3://` state root end to end, against a real S3-protocol server (moto) on
//! 127.0.0.1: a run crashed mid-protocol resumes from its checkpoint in the bucket and
//! publishes exactly the crash-free output; `riffle checkpoints list` reads the bucket.

use crate::moto;

use crate::common;

use common::{published, stderr};
use std::path::Path;
use std::process::Command;

fn riffle(server: &moto::MotoServer) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_riffle"));
    cmd.envs(server.env());
    cmd
}

fn q7(server: &moto::MotoServer, out: &Path, state: Option<&str>) -> Command {
    let mut cmd = riffle(server);
    cmd.args([
        "nexmark", "--query", "q7", "--events", "2M", "--rate", "10K",
    ])
    .args(["--parallelism", "2", "--restart", "none", "--output"])
    .arg(out);
    if let Some(state) = state {
        cmd.args(["--checkpoint-interval", "30ms", "--state", state]);
    }
    cmd
}

#[test]
fn a_crashed_run_resumes_from_checkpoints_in_s3() {
    let server = moto::MotoServer::start("riffle-test");
    let dir = tempfile::tempdir().unwrap();
    let state = format!("s3://{}/checkpoints-root", server.bucket);

    let reference = q7(&server, &dir.path().join("reference"), None)
        .output()
        .unwrap();
    assert!(reference.status.success(), "{}", stderr(&reference));
    let expected = published(&dir.path().join("reference"));
    assert!(!expected.is_empty());

    let out = dir.path().join("out");
    let crashed = q7(&server, &out, Some(&state))
        .env("RIFFLE_CRASH_AT", "after-sink-commit:2")
        .output()
        .unwrap();
    assert!(
        !crashed.status.success() && stderr(&crashed).contains("crashing after-sink-commit"),
        "{}",
        stderr(&crashed)
    );
    let resumed = q7(&server, &out, Some(&state)).output().unwrap();
    let text = stderr(&resumed);
    assert!(resumed.status.success(), "{text}");
    assert!(text.contains("from checkpoint epoch 2 "), "{text}");
    assert_eq!(published(&out), expected);

    let listed = riffle(&server)
        .args([
            "checkpoints",
            "list",
            "--pipeline",
            "nexmark-q7",
            "--state",
            &state,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(text.contains("COMMITTED"), "{text}");
}

#[test]
fn unreachable_s3_state_is_a_clear_error() {
    let server = moto::MotoServer::start("riffle-test");
    let endpoint = server.endpoint.clone();
    drop(server); // nothing listens there any more
    let dir = tempfile::tempdir().unwrap();
    let result = Command::new(env!("CARGO_BIN_EXE_riffle"))
        .env("AWS_ENDPOINT", &endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "x")
        .env("AWS_SECRET_ACCESS_KEY", "x")
        .env("AWS_REGION", "us-east-1")
        .args([
            "nexmark",
            "--query",
            "q1",
            "--events",
            "10K",
            "--checkpoint-interval",
            "1s",
        ])
        .args(["--state", "s3://riffle-test/x", "--output"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let text = stderr(&result);
    assert!(!result.status.success(), "{text}");
    assert!(
        text.contains("recovering") || text.contains("checkpoint"),
        "{text}"
    );
    assert!(
        text.contains("riffle-test") || text.contains("x/nexmark-q1"),
        "{text}"
    );
}
