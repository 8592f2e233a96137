//! Who a worker's exchange lets in, over real TLS on 127.0.0.1: only clients with a
//! certificate of the job's authority, and of those only calls and streams that carry
//! the job's secret (docs/cluster.md, "Security").

use crate::links;
use crate::protocol::{AttemptRequest, Decision, JobSecret, StreamKind};
use crate::server::Server;
use crate::service::WorkerService;
use crate::tls::{ExchangeTls, TlsFiles, WorkerCertificates};
use arrow_flight::{FlightData, FlightDescriptor};
use std::net::SocketAddr;
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(3);

fn certificates(dir: &std::path::Path) -> ExchangeTls {
    ExchangeTls::from_files(&WorkerCertificates::local(dir).unwrap().files).unwrap()
}

/// A worker's service on a free port, over TLS with `tls`, admitting `secret`, whose
/// worker 0 has decided that the job finished in generation 7.
async fn serving(tls: &ExchangeTls, secret: &str) -> (Server, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address: SocketAddr = listener.local_addr().unwrap();
    drop(listener);
    let service = WorkerService::new(JobSecret::new(secret), None);
    service.publish(Decision::Finished { generation: 7 });
    let server = Server::start(service, address, Some(tls)).await.unwrap();
    (server, address.to_string())
}

/// Whether a client with `tls` (plain text without) gets an answer from `address`.
async fn answered(address: &str, tls: Option<&ExchangeTls>) -> bool {
    match links::connect(address, tls, Duration::ZERO).await {
        Ok(mut peer) => links::fetch_decision(&mut peer, asking("job-secret"), Duration::ZERO)
            .await
            .is_ok(),
        Err(_) => false,
    }
}

/// How the worker ended a `do_put` of `stream`: its status, if it refused the stream
/// (at once or after taking it) within `seconds`.
async fn refusal(
    client: &mut arrow_flight::FlightClient,
    stream: impl futures::Stream<Item = arrow_flight::error::Result<FlightData>> + Send + 'static,
    seconds: u64,
) -> Option<tonic::Status> {
    use futures::StreamExt;
    let answer = tokio::time::timeout(Duration::from_secs(seconds), client.do_put(stream))
        .await
        .ok()?;
    let error = match answer {
        Ok(mut results) => results.next().await.and_then(Result::err),
        Err(e) => Some(e),
    };
    match error {
        Some(arrow_flight::error::FlightError::Tonic(status)) => Some(*status),
        _ => None,
    }
}

fn asking(secret: &str) -> AttemptRequest {
    AttemptRequest {
        secret: JobSecret::new(secret),
        worker: 1,
        incarnation: 1,
        at_least: 1,
    }
}

#[tokio::test]
async fn a_worker_of_the_job_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let (server, address) = serving(&tls, "job-secret").await;
    let mut peer = links::connect(&address, Some(&tls), PATIENCE)
        .await
        .unwrap();
    let decision = links::fetch_decision(&mut peer, asking("job-secret"), PATIENCE)
        .await
        .unwrap();
    assert_eq!(decision, Decision::Finished { generation: 7 });
    server.stop().await;
}

#[tokio::test]
async fn a_call_without_the_jobs_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let (server, address) = serving(&tls, "job-secret").await;
    let mut peer = links::connect(&address, Some(&tls), PATIENCE)
        .await
        .unwrap();
    let refused = links::fetch_decision(&mut peer, asking("a-guess"), Duration::ZERO).await;
    match refused {
        Err(crate::ClusterError::Status(status)) => {
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status}")
        }
        other => panic!("not refused: {other:?}"),
    }
    server.stop().await;
}

#[tokio::test]
async fn a_stream_without_the_jobs_secret_is_refused_before_it_reaches_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let (server, address) = serving(&tls, "job-secret").await;
    let peer = links::connect(&address, Some(&tls), PATIENCE)
        .await
        .unwrap();
    // A forged barrier stream of generation 1, as a stranger who read `_generations/`
    // would open it. No attempt runs here: had the secret been taken, the stream would
    // wait for one instead of being refused at once.
    let hello = links::hello(&JobSecret::new("a-guess"), 1, 0, StreamKind::Barriers);
    let opening = FlightData {
        flight_descriptor: Some(FlightDescriptor::new_cmd(
            serde_json::to_vec(&hello).unwrap(),
        )),
        ..FlightData::default()
    };
    let mut client = arrow_flight::FlightClient::new_from_inner(peer);
    let status = refusal(&mut client, futures::stream::iter([Ok(opening)]), 10)
        .await
        .expect("the stream was not refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status}");
    server.stop().await;
}

#[tokio::test]
async fn a_client_with_another_authoritys_certificate_is_turned_away() {
    let dir = tempfile::tempdir().unwrap();
    let job = WorkerCertificates::local(&dir.path().join("job"))
        .unwrap()
        .files;
    let other = WorkerCertificates::local(&dir.path().join("other"))
        .unwrap()
        .files;
    let tls = ExchangeTls::from_files(&job).unwrap();
    let (server, address) = serving(&tls, "job-secret").await;
    // It trusts the worker's authority, so only the worker's check of the client's
    // certificate can stop it.
    let stranger = ExchangeTls::from_files(&TlsFiles {
        ca: job.ca.clone(),
        ..other
    })
    .unwrap();
    let reached = answered(&address, Some(&stranger)).await;
    assert!(!reached, "a stranger's certificate was accepted");
    server.stop().await;
}

#[tokio::test]
async fn a_worker_whose_certificate_another_authority_signed_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let job = WorkerCertificates::local(&dir.path().join("job"))
        .unwrap()
        .files;
    let other = WorkerCertificates::local(&dir.path().join("other"))
        .unwrap()
        .files;
    // A server posing as a worker, with a certificate of another authority.
    let impostor = ExchangeTls::from_files(&TlsFiles {
        ca: job.ca.clone(),
        ..other
    })
    .unwrap();
    let (server, address) = serving(&impostor, "job-secret").await;
    let tls = ExchangeTls::from_files(&job).unwrap();
    let reached = answered(&address, Some(&tls)).await;
    assert!(!reached, "a worker trusted an impostor's certificate");
    server.stop().await;
}

#[tokio::test]
async fn a_client_without_tls_is_turned_away() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let (server, address) = serving(&tls, "job-secret").await;
    let reached = answered(&address, None).await;
    assert!(!reached, "a plain-text client was answered");
    server.stop().await;
}

#[tokio::test]
async fn a_stream_that_never_names_itself_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path());
    let (server, address) = serving(&tls, "job-secret").await;
    let peer = links::connect(&address, Some(&tls), PATIENCE)
        .await
        .unwrap();
    let mut client = arrow_flight::FlightClient::new_from_inner(peer);
    // The stream opens and sends nothing.
    let silent = futures::stream::pending::<arrow_flight::error::Result<FlightData>>();
    let status = refusal(&mut client, silent, 15)
        .await
        .expect("the silent stream was not dropped");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status}");
    server.stop().await;
}
