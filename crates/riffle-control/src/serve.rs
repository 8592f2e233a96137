//! Serving the control endpoint: HTTP/1.1 by hyper, one request per connection, within
//! limits that keep a flood of connections from hurting the job. Connections beyond
//! the limit wait in the kernel's backlog, holding no descriptor of the process, so
//! checkpoint I/O never runs out of descriptors because of the endpoint; a request head
//! that does not arrive in time closes its connection; and an accept that fails (the
//! process out of descriptors, say) is retried, never the end of serving — the control
//! file keeps advertising the port.

use super::access::{bearer, Access, Denied};
use super::live::LiveMetrics;
use super::page::{self, Asset};
use super::{api, exposition, scrape};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use riffle_runtime::savepoint::{request_savepoint, SavepointSender};
use riffle_state::CheckpointStore;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::timeout;

/// How much of the process the control endpoint may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once.
    pub connections: usize,
    /// A request's head must have arrived within this, or its connection is closed.
    pub head_timeout: Duration,
    /// After a failed accept, wait this long before the next.
    pub accept_backoff: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connections: 32,
            head_timeout: Duration::from_secs(5),
            accept_backoff: Duration::from_millis(100),
        }
    }
}

/// What requests are answered from.
pub(super) struct Served {
    pub savepoints: SavepointSender,
    pub health: String,
    pub live: Arc<LiveMetrics>,
    pub pipeline: String,
    pub store: CheckpointStore,
    pub access: Access,
    pub stored: api::StoredViews,
    /// Which worker of a job on several serves this endpoint.
    pub worker: Option<usize>,
}

/// Accepts and serves connections until the task is aborted; `open` counts those
/// being served.
pub(super) async fn accept_loop(
    listener: TcpListener,
    served: Arc<Served>,
    limits: Limits,
    tls: Option<tokio_rustls::TlsAcceptor>,
    open: Arc<AtomicUsize>,
) {
    let permits = Arc::new(Semaphore::new(limits.connections.max(1)));
    let mut failing = false;
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // The connection stays queued; it is accepted once descriptors are free.
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(
                        "control endpoint: cannot accept a connection ({e}); retrying every {:?}",
                        limits.accept_backoff
                    );
                }
                tokio::time::sleep(limits.accept_backoff).await;
                continue;
            }
        };
        failing = false;
        open.fetch_add(1, Ordering::Relaxed);
        let (served, open, tls) = (served.clone(), open.clone(), tls.clone());
        tokio::spawn(async move {
            let tls = match tls {
                Some(tls) if speaks_tls(&stream, peer, limits.head_timeout).await => Some(tls),
                _ => None,
            };
            match tls {
                None => serve_connection(stream, served, limits.head_timeout).await,
                // The handshake gets the time a request's head gets: a client that
                // opens connections and says nothing holds no permit for long.
                Some(tls) => match timeout(limits.head_timeout, tls.accept(stream)).await {
                    Ok(Ok(stream)) => serve_connection(stream, served, limits.head_timeout).await,
                    Ok(Err(e)) => tracing::debug!(%e, "control endpoint: TLS handshake failed"),
                    Err(_) => tracing::debug!("control endpoint: TLS handshake timed out"),
                },
            }
            open.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        });
    }
}

/// Whether a connection to an HTTPS endpoint is served TLS: always from another
/// machine; from this machine's loopback only when its first byte opens a TLS
/// handshake, so local tools (`riffle savepoint create`, the launcher) speak plain HTTP
/// over a path that never leaves the machine.
async fn speaks_tls(stream: &tokio::net::TcpStream, peer: SocketAddr, wait: Duration) -> bool {
    // An IPv4 client of a `[::]` socket arrives as ::ffff:127.0.0.1.
    if !peer.ip().to_canonical().is_loopback() {
        return true;
    }
    let mut first = [0u8; 1];
    match timeout(wait, stream.peek(&mut first)).await {
        Ok(Ok(1)) => is_tls_handshake(first[0]),
        _ => true,
    }
}

/// A TLS record of type handshake (22) opens every TLS connection; an HTTP request
/// opens with a method's letter.
fn is_tls_handshake(first: u8) -> bool {
    first == 22
}

