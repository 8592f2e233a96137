//! `riffle certificates`: a certificate authority and a worker certificate for the
//! exchange's mutual TLS (docs/cluster.md, "Security"), for workers on other machines
//! (`riffle run --workers N` makes its own).

use anyhow::Result;
use riffle_cluster::tls::WorkerCertificates;
use std::path::PathBuf;

/// Arguments of `riffle certificates`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes ca.crt, worker.crt and worker.key (readable by you only). Every worker gets all three: --tls-ca ca.crt --tls-cert worker.crt --tls-key worker.key.\n\nExample (the Kubernetes StatefulSet of deploy/kubernetes):\n  riffle certificates --host riffle-0.riffle --host riffle-1.riffle --host riffle-2.riffle --out tls\n  kubectl create secret generic riffle-tls --from-file=tls.crt=tls/worker.crt \\\n      --from-file=tls.key=tls/worker.key --from-file=ca.crt=tls/ca.crt"
)]
pub struct CertificatesArgs {
    /// A host name or IP address of a worker, as it appears in --workers (repeat for
    /// each worker).
    #[arg(long = "host", required = true, value_name = "HOST")]
    pub hosts: Vec<String>,
    /// The directory to write into (created; existing files are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(args: CertificatesArgs) -> Result<()> {
    let made = WorkerCertificates::create(&args.out, &args.hosts)?;
    let files = made.files;
    eprintln!(
        "riffle: wrote {}, {} and {} for {}",
        files.ca.display(),
        files.cert.display(),
        files.key.display(),
        args.hosts.join(", ")
    );
    Ok(())
}
