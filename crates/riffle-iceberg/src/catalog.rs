//! The catalog side of the sink: opening the catalog (SQL or REST), creating or loading the
//! table, recording the output's owner in the table's properties, and reading what the
//! table's snapshots already hold. All of it is async (the iceberg crate's API) and runs
//! on the connectors' I/O runtime.

use crate::ledger;
use crate::storage::WarehouseStorageFactory;
use iceberg::spec::{PartitionSpec, Schema as IcebergSchema, TableMetadata};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use iceberg_catalog_rest::{
    RestCatalogBuilder, REST_CATALOG_PROP_URI, REST_CATALOG_PROP_WAREHOUSE,
};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};
use riffle_core::{Error, OutputOwner, Result};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Table property holding the owner record (JSON) of the table's riffle output.
pub const OWNER_PROPERTY: &str = "riffle.owner";

/// Which protocol the catalog speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogKind {
    /// Iceberg's SQL catalog in a database (SQLite or PostgreSQL).
    Sql,
    /// A REST catalog server.
    Rest,
}

/// Where the catalog is and what it is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogConfig {
    /// SQL or REST.
    pub kind: CatalogKind,
    /// The catalog's name (readers open it under the same name: the SQL catalog keeps
    /// tables of several catalogs in one database).
    pub name: String,
    /// `sqlite:///path/catalog.db` or `postgresql://user@host/db` (SQL), or
    /// `http://host:port/prefix` (REST).
    pub uri: String,
    /// Where new tables go: `file:///path` or `s3://bucket/prefix`.
    pub warehouse: String,
    /// How a REST catalog is signed in to (none for SQL catalogs).
    pub auth: RestAuth,
}

impl CatalogConfig {
    /// Whether each catalog operation must open the catalog anew: a REST catalog signed
    /// in to with credentials gets tokens that expire, and the iceberg crate does not
    /// renew them yet; opening again fetches a fresh one.
    pub fn opens_per_operation(&self) -> bool {
        self.kind == CatalogKind::Rest && self.auth.fetches_tokens()
    }
}

/// Signing in to a REST catalog: a bearer token, or OAuth2 client credentials that the
/// catalog's token endpoint exchanges for one. The secrets never appear in `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RestAuth {
    /// `client_id:client_secret` (or a bare secret) for the client-credentials grant.
    pub credential: Option<String>,
    /// A bearer token used as it is.
    pub token: Option<String>,
    /// The token endpoint, when it is not the catalog's own `/v1/oauth/tokens`.
    pub oauth2_server_uri: Option<String>,
    /// The scope asked for (the crate's default: `catalog`).
    pub scope: Option<String>,
}

impl RestAuth {
    /// Whether a token is fetched with credentials (rather than given as it is).
    pub fn fetches_tokens(&self) -> bool {
        self.credential.is_some() && self.token.is_none()
    }

    /// The REST catalog properties (the iceberg crate's names) these settings make.
    fn properties(&self) -> impl Iterator<Item = (String, String)> + '_ {
        [
            ("credential", &self.credential),
            ("token", &self.token),
            ("oauth2-server-uri", &self.oauth2_server_uri),
            ("scope", &self.scope),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_string(), value.clone()?)))
    }
}

impl std::fmt::Debug for RestAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |s: &Option<String>| s.as_ref().map(|_| "<hidden>");
        f.debug_struct("RestAuth")
            .field("credential", &hidden(&self.credential))
            .field("token", &hidden(&self.token))
            .field("oauth2_server_uri", &self.oauth2_server_uri)
            .field("scope", &self.scope)
            .finish()
    }
}

/// Maps the iceberg crate's error to riffle's, naming what was being done.
pub fn iceberg_error(doing: &str, e: iceberg::Error) -> Error {
    Error::external("iceberg", format!("{doing}: {e}"))
}