async fn serve_connection<S>(stream: S, served: Arc<Served>, head_timeout: Duration)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request| {
        let served = served.clone();
        async move { Ok::<_, Infallible>(answer(&request, &served).await) }
    });
    // Errors are the client's (a closed connection, a bad or late head): nothing to do.
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// A file of the web page (`/`, `/app.js`, `/style.css`).
    Page(&'static Asset),
    /// `/livez`: the process serves; for probes, which carry no token. Says nothing else.
    Live,
    Health,
    Metrics,
    Job,
    Operator(String),
    Checkpoints,
    Savepoints,
    TakeSavepoint,
    /// A known path with another method: the one it takes.
    WrongMethod(&'static str),
    NotFound,
}

const ROUTES: &str = "GET / (the web page), GET /metrics (Prometheus), GET /api/job, GET /api/operators/{id}, GET /api/checkpoints, GET /api/savepoints, POST /api/savepoints?label=L&stop=true&drain=true, GET /health, GET /livez";

impl Route {
    fn of(method: &Method, path: &str) -> Self {
        let get = method == Method::GET || method == Method::HEAD;
        let read = |route: Route| {
            if get {
                route
            } else {
                Route::WrongMethod("GET")
            }
        };
        if let Some(asset) = page::asset(path) {
            return read(Route::Page(asset));
        }
        match path {
            "/livez" => read(Route::Live),
            "/health" => read(Route::Health),
            "/metrics" => read(Route::Metrics),
            "/api/job" => read(Route::Job),
            "/api/checkpoints" => read(Route::Checkpoints),
            "/api/savepoints" | "/savepoint" if method == Method::POST => Route::TakeSavepoint,
            "/api/savepoints" => read(Route::Savepoints),
            "/savepoint" => Route::WrongMethod("POST"),
            _ => match path.strip_prefix("/api/operators/") {
                Some(id) if !id.is_empty() && !id.contains('/') => {
                    read(Route::Operator(id.to_string()))
                }
                _ => Route::NotFound,
            },
        }
    }

    /// Whether the request changes the job (and so needs the token).
    fn changes_job(&self) -> bool {
        matches!(self, Route::TakeSavepoint)
    }

    /// Whether anyone who reaches the endpoint may have it: the page's files hold no
    /// data of the job (what they show, they fetch from the API with the token).
    /// Routes open without the token: the page's assets, and `/livez`, which a
    /// Kubernetes probe asks without one and which tells nothing about the job.
    fn is_public(&self) -> bool {
        matches!(self, Route::Page(_) | Route::Live)
    }
}

/// A response: status, content type and body.
type Answer = (StatusCode, &'static str, String);

const JSON: &str = "application/json";

fn json_answer(status: StatusCode, value: &serde_json::Value) -> Answer {
    (status, JSON, value.to_string())
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Answer {
    json_answer(status, &serde_json::json!({ "error": message.to_string() }))
}

async fn answer(request: &Request<Incoming>, served: &Served) -> Response<Full<Bytes>> {
    let route = Route::of(request.method(), request.uri().path());
    let authorization = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let host = request
        .headers()
        .get(hyper::header::HOST)
        .and_then(|v| v.to_str().ok());
    let allowed = if route.is_public() {
        Ok(())
    } else {
        served
            .access
            .check(route.changes_job(), bearer(authorization), host)
    };
    let (status, content_type, body) = match allowed {
        Ok(()) => respond(route, request.uri().query().unwrap_or(""), served).await,
        Err(denied @ Denied::ForeignHost) => error(StatusCode::FORBIDDEN, denied),
        Err(denied) => error(StatusCode::UNAUTHORIZED, denied),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    // The page runs only its own script and is never framed by another site.
    response.headers_mut().insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(
            "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    response.headers_mut().insert(
        hyper::header::X_CONTENT_TYPE_OPTIONS,
        hyper::header::HeaderValue::from_static("nosniff"),
    );
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

async fn respond(route: Route, query: &str, served: &Served) -> Answer {
    match route {
        Route::Page(asset) => (StatusCode::OK, asset.content_type, asset.body.to_string()),
        Route::Live => (StatusCode::OK, "text/plain", "ok".to_string()),
        Route::Health => (StatusCode::OK, JSON, served.health.clone()),
        Route::Metrics => {
            match scrape::families(&served.live, &served.pipeline, served.worker).encode() {
                Ok(text) => (StatusCode::OK, exposition::CONTENT_TYPE, text),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
            }
        }
        Route::Job => json_answer(StatusCode::OK, &api::job(&served.live, &served.pipeline)),
        Route::Operator(id) => match api::operator(&served.live, &id) {
            Some(op) => json_answer(StatusCode::OK, &op),
            None => error(
                StatusCode::NOT_FOUND,
                format!("no operator `{id}` in this job"),
            ),
        },
        Route::Checkpoints => match served.stored.checkpoints(&served.live, &served.store).await {
            Ok(stored) => json_answer(StatusCode::OK, &api::checkpoints(&served.live, &stored)),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
        },
        Route::Savepoints => match served.stored.savepoints(&served.live, &served.store).await {
            Ok(value) => json_answer(StatusCode::OK, &value),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
        },
        Route::TakeSavepoint => {
            let flag = |name: &str| param(query, name).is_some_and(|v| v == "true" || v == "1");
            let label = param(query, "label").filter(|l| !l.is_empty());
            match request_savepoint(&served.savepoints, label, flag("stop"), flag("drain")).await {
                Ok(done) => (
                    StatusCode::OK,
                    JSON,
                    serde_json::to_string(&done).unwrap_or_default(),
                ),
                Err(e) => error(StatusCode::CONFLICT, e),
            }
        }
        Route::WrongMethod(allowed) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("this path takes {allowed}; use {ROUTES}"),
        ),
        Route::NotFound => error(StatusCode::NOT_FOUND, format!("use {ROUTES}")),
    }
}

/// The value of `name` in a query string (`a=1&b=2`), as written.
fn param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Instant;

    /// Serves on a free loopback port with `limits`; returns the address and the count
    /// of open connections.
    async fn serving(limits: Limits) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (savepoints, _requests) = riffle_runtime::savepoint::savepoint_channel();
        let root = riffle_state::StateRoot::parse("memory://").unwrap();
        let served = Arc::new(Served {
            savepoints,
            health: "{\"ok\":true}".into(),
            live: Arc::new(LiveMetrics::default()),
            pipeline: "p".into(),
            store: CheckpointStore::new(root, "p"),
            access: Access::new("t0ken".into(), address.parse().unwrap()),
            stored: api::StoredViews::default(),
            worker: None,
        });
        let open = Arc::new(AtomicUsize::new(0));
        tokio::spawn(accept_loop(listener, served, limits, None, open.clone()));
        (address, open)
    }

    /// `GET path` over a fresh connection: the whole answer.
    fn get(address: &str, path: &str) -> String {
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn routes_are_told_by_method_and_path() {
        assert_eq!(Route::of(&Method::GET, "/metrics"), Route::Metrics);
        assert_eq!(Route::of(&Method::GET, "/api/job"), Route::Job);
        assert_eq!(
            Route::of(&Method::GET, "/api/operators/q5_counts"),
            Route::Operator("q5_counts".into())
        );
        assert_eq!(Route::of(&Method::GET, "/api/operators/"), Route::NotFound);
        assert_eq!(
            Route::of(&Method::GET, "/api/operators/a/b"),
            Route::NotFound
        );
        assert_eq!(
            Route::of(&Method::GET, "/api/savepoints"),
            Route::Savepoints
        );
        assert_eq!(
            Route::of(&Method::POST, "/api/savepoints"),
            Route::TakeSavepoint
        );
        assert_eq!(Route::of(&Method::POST, "/savepoint"), Route::TakeSavepoint);
        assert_eq!(
            Route::of(&Method::GET, "/savepoint"),
            Route::WrongMethod("POST")
        );
        assert_eq!(
            Route::of(&Method::POST, "/metrics"),
            Route::WrongMethod("GET")
        );
        assert_eq!(
            Route::of(&Method::DELETE, "/api/job"),
            Route::WrongMethod("GET")
        );
        assert_eq!(Route::of(&Method::GET, "/nothing"), Route::NotFound);
        assert!(matches!(Route::of(&Method::GET, "/"), Route::Page(_)));
        assert!(matches!(Route::of(&Method::GET, "/app.js"), Route::Page(_)));
        assert_eq!(Route::of(&Method::POST, "/"), Route::WrongMethod("GET"));
    }

    #[test]
    fn only_taking_a_savepoint_changes_the_job() {
        assert!(Route::TakeSavepoint.changes_job());
        assert!(!Route::TakeSavepoint.is_public() && !Route::Metrics.is_public());
        for read in [
            Route::Health,
            Route::Metrics,
            Route::Job,
            Route::Checkpoints,
            Route::Savepoints,
        ] {
            assert!(!read.changes_job(), "{read:?}");
        }
    }

    #[test]
    fn query_parameters_are_found_by_name() {
        assert_eq!(param("label=a&stop=true", "stop").as_deref(), Some("true"));
        assert_eq!(param("label=a", "drain"), None);
        assert_eq!(param("", "label"), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn routes_answer_and_unknown_paths_are_named() {
        let (address, _) = serving(Limits::default()).await;
        let (health, missing) = tokio::task::spawn_blocking(move || {
            (get(&address, "/health"), get(&address, "/nothing"))
        })
        .await
        .unwrap();
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        assert!(health.ends_with("{\"ok\":true}"), "{health}");
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        assert!(missing.contains("GET /health"), "{missing}");
    }

    /// When the process runs out of descriptors, a connection cannot be accepted; the
    /// endpoint keeps trying and serves it once descriptors are free. (Serving once
    /// ended at the first failed accept, and the advertised port went unanswered.) Run
    /// in a process of its own, as it lowers the process's descriptor limit.
    #[test]
    fn the_endpoint_serves_again_after_the_process_ran_out_of_descriptors() {
        let test = "serve::tests::out_of_descriptors";
        let run = std::process::Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--ignored", "--test-threads=1"])
            .env("RIFFLE_OUT_OF_DESCRIPTORS_TEST", "1")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(out.contains("1 passed"), "{out}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "run by the_endpoint_serves_again_after_the_process_ran_out_of_descriptors"]
    async fn out_of_descriptors() {
        assert!(std::env::var_os("RIFFLE_OUT_OF_DESCRIPTORS_TEST").is_some());
        let limit = libc::rlimit {
            rlim_cur: 256,
            rlim_max: 256,
        };
        // SAFETY: setrlimit reads the struct it is given; this process runs only this test.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
        let limits = Limits {
            accept_backoff: Duration::from_millis(10),
            ..Limits::default()
        };
        let (address, _) = serving(limits).await;
        // Take every free descriptor, then give one back for the client's socket.
        let mut hog = Vec::new();
        while let Ok(file) = std::fs::File::open("/dev/null") {
            hog.push(file);
        }
        drop(hog.pop());
        let client = tokio::task::spawn_blocking(move || get(&address, "/health"));
        // The server fails to accept for a while…
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!client.is_finished());
        // …and serves the waiting connection once descriptors are free.
        drop(hog);
        let health = client.await.unwrap();
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    }

    /// Idle connections that never send a request hold at most the limit of
    /// connections, are closed after the head timeout, and a request behind them is
    /// still answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_idle_connections_is_bounded_and_timed_out() {
        let limits = Limits {
            connections: 4,
            head_timeout: Duration::from_millis(300),
            accept_backoff: Duration::from_millis(10),
        };
        let (address, open) = serving(limits).await;
        let flood: Vec<std::net::TcpStream> = (0..20)
            .map(|_| std::net::TcpStream::connect(&address).unwrap())
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(open.load(Ordering::Relaxed), 4);
        let started = Instant::now();
        let health = tokio::task::spawn_blocking(move || get(&address, "/health"))
            .await
            .unwrap();
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        // Five rounds of four idle connections, each closed after 300 ms.
        assert!(started.elapsed() < Duration::from_secs(20));
        for mut idle in flood {
            idle.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut rest = Vec::new();
            // Closed by the server: the end of the stream (or a reset), not a timeout.
            if let Err(e) = idle.read_to_end(&mut rest) {
                assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
            }
        }
    }
}
