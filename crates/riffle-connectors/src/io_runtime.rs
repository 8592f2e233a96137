//! A small tokio runtime of the connectors' own, for async clients (tokio-postgres).
//!
//! Sinks are synchronous ([`riffle_core::Sink`]) and are called from the job's worker
//! threads, from the checkpoint coordinator's thread and from recovery; a future cannot
//! be driven on any of those without starting a runtime inside a runtime. Connections
//! live on this runtime instead, and callers wait for their requests with a plain
//! blocking wait, the way they wait for a file write.

use riffle_core::{Error, Result};
use std::future::Future;
use std::sync::OnceLock;
use tokio::runtime::Runtime;

static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

fn runtime() -> Result<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("riffle-connector-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::external("connector I/O runtime", format!("cannot start: {e}")))
}

/// Runs `future` on the connectors' runtime and waits for its output.
///
/// # Errors
/// The runtime cannot start, or the future panicked.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handle = runtime()?.spawn(future);
    futures::executor::block_on(handle)
        .map_err(|e| Error::external("connector I/O runtime", format!("request stopped: {e}")))
}
