//! A client of the Confluent schema registry's REST API, the two calls Avro values need:
//! register a schema under a subject (`POST /subjects/{subject}/versions`, answered with
//! its id; the registry refuses a schema its compatibility rules forbid) and fetch a
//! schema by id (`GET /schemas/ids/{id}`). Requests run on the connectors' I/O runtime.

use crate::io_runtime::block_on;
use riffle_core::{Error, Result};

/// The media type the registry speaks.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// A schema registry at a base URL.
#[derive(Debug, Clone)]
pub(crate) struct SchemaRegistry {
    url: String,
    client: reqwest::Client,
}

impl SchemaRegistry {
    pub(crate) fn new(url: &str) -> Self {
        Self {
            url: url.trim_end_matches('/').to_string(),
            client: reqwest::Client::new(),
        }
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::external(format!("schema registry {}", self.url), message.into())
    }

    /// Registers `schema` (Avro JSON) under `subject`; the id the registry gives it (the
    /// same id again for a schema it holds already).
    ///
    /// # Errors
    /// The registry is unreachable, or refuses the schema (incompatible with the
    /// subject's earlier versions: its message says why).
    pub(crate) fn register(&self, subject: &str, schema: &str) -> Result<u32> {
        let url = format!("{}/subjects/{subject}/versions", self.url);
        let body = serde_json::json!({ "schema": schema }).to_string();
        let answer = self.send(self.client.post(url).body(body))?;
        answer["id"]
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| self.error(format!("registering under `{subject}`: no id in {answer}")))
    }

    /// The schema (Avro JSON) with id `id`.
    ///
    /// # Errors
    /// The registry is unreachable or has no such schema.
    pub(crate) fn schema(&self, id: u32) -> Result<String> {
        let url = format!("{}/schemas/ids/{id}", self.url);
        let answer = self.send(self.client.get(url))?;
        answer["schema"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.error(format!("schema {id}: no schema in {answer}")))
    }

    fn send(&self, request: reqwest::RequestBuilder) -> Result<serde_json::Value> {
        let request = request.header("Content-Type", CONTENT_TYPE);
        let (status, text) = block_on(async move {
            let response = request.send().await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.text().await?))
        })?
        .map_err(|e| self.error(e.to_string()))?;
        let answer: serde_json::Value = serde_json::from_str(&text)
            .map_err(|_| self.error(format!("answered {status} with `{text}`, not JSON")))?;
        if !status.is_success() {
            // Errors come as {"error_code": …, "message": …}.
            let message = answer["message"].as_str().unwrap_or(&text);
            return Err(self.error(format!("answered {status}: {message}")));
        }
        Ok(answer)
    }
}
