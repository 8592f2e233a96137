//! Starting from a savepoint or checkpoint the user named (`--from-savepoint`,
//! `--from-checkpoint`): checking the plan against it, copying it in from another state
//! root, and registering it as this pipeline's newest committed epoch.

use super::sinks::owner_steps;
use super::{
    claim, finish, state_error, state_error_about, Chosen, ExplicitRestore, Recovered, RestoreFrom,
};
use crate::error::{RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use crate::plan_check::PlanCheck;
use crate::restore::RestoredJob;
use riffle_core::Epoch;
use riffle_state::recovery::EpochFinding;
use riffle_state::{CheckpointStore, Manifest, ManifestStatus};
use std::sync::Arc;

/// Prepares a run of `graph` from a named savepoint or checkpoint: copies it into this
/// state root when it lies in another, checks the plan against it (refusing mismatched
/// state, and dropped state unless allowed), loads and verifies it, and registers it as
/// a new committed epoch of this pipeline — so a failure before the run's first
/// checkpoint restarts from it, not from an older checkpoint of an earlier run. Staged
/// sink output of uncommitted epochs is discarded as in [`recover`]; a PREPARED epoch of
/// the earlier run is not rolled forward (the named state replaces that history).
///
/// # Errors
/// No such savepoint or checkpoint; the plan does not fit it; a damaged file; storage
/// failures.
pub async fn recover_from(
    store: &CheckpointStore,
    graph: &JobGraph,
    explicit: &ExplicitRestore,
    accept_replayed_output: bool,
) -> RuntimeResult<Recovered> {
    let named = read_named(&explicit.from).await?;
    let check = PlanCheck::new(&named.manifest, graph);
    if let Some(refusal) = check.refusal(explicit.allow_non_restored) {
        let mut operators: Vec<&str> = check.mismatched();
        if !explicit.allow_non_restored {
            operators.extend(check.dropped());
        }
        return Err(RuntimeError::Restore {
            operator: riffle_core::OperatorId(operators.join(", ")),
            message: format!("{} does not fit this pipeline: {refusal}", named.what),
        });
    }
    // A run started from another state root's savepoint or checkpoint continues that
    // pipeline: it inherits the output the other state owns.
    // (Its manifest names the state that took it, also after a trip through an
    // archive; older manifests do not, and the state root it lies in stands in.)
    let ours = store.identity().await.map_err(state_error)?;
    let predecessor = match &named.manifest.state_id {
        Some(id) => Some(id.clone()),
        None => named
            .source
            .identity()
            .await
            .map_err(state_error)?
            .map(|i| i.id),
    };
    let owners = owner_steps(
        &graph.sinks(),
        ours.as_ref().map(|i| i.id.as_str()),
        predecessor.as_deref(),
        false,
    )?;
    // Checked first: a refused restore copies nothing into this state root and claims
    // no generation. From here on storage changes: fence out older processes first.
    let before = store.findings(false).await.map_err(state_error)?;
    let generation = claim(store, &before).await?;
    // An older checkpoint or savepoint of this very pipeline: the epochs after it
    // published output that the run now writes again. Taken back where the sink can,
    // else refused — as for damaged checkpoints passed over.
    let mut taken_back = Vec::new();
    let ours_before =
        named.source.same_root(store) && named.source.layout().base() == store.layout().base();
    let later: Vec<Epoch> = before
        .iter()
        .filter(|(e, f)| *e > named.manifest.epoch && !matches!(f, EpochFinding::Partial))
        .map(|(e, _)| *e)
        .collect();
    if ours_before && !later.is_empty() {
        let later: Vec<String> = later.iter().map(ToString::to_string).collect();
        let why = format!(
            "{} is older than epoch(s) {} of this pipeline",
            named.what,
            later.join(", ")
        );
        taken_back = super::sinks::take_back_after(
            &graph.sinks(),
            named.manifest.epoch,
            &why,
            "restore the newest checkpoint instead",
            accept_replayed_output,
        )?;
    }
    let (mut manifest, what) = install_named(store, named).await?;
    let dropped: Vec<String> = check.dropped().iter().map(|d| d.to_string()).collect();
    manifest
        .operators
        .retain(|o| !dropped.contains(&o.operator));
    let restored = RestoredJob::load(store, &manifest)
        .await
        .map_err(|e| state_error_about(&format!("{what} cannot be restored"), e))?;
    let findings = store.findings(false).await.map_err(state_error)?;
    // Register the named state as this pipeline's newest committed epoch: past every
    // epoch here and past the state's own, so epochs keep rising along the job's life
    // (sinks name committed output by epoch; a lower one would overwrite it).
    let newest_here = findings.iter().map(|(e, _)| e.0).max().unwrap_or(0);
    let epoch = Epoch(newest_here.max(manifest.epoch.0) + 1);
    let mut registered = manifest.clone();
    registered.epoch = epoch;
    registered.generation = generation;
    registered.status = ManifestStatus::Prepared;
    registered.savepoint = None;
    registered.restored_from = Some(what.clone());
    registered.sink_committables.clear();
    registered.plan_fingerprint = graph.fingerprint();
    registered.state_id = Some(store.claim_identity().await.map_err(state_error)?.id);
    // The named state replaces the history before it.
    registered.history_from = Some(epoch);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    registered.triggered_at_ms = now;
    registered.written_at_ms = now;
    store.prepare(&registered).await.map_err(state_error)?;
    store.commit(&registered).await.map_err(state_error)?;
    store.flip_latest(epoch).await.map_err(state_error)?;
    registered.status = ManifestStatus::Committed;
    let mut restored = restored;
    restored.epoch = epoch;
    let mut findings = findings;
    findings.push((epoch, EpochFinding::Valid(registered.clone())));
    let mut plan = riffle_state::recovery::plan_recovery(&findings);
    plan.restore = Some(epoch);
    plan.roll_forward = false;
    plan.skipped.clear();
    let mut recovered = finish(
        store,
        graph,
        Chosen {
            plan,
            manifest: Some(registered),
            restored: Some(Arc::new(restored)),
            findings,
            generation,
            start_empty: false,
            restored_from: Some((what, check)),
            replayed: Vec::new(),
            accept_replayed_output: false,
            replace_output: false,
            owners,
        },
    )
    .await?;
    recovered.next_epoch = Epoch(epoch.0 + 1);
    recovered.unpublished.extend(taken_back);
    Ok(recovered)
}

/// The state a [`RestoreFrom`] names, where it lies.
struct Named {
    source: CheckpointStore,
    manifest: Manifest,
    /// How messages call it.
    what: String,
    /// The label it gets when copied into another state root.
    label: String,
}

/// Reads the manifest a [`RestoreFrom`] names.
async fn read_named(from: &RestoreFrom) -> RuntimeResult<Named> {
    Ok(match from {
        RestoreFrom::Savepoint {
            store: source,
            label,
        } => {
            let manifest = source.read_savepoint(label).await.map_err(state_error)?;
            let manifest = manifest.ok_or_else(|| {
                RuntimeError::needs_user(format!(
                    "no savepoint `{label}` in {}; `riffle savepoint list` shows what exists",
                    source.root_url()
                ))
            })?;
            Named {
                source: source.clone(),
                manifest,
                what: format!("savepoint `{label}`"),
                label: label.clone(),
            }
        }
        RestoreFrom::Checkpoint {
            store: source,
            epoch,
        } => {
            let manifest = source.read_manifest(*epoch).await.map_err(state_error)?;
            let manifest = manifest.ok_or_else(|| {
                RuntimeError::needs_user(format!(
                    "checkpoint epoch {epoch} has no manifest in {}; `riffle checkpoints list` shows what exists",
                    source.root_url()
                ))
            })?;
            let label = format!("{}-epoch-{}", manifest.pipeline, epoch.0);
            Named {
                source: source.clone(),
                manifest,
                what: format!("checkpoint epoch {epoch}"),
                label,
            }
        }
    })
}

/// The named state as this store sees it: as is when it lies in this pipeline's state,
/// else copied in as a savepoint (so this pipeline's checkpoints can reference it).
async fn install_named(store: &CheckpointStore, named: Named) -> RuntimeResult<(Manifest, String)> {
    let Named {
        source,
        manifest,
        what,
        label,
    } = named;
    if source.same_root(store) && source.layout().base() == store.layout().base() {
        return Ok((manifest, what));
    }
    let installed = match store.read_savepoint(&label).await.map_err(state_error)? {
        Some(existing) if same_files(&existing, &manifest) => existing,
        Some(_) => {
            return Err(RuntimeError::needs_user(format!(
                "{what} from {} would be copied in as savepoint `{label}`, which exists here with other state; delete it first",
                source.root_url()
            )))
        }
        None => store
            .install_savepoint(&source, &manifest, &label)
            .await
            .map_err(state_error)?,
    };
    Ok((
        installed,
        format!(
            "{what} of {} (copied in as savepoint `{label}`)",
            source.root_url()
        ),
    ))
}

/// Whether two manifests hold the same state files (by size and checksum, in order).
fn same_files(a: &Manifest, b: &Manifest) -> bool {
    let key =
        |m: &Manifest| -> Vec<(u64, u32)> { m.files().map(|f| (f.bytes, f.crc32c)).collect() };
    key(a) == key(b)
}
