//! Kafka: a replayable source (partition offsets are operator state) and a sink with
//! a transactional producer (exactly-once) or plain delivery (at-least-once).
//!
//! The client is librdkafka (the `rdkafka` crate), driven through its blocking
//! producer and consumer from riffle's task threads.

pub(crate) mod avro;
mod debezium;
mod errors;
mod format;
mod ledger;
mod offsets;
mod producer;
mod published;
mod registry;
mod sink;
mod source;
mod transactions;
mod upsert;

pub use avro::AvroOptions;
pub use format::ValueFormat;
pub use sink::{KafkaDelivery, KafkaSinkConfig, KafkaSinkFactory};
pub use source::{KafkaSourceConfig, KafkaSourceFactory, KafkaStartup, KafkaTimestamp};

use rdkafka::config::ClientConfig;
use riffle_core::Error;
use std::time::Duration;

/// How long a metadata or offset request may take before it is an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `text` with every character Kafka names do not allow replaced by `_`.
fn kafka_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Where the brokers are and any further librdkafka properties.
#[derive(Debug, Clone)]
pub struct KafkaClient {
    /// `host:port[,host:port…]`.
    pub bootstrap_servers: String,
    /// Further librdkafka properties (`security.protocol`, …), passed as given.
    pub properties: Vec<(String, String)>,
}

impl KafkaClient {
    /// Brokers at `bootstrap_servers`.
    pub fn new(bootstrap_servers: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            properties: Vec::new(),
        }
    }

    /// A librdkafka configuration with the brokers and properties set.
    fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        // librdkafka logs every broker connection failure on its own; riffle reports them.
        config.set("log_level", "3");
        // The compiled-in OpenSSL looks for CA certificates under /usr/local/ssl, where
        // no distribution keeps them: find the system's (a property given overrides it).
        config.set("ssl.ca.location", "probe");
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        config
    }

    /// An error of these brokers.
    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::external(format!("Kafka at {}", self.bootstrap_servers), message)
    }
}

#[cfg(test)]
mod tests {
    use super::KafkaClient;

    #[test]
    fn tls_finds_the_system_ca_certificates_unless_told_otherwise() {
        let mut client = KafkaClient::new("127.0.0.1:1");
        assert_eq!(client.config().get("ssl.ca.location"), Some("probe"));
        client
            .properties
            .push(("ssl.ca.location".into(), "/etc/kafka/ca.pem".into()));
        assert_eq!(
            client.config().get("ssl.ca.location"),
            Some("/etc/kafka/ca.pem")
        );
    }
}
