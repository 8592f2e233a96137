//! How the coordinator serves savepoints: checking a request before it waits its turn,
//! answering one whose epoch failed, and promoting a committed epoch to
//! `savepoints/{label}/`.

use super::{CheckpointCoordinator, CheckpointReport, Pending};
use crate::checkpoint_events::CheckpointEvent;
use crate::savepoint::{SavepointDone, SavepointRequest};
use riffle_state::Manifest;
use std::time::Instant;

/// A savepoint request whose epoch is in flight.
pub(super) struct PendingSavepoint {
    pub(super) request: SavepointRequest,
    pub(super) label: String,
    pub(super) requested: Instant,
}

impl Pending {
    /// Answers the savepoint request of a failed epoch, if any. A failed stop still
    /// stops the job (its sources ended after the barrier): that is recorded in
    /// `report`, so the run ends as stopped instead of restarting.
    pub(super) fn savepoint_failed(&mut self, reason: &str, report: &mut CheckpointReport) {
        if let Some(sp) = self.savepoint.take() {
            let message = format!(
                "savepoint `{}` failed: epoch {}: {reason}",
                sp.label, self.epoch
            );
            if sp.request.stop {
                report.stopped = Some(Err(message.clone()));
            }
            let _ = sp.request.reply.send(Err(message));
        }
    }
}

impl CheckpointCoordinator {
    /// Checks a savepoint request before it waits for its turn; answers and drops one
    /// that cannot be served.
    pub(super) async fn accept(
        &self,
        request: SavepointRequest,
        finishing: bool,
    ) -> Option<SavepointRequest> {
        let refuse = |request: SavepointRequest, reason: String| {
            let _ = request.reply.send(Err(reason));
            None
        };
        if finishing {
            return refuse(request, "the job is finishing (end of input or already stopping); its last checkpoint holds the final state".into());
        }
        if request.drain && !request.stop {
            return refuse(request, "--drain only goes with --stop (it fires every window, which a running job must not do)".into());
        }
        if let Some(label) = &request.label {
            if let Err(e) = riffle_state::layout::check_label(label) {
                return refuse(request, e);
            }
            match self.store.read_savepoint(label).await {
                Ok(None) => {}
                Ok(Some(_)) => {
                    let reason = format!(
                        "savepoint `{label}` exists; choose another label or delete it first"
                    );
                    return refuse(request, reason);
                }
                Err(e) => return refuse(request, e.to_string()),
            }
        }
        Some(request)
    }

    /// Copies a committed savepoint epoch into `savepoints/{label}/`.
    pub(super) async fn promote(
        &self,
        manifest: &Manifest,
        label: &str,
        requested: Instant,
        stopped: bool,
    ) -> Result<SavepointDone, String> {
        let savepoint = self.store.promote(manifest, label).await.map_err(|e| {
            format!(
                "epoch {} committed, but promoting it to savepoint `{label}` failed: {e}",
                manifest.epoch
            )
        })?;
        let done = SavepointDone {
            label: label.to_string(),
            epoch: manifest.epoch,
            files: savepoint.files().count(),
            bytes: savepoint.files().map(|f| f.bytes).sum(),
            duration_ms: requested.elapsed().as_millis() as u64,
            stopped,
            location: format!(
                "{}/{}/savepoints/{label}",
                self.store.root_url().trim_end_matches('/'),
                self.pipeline
            ),
        };
        self.emit(CheckpointEvent::Savepoint(done.clone()));
        Ok(done)
    }
}
