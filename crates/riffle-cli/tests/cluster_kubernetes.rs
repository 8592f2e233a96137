//! The Kubernetes files (`deploy/kubernetes`, docs/cluster.md "On Kubernetes"): valid
//! resources, and a worker command riffle accepts.

use crate::common::{riffle, stderr};
use std::path::Path;
use std::process::Command;

/// The repository's `deploy/kubernetes` directory.
fn kubernetes_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

#[test]
fn the_kubernetes_files_are_valid_resources() {
    let validate = std::env::var("RIFFLE_KUBERNETES_VALIDATE")
        .expect("RIFFLE_KUBERNETES_VALIDATE: kubernetes-validate (scripts/test installs it)");
    let dir = kubernetes_dir();
    let out = Command::new(validate)
        .arg("--strict")
        .args(["service.yaml", "statefulset.yaml", "secret.example.yaml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("passed for resource").count(), 5, "{text}");
}

/// The StatefulSet's worker arguments parse, and name as many workers as it has pods.
#[test]
fn the_statefulset_runs_a_worker_command_riffle_accepts() {
    let yaml = std::fs::read_to_string(kubernetes_dir().join("statefulset.yaml")).unwrap();
    let args: Vec<String> = yaml
        .lines()
        .skip_while(|l| l.trim() != "args:")
        .skip(1)
        .map_while(|l| l.trim().strip_prefix("- "))
        .map(|a| a.trim_matches('"').to_string())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("worker"), "{args:?}");
    let replicas: usize = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("replicas: "))
        .unwrap()
        .parse()
        .unwrap();
    let workers = &args[args.iter().position(|a| a == "--workers").unwrap() + 1];
    assert_eq!(workers.split(',').count(), replicas);
    // A pod named past the list: every option parses, then the index is refused.
    let out = riffle()
        .args(&args)
        .env("HOSTNAME", "riffle-9")
        .output()
        .unwrap();
    let text = stderr(&out);
    assert!(!out.status.success());
    assert!(
        text.contains(&format!(
            "--worker-id 9 is not an index into --workers ({replicas} addresses)"
        )),
        "{text}"
    );
    // The pipeline it mounts plans (the password comes from the Secret in a pod).
    let explain = riffle()
        .env("PGPASSWORD", "from-the-secret")
        .arg("explain")
        .arg(kubernetes_dir().join("pipeline.sql"))
        .output()
        .unwrap();
    assert!(explain.status.success(), "{}", stderr(&explain));
}
