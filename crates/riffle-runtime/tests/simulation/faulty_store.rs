//! An object store in front of one shared in-memory store, one per actor: every
//! operation first hands control back to the scheduler (so actors interleave there),
//! then may be disturbed as the fault model says, and every write or delete is recorded
//! with the actor's generation for invariant 3.

use super::world::{Shared, World};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use rand::seq::SliceRandom;
use rand::Rng;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// How often a run stalls right after reading the generation claims.
const STALL_RATE: f64 = 0.05;

/// What happens to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// Fails before taking effect.
    Fail,
    /// Takes effect; the caller gets an error.
    LoseResponse,
    /// Writes half the bytes; the caller gets an error.
    Tear,
}

/// One actor's view of the shared store.
#[derive(Clone)]
pub struct FaultyStore {
    inner: Arc<InMemory>,
    actor: usize,
    world: Shared,
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore(a{})", self.actor)
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

fn simulated(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "sim",
        source: what.to_string().into(),
    }
}

/// A path as the trace shows it (without the state root and pipeline).
fn short(path: &Path) -> &str {
    let p = path.as_ref();
    p.strip_prefix("state/sim/").unwrap_or(p)
}

impl FaultyStore {
    pub fn new(inner: Arc<InMemory>, actor: usize, world: Shared) -> Self {
        Self {
            inner,
            actor,
            world,
        }
    }

    /// Hands control back to the scheduler, then draws this operation's fault from
    /// `possible`.
    async fn turn(&self, op: &str, path: &str, possible: &[Fault]) -> Fault {
        YieldOnce(false).await;
        let mut w = self.world.lock();
        let fault = if w.fault() {
            let i = w.rng.random_range(0..possible.len());
            possible[i]
        } else {
            Fault::None
        };
        let generation = generation(&w, self.actor);
        let note = if fault == Fault::None {
            String::new()
        } else {
            format!(" [{fault:?}]")
        };
        w.trace(format!("a{} g{generation} {op} {path}{note}", self.actor));
        fault
    }

    /// Records that this actor wrote (`deleted` false) or deleted `path`, which
    /// `existed` before. Overwriting or deleting an object a newer generation wrote
    /// breaks invariant 3; creating one where none is does not (it destroys nothing).
    fn changed(&self, path: &Path, existed: bool, deleted: bool) {
        let mut w = self.world.lock();
        w.version += 1;
        if let Some(g) = path
            .filename()
            .and_then(riffle_state::layout::parse_generation_claim)
        {
            // A claim is created once, by the run that takes that generation.
            w.generation_of.insert(self.actor, g);
        }
        let generation = generation(&w, self.actor);
        let key = path.as_ref().to_string();
        // `_latest.json` is a hint that recovery never relies on (it lists epochs
        // itself); a zombie may still flip it (docs/engine.md, "Fencing").
        let hint = key.ends_with("/_latest.json");
        match w.writers.get(&key) {
            Some(&newer) if existed && newer > generation && !hint => {
                let v = format!(
                    "a{} of generation {generation} {} {}, which generation {newer} wrote",
                    self.actor,
                    if deleted { "deleted" } else { "overwrote" },
                    short(path)
                );
                w.violations.push(v);
            }
            _ => {}
        }
        if deleted {
            w.writers.remove(&key);
        } else {
            w.writers.insert(key, generation);
        }
    }
}

fn generation(w: &World, actor: usize) -> u64 {
    w.generation_of.get(&actor).copied().unwrap_or(0)
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        use Fault::*;
        let fault = self
            .turn("put", short(location), &[Fail, LoseResponse, Tear])
            .await;
        let existed = self.inner.head(location).await.is_ok();
        let payload = match fault {
            Fail => return Err(simulated("put failed before it took effect")),
            Tear => {
                let bytes: Vec<u8> = payload.iter().flat_map(|b| b.iter().copied()).collect();
                PutPayload::from(Bytes::from(bytes[..bytes.len() / 2].to_vec()))
            }
            None | LoseResponse => payload,
        };
        let result = self.inner.put_opts(location, payload, opts).await;
        if result.is_ok() {
            self.changed(location, existed, false);
        }
        match fault {
            Tear => Err(simulated("put torn: half the bytes written")),
            LoseResponse => Err(simulated("put took effect, its response was lost")),
            _ => result,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        // (Nothing riffle writes goes up in parts today; were it to, its failure is
        // injected like any other's.)
        if self
            .turn("multipart", short(location), &[Fault::Fail])
            .await
            == Fault::Fail
        {
            return Err(simulated("multipart upload failed to start"));
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if self.turn("get", short(location), &[Fault::Fail]).await == Fault::Fail {
            return Err(simulated("get failed"));
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let this = self.clone();
        locations
            .and_then(move |location| {
                let this = this.clone();
                async move {
                    use Fault::*;
                    let fault = this
                        .turn("delete", short(&location), &[Fail, LoseResponse])
                        .await;
                    if fault == Fail {
                        return Err(simulated("delete failed before it took effect"));
                    }
                    // Deleting what is already gone changes nothing.
                    let existed = this.inner.head(&location).await.is_ok();
                    this.inner.delete(&location).await?;
                    if existed {
                        this.changed(&location, true, true);
                    }
                    if fault == LoseResponse {
                        return Err(simulated("delete took effect, its response was lost"));
                    }
                    Ok(location)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let this = self.clone();
        let prefix = prefix.cloned();
        futures::stream::once(async move {
            let shown = prefix.as_ref().map_or("", short).to_string();
            if this.turn("list", &shown, &[Fault::Fail]).await == Fault::Fail {
                return vec![Err(simulated("list failed"))];
            }
            let mut items: Vec<Result<ObjectMeta>> =
                this.inner.list(prefix.as_ref()).collect().await;
            let mut w = this.world.lock();
            items.shuffle(&mut w.rng);
            // Right after reading the claims (a fencing check) is where a frozen process
            // does the most harm when it wakes: stall there now and then.
            if shown.ends_with("_generations") && w.faults_on && w.rng.random_bool(STALL_RATE) {
                w.stall = Some(this.actor);
            }
            drop(w);
            items
        })
        .flat_map(futures::stream::iter)
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let shown = prefix.map_or("", short);
        if self.turn("list/", shown, &[Fault::Fail]).await == Fault::Fail {
            return Err(simulated("list failed"));
        }
        let mut listing = self.inner.list_with_delimiter(prefix).await?;
        let mut w = self.world.lock();
        listing.common_prefixes.shuffle(&mut w.rng);
        listing.objects.shuffle(&mut w.rng);
        Ok(listing)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        if self.turn("copy", short(to), &[Fault::Fail]).await == Fault::Fail {
            return Err(simulated("copy failed"));
        }
        let existed = self.inner.head(to).await.is_ok();
        self.inner.copy_opts(from, to, options).await?;
        self.changed(to, existed, false);
        Ok(())
    }
}

/// Pending once, then ready: the scheduler's turn.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        Poll::Pending
    }
}
