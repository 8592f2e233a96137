//! Watching a running job from outside: Prometheus `/metrics` (checked by Prometheus's
//! own `promtool`), the REST API, the token that guards actions and an endpoint open to
//! the network with no secret in any answer, a real Prometheus running the Grafana
//! dashboard's queries, and the web page in headless Chromium.

use crate::moto;

use crate::common;

mod metrics;
mod network;
mod page;
mod prometheus;

use common::savepoints::get_metrics;
use std::path::Path;
use std::time::{Duration, Instant};

/// Polls `/api/job` until `committed` checkpoints are in.
pub fn wait_for_checkpoints(control: &Path, committed: u64) -> serde_json::Value {
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
