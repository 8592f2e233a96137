//! The web page in headless Chromium.

use super::common::http::control_address;
use super::common::savepoints::{get_metrics, nexmark_run_slow, ok, savepoint};
use std::path::Path;
use std::process::Command;

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
    let job = nexmark_run_slow("q5", "40M", &out, &state);
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
