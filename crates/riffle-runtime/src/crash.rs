//! Named crash points for testing the commit protocol (docs/engine.md, "How correctness is tested").
//!
//! `RIFFLE_CRASH_AT=<point>:<epoch>` aborts the process (like `kill -9`: no destructors,
//! no flushing) when the coordinator reaches `<point>` of epoch `<epoch>`.

use riffle_core::Epoch;
use std::sync::OnceLock;

/// The protocol steps a crash can be injected after, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Every task's state of the epoch is on storage; no manifest yet.
    AfterSnapshotUpload,
    /// The manifest is PREPARED (the commit decision is logged); sinks not committed.
    AfterManifestPrepared,
    /// Sinks committed; the manifest still says PREPARED.
    AfterSinkCommit,
    /// The manifest is COMMITTED; `_latest.json` not flipped.
    AfterManifestCommitted,
    /// `_latest.json` points at the epoch.
    AfterLatestFlip,
}

impl CrashPoint {
    /// Every point, in protocol order.
    pub const ALL: [CrashPoint; 5] = [
        CrashPoint::AfterSnapshotUpload,
        CrashPoint::AfterManifestPrepared,
        CrashPoint::AfterSinkCommit,
        CrashPoint::AfterManifestCommitted,
        CrashPoint::AfterLatestFlip,
    ];

    /// The name used in `RIFFLE_CRASH_AT`.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterSnapshotUpload => "after-snapshot-upload",
            CrashPoint::AfterManifestPrepared => "after-manifest-prepared",
            CrashPoint::AfterSinkCommit => "after-sink-commit",
            CrashPoint::AfterManifestCommitted => "after-manifest-committed",
            CrashPoint::AfterLatestFlip => "after-latest-flip",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Reads `RIFFLE_CRASH_AT` once; a malformed value is reported and ignored.
fn configured() -> Option<(CrashPoint, Epoch)> {
    static CONFIGURED: OnceLock<Option<(CrashPoint, Epoch)>> = OnceLock::new();
    *CONFIGURED.get_or_init(|| {
        let value = std::env::var("RIFFLE_CRASH_AT").ok()?;
        let parsed = value.split_once(':').and_then(|(point, epoch)| {
            Some((CrashPoint::parse(point)?, Epoch(epoch.parse().ok()?)))
        });
        if parsed.is_none() {
            let names: Vec<&str> = CrashPoint::ALL.iter().map(|p| p.name()).collect();
            eprintln!(
                "riffle: ignoring RIFFLE_CRASH_AT={value}: expected <point>:<epoch> with a point of {}",
                names.join(", ")
            );
        }
        parsed
    })
}

/// Aborts the process if `RIFFLE_CRASH_AT` names this point and epoch.
pub fn maybe_crash(point: CrashPoint, epoch: Epoch) {
    if configured() == Some((point, epoch)) {
        eprintln!(
            "riffle: RIFFLE_CRASH_AT: crashing {} of epoch {epoch}",
            point.name()
        );
        std::process::abort();
    }
}

/// A pause: the step, the epoch and how long.
type Pause = (String, Epoch, std::time::Duration);

/// Parses `<step>:<epoch>:<millis>`.
fn parse_pause(value: &str) -> Option<Pause> {
    let mut parts = value.split(':');
    let step = parts.next()?.to_string();
    let epoch = Epoch(parts.next()?.parse().ok()?);
    let millis = parts.next()?.parse().ok()?;
    Some((step, epoch, std::time::Duration::from_millis(millis)))
}

/// Reads `RIFFLE_PAUSE_AT=<step>:<epoch>:<millis>` once (tests of fencing).
fn pause_configured() -> Option<Pause> {
    static CONFIGURED: OnceLock<Option<Pause>> = OnceLock::new();
    CONFIGURED
        .get_or_init(|| {
            let value = std::env::var("RIFFLE_PAUSE_AT").ok()?;
            let parsed = parse_pause(&value);
            if parsed.is_none() {
                eprintln!(
                    "riffle: ignoring RIFFLE_PAUSE_AT={value}: expected <step>:<epoch>:<millis>"
                );
            }
            parsed
        })
        .clone()
}

/// How long to pause at `step` of `epoch`, if `RIFFLE_PAUSE_AT` names them.
fn pause_at(step: &str, epoch: Epoch) -> Option<std::time::Duration> {
    let (s, e, pause) = pause_configured()?;
    (s == step && e == epoch).then(|| {
        eprintln!("riffle: RIFFLE_PAUSE_AT: pausing {pause:?} {step} of epoch {epoch}");
        pause
    })
}

/// Pauses the coordinator if `RIFFLE_PAUSE_AT` names this step and epoch: a process
/// stalled at the worst moment (a GC pause, a frozen VM) for the fencing tests. Steps:
/// `before-claim` (recovery has read the claims, epoch 0), `after-generation-check`
/// (before PREPARED) and `after-prepared-check` (before the sinks commit).
pub async fn maybe_pause(step: &str, epoch: Epoch) {
    if let Some(pause) = pause_at(step, epoch) {
        tokio::time::sleep(pause).await;
    }
}

/// [`maybe_pause`] outside the runtime: step `before-exit` (epoch 0) holds a worker
/// that reported its end, for the test of worker 0 killed as a job ends.
pub fn maybe_pause_blocking(step: &str, epoch: Epoch) {
    if let Some(pause) = pause_at(step, epoch) {
        std::thread::sleep(pause);
    }
}
