//! `serve`'s HTTPS: the certificate and key it presents, and for mutual
//! TLS the CA its clients' certificates must chain to (rustls, ring).
//! Plain HTTP stays the default; a build without the `tls` feature says
//! so when asked for TLS.

use std::path::PathBuf;

/// The files `--tls-cert`, `--tls-key` and `--tls-client-ca` name.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// The files `--remote-ca`, `--remote-cert` and `--remote-key` name: the
/// CA the `--remote` hosts' certificates chain to, and this client's own
/// certificate for hosts that ask for one.
#[derive(Debug, Clone, Default)]
pub struct ClientFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

#[cfg(feature = "tls")]
pub use with_tls::{client_agent, server_config, Config};

#[cfg(not(feature = "tls"))]
pub use without_tls::{client_agent, server_config, Config};

#[cfg(feature = "tls")]
mod with_tls {
    use super::TlsFiles;
    use anyhow::{bail, Context};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use rustls::server::WebPkiClientVerifier;
    use rustls::{RootCertStore, ServerConfig};
    use std::path::Path;
    use std::sync::Arc;

    /// A PEM file larger than this is not a certificate chain or a key.
    pub(super) const PEM_LIMIT: u64 = 1 << 20;

    fn read_pem(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(PEM_LIMIT + 1).read_to_end(&mut bytes))
            .with_context(|| format!("{flag} {}", path.display()))?;
        if bytes.len() as u64 > PEM_LIMIT {
            bail!("{flag} {}: over {PEM_LIMIT} bytes, not a PEM file", path.display());
        }
        Ok(bytes)
    }

    pub type Config = Arc<ServerConfig>;

    fn certificates(flag: &str, files: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
        let pem = read_pem(flag, files)?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{flag} {}: not a PEM certificate", files.display()))?;
        if certs.is_empty() {
            bail!("{flag} {}: no CERTIFICATE block in it", files.display());
        }
        Ok(certs)
    }

    /// The server's TLS configuration, or what is wrong with the files.
    pub fn server_config(files: &TlsFiles) -> anyhow::Result<Config> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certificates("--tls-cert", &files.cert)?;
        let key_pem = read_pem("--tls-key", &files.key)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .with_context(|| format!("--tls-key {}: no PEM private key in it", files.key.display()))?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("TLS")?;
        let builder = match &files.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in certificates("--tls-client-ca", ca)? {
                    roots
                        .add(cert)
                        .with_context(|| format!("--tls-client-ca {}", ca.display()))?;
                }
                // Every client must present a certificate that chains to it.
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .with_context(|| format!("--tls-client-ca {}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .with_context(|| format!("--tls-key {} does not go with --tls-cert", files.key.display()))?;
        Ok(Arc::new(config))
    }

    /// The HTTP client of `--remote`: [`crate::models::probe::agent`]'s
    /// settings, trusting only `files.ca` for https:// hosts (no system
    /// roots are read), with the client certificate where given.
    pub fn client_agent(files: &super::ClientFiles, timeout: std::time::Duration) -> anyhow::Result<ureq::Agent> {
        use ureq::tls::{Certificate, ClientCert, PrivateKey, RootCerts, TlsConfig};
        if files.cert.is_some() != files.key.is_some() {
            bail!("--remote-cert and --remote-key go together: give both or neither");
        }
        let mut tls =
            TlsConfig::builder().unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
        // The same certificates, in ureq's own type.
        let ureq_certificates = |flag: &str, path: &Path| -> anyhow::Result<Vec<Certificate<'static>>> {
            Ok(certificates(flag, path)?
                .iter()
                .map(|c| Certificate::from_der(c.as_ref()).to_owned())
                .collect())
        };
        if let Some(ca) = &files.ca {
            tls = tls.root_certs(RootCerts::new_with_certs(&ureq_certificates("--remote-ca", ca)?));
        }
        if let (Some(cert), Some(key)) = (&files.cert, &files.key) {
            let chain = ureq_certificates("--remote-cert", cert)?;
            let key_pem = read_pem("--remote-key", key)?;
            let key = PrivateKey::from_pem(&key_pem)
                .map_err(|e| anyhow::anyhow!("--remote-key {}: no PEM private key in it ({e})", key.display()))?;
            tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        let config = crate::models::probe::agent_config(timeout)
            .tls_config(tls.build())
            .build();
        Ok(config.into())
    }
}

#[cfg(not(feature = "tls"))]
mod without_tls {
    use super::TlsFiles;

    /// Never made: this build has no TLS.
    pub enum Config {}

    pub fn server_config(_: &TlsFiles) -> anyhow::Result<Config> {
        anyhow::bail!("this gputaskman was built without the `tls` feature: --tls-cert cannot be served")
    }

    pub fn client_agent(files: &super::ClientFiles, timeout: std::time::Duration) -> anyhow::Result<ureq::Agent> {
        if files.ca.is_some() || files.cert.is_some() {
            anyhow::bail!(
                "this gputaskman was built without the `tls` feature: --remote-ca and --remote-cert cannot be used"
            );
        }
        Ok(crate::models::probe::agent(timeout))
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::with_tls::PEM_LIMIT;
    use super::*;
    use std::path::Path;

    fn files(dir: &Path, cert: &[u8], key: &[u8]) -> TlsFiles {
        std::fs::write(dir.join("cert.pem"), cert).unwrap();
        std::fs::write(dir.join("key.pem"), key).unwrap();
        TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            client_ca: None,
        }
    }

    #[test]
    fn files_that_are_not_a_certificate_and_key_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let e = server_config(&files(dir.path(), b"", b"")).unwrap_err();
        assert!(format!("{e:#}").contains("no CERTIFICATE block"), "{e:#}");
        let garbage = b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let e = server_config(&files(dir.path(), garbage, b"")).unwrap_err();
        assert!(format!("{e:#}").contains("--tls-cert"), "{e:#}");
        let mut missing = files(dir.path(), b"", b"");
        missing.cert = dir.path().join("absent.pem");
        let e = server_config(&missing).unwrap_err();
        assert!(format!("{e:#}").contains("absent.pem"), "{e:#}");
        let big = vec![b'A'; (PEM_LIMIT + 10) as usize];
        let e = server_config(&files(dir.path(), &big, b"")).unwrap_err();
        assert!(format!("{e:#}").contains("not a PEM file"), "{e:#}");
    }
}
