//! The Flight server every worker runs for the others' streams and questions
//! ([`WorkerService`]), with the same HTTP/2 settings as the client side
//! ([`crate::links`]).

use crate::error::{ClusterError, ClusterResult};
use crate::links;
use crate::service::WorkerService;
use crate::tls::ExchangeTls;
use arrow_flight::flight_service_server::FlightServiceServer;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The Flight server of this worker.
pub(crate) struct Server {
    task: JoinHandle<()>,
    shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    /// Listens on `listen` and serves `service` until stopped; over mutual TLS when
    /// `tls` is given (a client without a certificate of the job's authority is turned
    /// away in the handshake).
    ///
    /// # Errors
    /// The address cannot be bound, or the TLS identity is unusable.
    pub(crate) async fn start(
        service: WorkerService,
        listen: SocketAddr,
        tls: Option<&ExchangeTls>,
    ) -> ClusterResult<Self> {
        let listener =
            tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| ClusterError::Connect {
                    address: listen.to_string(),
                    message: format!("cannot listen: {e}"),
                })?;
        let incoming =
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
        let flight = FlightServiceServer::new(service)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            builder = builder
                .tls_config(tls.server())
                .map_err(|e| ClusterError::Connect {
                    address: listen.to_string(),
                    message: format!("TLS: {e}"),
                })?;
        }
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            if let Err(e) = builder
                .http2_keepalive_interval(Some(links::KEEP_ALIVE))
                .http2_keepalive_timeout(Some(links::KEEP_ALIVE_TIMEOUT))
                .initial_stream_window_size(links::STREAM_WINDOW)
                .initial_connection_window_size(links::CONNECTION_WINDOW)
                .max_frame_size(links::FRAME_SIZE)
                .add_service(flight)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await
            {
                tracing::error!(%e, "worker service stopped");
            }
        });
        Ok(Self { task, shutdown })
    }

    /// Stops taking calls and lets those under way finish (for up to a second): the
    /// answer that tells another worker the job finished must reach it.
    pub(crate) async fn stop(self) {
        let _ = self.shutdown.send(());
        let abort = self.task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(1), self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}