/// Opens the catalog: the REST catalog at its URI, or the SQL catalog (creating its
/// tables, and a SQLite file, when missing).
///
/// # Errors
/// The catalog cannot be reached.
pub async fn open(config: &CatalogConfig) -> Result<Arc<dyn Catalog>> {
    let opening = |e| iceberg_error(&format!("opening the catalog at {}", config.uri), e);
    if config.kind == CatalogKind::Rest {
        let mut properties = HashMap::from([
            (REST_CATALOG_PROP_URI.to_string(), config.uri.clone()),
            (
                REST_CATALOG_PROP_WAREHOUSE.to_string(),
                config.warehouse.clone(),
            ),
        ]);
        properties.extend(config.auth.properties());
        let catalog = RestCatalogBuilder::default()
            .with_storage_factory(Arc::new(WarehouseStorageFactory))
            .load(config.name.clone(), properties)
            .await
            .map_err(opening)?;
        return Ok(Arc::new(catalog));
    }
    let sqlite = config.uri.starts_with("sqlite:");
    let mut uri = config.uri.clone();
    if sqlite && !uri.contains('?') {
        // Create the database file (and its directory) when it does not exist yet.
        uri.push_str("?mode=rwc");
        if let Some(dir) = sqlite_path(&config.uri).and_then(|p| p.parent().map(Path::to_path_buf))
        {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
    }
    let style = if sqlite {
        SqlBindStyle::QMark
    } else {
        SqlBindStyle::DollarNumeric
    };
    let catalog = SqlCatalogBuilder::default()
        .uri(uri)
        .warehouse_location(config.warehouse.clone())
        .sql_bind_style(style)
        .with_storage_factory(Arc::new(WarehouseStorageFactory))
        .load(config.name.clone(), HashMap::new())
        .await
        .map_err(opening)?;
    Ok(Arc::new(catalog))
}

/// The file of a `sqlite://` URI (`sqlite:///var/lib/c.db` → `/var/lib/c.db`).
fn sqlite_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("sqlite:")?;
    let path = rest.strip_prefix("//").unwrap_or(rest);
    let path = path.split('?').next()?;
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

/// The table, created with `creation`'s schema and partition spec when it is missing
/// (and `creation` is given).
///
/// # Errors
/// The table is missing (and not to be created); catalog failures.
pub async fn ensure_table(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    creation: Option<&(IcebergSchema, PartitionSpec)>,
) -> Result<Table> {
    if let Some(table) = load_if_exists(catalog, ident).await? {
        return Ok(table);
    }
    let Some((schema, spec)) = creation else {
        return Err(Error::config(
            "table",
            format!("Iceberg table {ident} does not exist; create it, or set 'create' = 'true' to create it from the declared columns"),
        ));
    };
    let namespace = ident.namespace();
    let has_namespace = catalog
        .namespace_exists(namespace)
        .await
        .map_err(|e| iceberg_error(&format!("looking up namespace {namespace:?}"), e))?;
    if !has_namespace {
        if let Err(e) = catalog.create_namespace(namespace, HashMap::new()).await {
            // Created by another subtask or process meanwhile (the SQL catalog reports a
            // lost race as a failed insert, not as "already exists")?
            if !catalog.namespace_exists(namespace).await.unwrap_or(false) {
                return Err(iceberg_error(
                    &format!("creating namespace {namespace:?}"),
                    e,
                ));
            }
        }
    }
    let creation = TableCreation::builder()
        .name(ident.name().to_string())
        .schema(schema.clone())
        .partition_spec(spec.clone().into_unbound())
        .build();
    match catalog.create_table(namespace, creation).await {
        Ok(table) => Ok(table),
        // Created by another subtask or process meanwhile?
        Err(e) => match catalog.table_exists(ident).await {
            Ok(true) => load(catalog, ident).await,
            _ => Err(iceberg_error(&format!("creating table {ident}"), e)),
        },
    }
}

/// The table's current metadata, if the table exists.
///
/// # Errors
/// Catalog failures.
pub async fn load_if_exists(catalog: &dyn Catalog, ident: &TableIdent) -> Result<Option<Table>> {
    let exists = catalog
        .table_exists(ident)
        .await
        .map_err(|e| iceberg_error(&format!("looking up table {ident}"), e))?;
    if exists {
        load(catalog, ident).await.map(Some)
    } else {
        Ok(None)
    }
}

/// Loads the table's current metadata.
///
/// # Errors
/// Catalog failures.
pub async fn load(catalog: &dyn Catalog, ident: &TableIdent) -> Result<Table> {
    catalog
        .load_table(ident)
        .await
        .map_err(|e| iceberg_error(&format!("loading table {ident}"), e))
}

/// The table identifier of `namespace.name` (the last dot separates the name).
///
/// # Errors
/// No namespace given.
pub fn table_ident(text: &str) -> Result<TableIdent> {
    let parts: Vec<String> = text.split('.').map(str::to_string).collect();
    if parts.len() < 2 || parts.iter().any(String::is_empty) {
        return Err(Error::config(
            "table",
            format!("'{text}': name the table with its namespace, e.g. 'nexmark.bids'"),
        ));
    }
    let (name, namespace) = parts.split_last().expect("two parts or more");
    let namespace = NamespaceIdent::from_vec(namespace.to_vec())
        .map_err(|e| iceberg_error("naming the namespace", e))?;
    Ok(TableIdent::new(namespace, name.clone()))
}

/// The summaries of the current snapshot and its ancestors, newest first.
pub fn ancestry(metadata: &TableMetadata) -> Vec<&HashMap<String, String>> {
    let mut summaries = Vec::new();
    let mut next = metadata.current_snapshot_id();
    // Bounded by the snapshot count, should the parents ever form a loop.
    while let Some(snapshot) = next.and_then(|id| metadata.snapshot_by_id(id)) {
        if summaries.len() > metadata.snapshots().len() {
            break;
        }
        summaries.push(&snapshot.summary().additional_properties);
        next = snapshot.parent_snapshot_id();
    }
    summaries
}

/// The epochs of `sink_id` the table's current snapshot holds.
pub fn committed_epochs(table: &Table, sink_id: &str) -> BTreeSet<u64> {
    ledger::committed_epochs(ancestry(table.metadata()), sink_id)
}

/// Every data file any snapshot of the table lists (so that files a time-travel read
/// still needs are never taken for leftovers).
///
/// # Errors
/// Manifests that cannot be read.
pub async fn referenced_files(table: &Table) -> Result<HashSet<String>> {
    let mut manifests = HashSet::new();
    let mut files = HashSet::new();
    for snapshot in table.metadata().snapshots() {
        let list = table
            .manifest_list_reader(snapshot)
            .load()
            .await
            .map_err(|e| iceberg_error("reading a manifest list", e))?;
        for manifest in list.entries() {
            if !manifests.insert(manifest.manifest_path.clone()) {
                continue;
            }
            let entries = manifest
                .load_manifest(table.file_io())
                .await
                .map_err(|e| iceberg_error("reading a manifest", e))?;
            for entry in entries.entries() {
                files.insert(entry.file_path().to_string());
            }
        }
    }
    Ok(files)
}

/// The owner recorded in the table's properties.
///
/// # Errors
/// A property that is not an owner record.
pub fn recorded_owner(table: &Table) -> Result<Option<OutputOwner>> {
    let Some(text) = table.metadata().properties().get(OWNER_PROPERTY) else {
        return Ok(None);
    };
    serde_json::from_str(text).map(Some).map_err(|e| {
        Error::config(
            OWNER_PROPERTY,
            format!("table property is not an owner record of riffle ({e}); remove it if nothing owns this table"),
        )
    })
}

/// Records `owner` unless another is recorded (or always, with `replace`); returns the
/// owner recorded afterwards. Two claims at once: the catalog's compare-and-swap on the
/// metadata location lets one commit first; the other's commit is retried on the new
/// metadata and overwrites it, and the first then reads back the second — so exactly
/// one of them finds itself recorded.
///
/// # Errors
/// Catalog failures.
pub async fn claim(
    catalog: &dyn Catalog,
    ident: &TableIdent,
    owner: &OutputOwner,
    replace: bool,
) -> Result<OutputOwner> {
    let table = load(catalog, ident).await?;
    if let Some(recorded) = recorded_owner(&table)? {
        if recorded.id == owner.id || !replace {
            return Ok(recorded);
        }
    }
    let json = serde_json::to_string(owner).map_err(|e| Error::external("owner record", e))?;
    let tx = Transaction::new(&table);
    let tx = tx
        .update_table_properties()
        .set(OWNER_PROPERTY.to_string(), json)
        .apply(tx)
        .map_err(|e| iceberg_error("recording the owner", e))?;
    tx.commit(catalog)
        .await
        .map_err(|e| iceberg_error(&format!("recording the owner of {ident}"), e))?;
    let table = load(catalog, ident).await?;
    recorded_owner(&table)?
        .ok_or_else(|| Error::external("iceberg", format!("the owner of {ident} vanished")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_credentials_become_the_crates_properties_and_stay_out_of_debug() {
        let auth = RestAuth {
            credential: Some("riffle:s3cret".into()),
            scope: Some("catalog".into()),
            ..RestAuth::default()
        };
        let properties: HashMap<String, String> = auth.properties().collect();
        assert_eq!(properties["credential"], "riffle:s3cret");
        assert_eq!(properties["scope"], "catalog");
        assert!(!properties.contains_key("token"));
        assert!(auth.fetches_tokens());
        assert!(!format!("{auth:?}").contains("s3cret"));
        let token = RestAuth {
            token: Some("t0ken".into()),
            ..auth
        };
        assert!(!token.fetches_tokens());
        assert!(!format!("{token:?}").contains("t0ken"));
    }

    #[test]
    fn a_table_is_named_with_its_namespace() {
        let ident = table_ident("lake.nexmark.bids").unwrap();
        assert_eq!(ident.name(), "bids");
        assert_eq!(
            ident.namespace().clone().inner(),
            vec!["lake".to_string(), "nexmark".to_string()]
        );
        assert!(table_ident("bids").is_err());
        assert!(table_ident("nexmark.").is_err());
    }

    #[test]
    fn a_sqlite_uri_names_its_file() {
        assert_eq!(
            sqlite_path("sqlite:///var/lib/c.db"),
            Some(PathBuf::from("/var/lib/c.db"))
        );
        assert_eq!(
            sqlite_path("sqlite:///var/lib/c.db?mode=rw"),
            Some(PathBuf::from("/var/lib/c.db"))
        );
        assert_eq!(sqlite_path("sqlite::memory:"), None);
        assert_eq!(sqlite_path("postgresql://h/db"), None);
    }
}
