//! TLS, both ways, with rustls and its `ring` provider: the client configuration every
//! outbound connection uses (exporters, Prometheus, slurmrestd, webhooks), the server
//! configuration for serving HTTPS, and TLS failures worded for the person reading them.
//!
//! Certificate verification is never off: there is no switch for it. A configured CA bundle
//! *replaces* the system's roots (as `curl --cacert` and Prometheus' `ca_file` do): a site
//! that names its own CA trusts that CA, not also every public one. Key material is never
//! printed: errors about a key file name the file and the problem, never its contents.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// Why a TLS configuration could not be built. Names the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{what} {path}: {message}")]
    Invalid {
        what: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("TLS setup: {0}")]
    Setup(String),
}

const CA_BUNDLE: &str = "CA bundle";
const CERT: &str = "certificate file";
const KEY: &str = "key file";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client configuration for outbound HTTPS: the CAs of `ca_bundle` (a PEM file) when
/// given, instead of the system's; else the system's roots (as OpenSSL finds them:
/// `SSL_CERT_FILE`, `/etc/ssl/certs`, ...). No ALPN is set (HTTP/1.1), and no client
/// certificate is sent.
///
/// A machine without system roots is not an error (Gantry may only speak `http://`): it is
/// logged once, and every `https://` peer then fails as an unknown certificate authority.
pub fn client_config(ca_bundle: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let roots = match ca_bundle {
        Some(path) => bundle_roots(path)?,
        None => system_roots(),
    };
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn bundle_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let certs = read_certs(CA_BUNDLE, path)?;
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if ignored > 0 {
        return Err(invalid(
            CA_BUNDLE,
            path,
            format!(
                "{ignored} of its {} certificates cannot be used as a CA (not valid X.509)",
                added + ignored
            ),
        ));
    }
    Ok(roots)
}

fn system_roots() -> RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "reading the system's CA certificates");
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        tracing::warn!(
            ignored,
            "system CA certificates that cannot be used were skipped"
        );
    }
    if added == 0 {
        tracing::warn!(
            "no system CA certificates found: https:// peers will fail unless tls.ca_bundle is set"
        );
    }
    roots
}

/// The HTTPS (and plain HTTP) connector every outbound client of Gantry's uses: `tls`
/// verifies `https://` peers, and a connection not made within `connect_timeout` fails.
pub fn https_connector(
    tls: &Arc<ClientConfig>,
    connect_timeout: std::time::Duration,
) -> hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector> {
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.set_connect_timeout(Some(connect_timeout));
    http.set_nodelay(true);
    // The HTTPS connector hands it `https://` URIs too, for the TCP part.
    http.enforce_http(false);
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((**tls).clone())
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}

/// The server configuration for serving HTTPS: `cert` is a PEM chain (the server's own
/// certificate first, then any intermediates), `key` its private key in PEM (PKCS#8
/// `PRIVATE KEY`, PKCS#1 `RSA PRIVATE KEY` or SEC1 `EC PRIVATE KEY`; not encrypted). ALPN
/// offers `http/1.1`. No client certificates are asked for.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = read_certs(CERT, cert)?;
    let key_der = read_key(key)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            // rustls' words name the problem (a key that is not the certificate's, an
            // unsupported key type), never the key itself.
            invalid(
                KEY,
                key,
                format!("cannot be used with {}: {}", cert.display(), e),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn invalid(what: &'static str, path: &Path, message: impl Into<String>) -> TlsError {
    TlsError::Invalid {
        what,
        path: path.into(),
        message: message.into(),
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.into(),
        source,
    })
}

/// Every `CERTIFICATE` section of a PEM file; at least one.
fn read_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(what, path, pem_problem(&e)))?;
    if certs.is_empty() {
        return Err(invalid(
            what,
            path,
            "no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text = read(KEY, path)?;
    match PrivateKeyDer::from_pem_slice(&text) {
        Ok(k) => Ok(k),
        Err(pem::Error::NoItemsFound) => {
            let encrypted = text
                .windows(b"ENCRYPTED PRIVATE KEY".len())
                .any(|w| w == b"ENCRYPTED PRIVATE KEY");
            Err(invalid(
                KEY,
                path,
                if encrypted {
                    "the key is encrypted: give it unencrypted (openssl pkey -in KEY -out KEY.plain)"
                } else {
                    "no private key in it (expected PEM: PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"
                },
            ))
        }
        Err(e) => Err(invalid(KEY, path, pem_problem(&e))),
    }
}

/// A PEM problem in words that quote nothing of the file (it may be a key).
fn pem_problem(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a PEM section has no END line".into(),
        pem::Error::IllegalSectionStart { .. } => "a malformed PEM BEGIN line".into(),
        pem::Error::Base64Decode(_) => "a PEM section is not valid base64".into(),
        pem::Error::Io(e) => e.to_string(),
        pem::Error::NoItemsFound => "nothing of the expected kind in it".into(),
        pem::Error::SectionTooLarge => "a PEM section is larger than 256 MB".into(),
        _ => "not readable as PEM".into(),
    }
}

/// The name a server's certificate must be valid for: a DNS name or an IP address
/// (`[::1]` as written in a URL). `None` if `host` is neither.
pub fn server_name(host: &str) -> Option<ServerName<'static>> {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(host.to_string()).ok()
}

/// TLS over `io` to `host` (the certificate must be valid for it; it is also the SNI).
pub async fn connect<IO>(
    config: &Arc<ClientConfig>,
    host: &str,
    io: IO,
) -> io::Result<tokio_rustls::client::TlsStream<IO>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let name = server_name(host).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{host:?} is not a DNS name or IP address a certificate can be valid for"),
        )
    })?;
    tokio_rustls::TlsConnector::from(Arc::clone(config))
        .connect(name, io)
        .await
}

/// The TLS failure somewhere in `e`'s chain, in words (without the "TLS: " the callers'
/// errors put before it); `None` when the failure was not TLS's.
pub fn failure(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(describe(t));
        }
        // rustls' errors come wrapped in an io::Error (by tokio-rustls, and again by
        // hyper-rustls), whose `source` skips what it wraps: look inside.
        if let Some(inner) = err.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            let inner: &(dyn std::error::Error + 'static) = inner;
            if let Some(m) = failure(inner) {
                return Some(m);
            }
        }
        cur = err.source();
    }
    None
}

/// rustls' error as the person fixing it needs it.
fn describe(e: &rustls::Error) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(C::UnknownIssuer) => {
            "unknown certificate authority: the server's certificate is not signed by a CA Gantry trusts (the system's, or tls.ca_bundle's)".into()
        }
        E::InvalidCertificate(C::NotValidForName) => "certificate not valid for the name connected to".into(),
        E::InvalidCertificate(c) => c.to_string(),
        E::InvalidMessage(_) => {
            "the server did not answer in TLS (is it plain http://?)".into()
        }
        E::AlertReceived(A::CertificateUnknown | A::UnknownCA | A::BadCertificate) => {
            "the server refused the handshake (it does not accept this client)".into()
        }
        E::AlertReceived(a) => format!("the server ended the handshake: {a:?}"),
        E::NoCertificatesPresented => "the server sent no certificate".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, IsCa, Issuer, KeyPair};

    struct Pki {
        dir: PathBuf,
    }

    impl Pki {
        /// A CA, and a server certificate for `localhost` it signed, in a fresh directory.
        fn new(tag: &str) -> Pki {
            let dir = std::env::temp_dir().join(format!("gantry-tls-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("dir");
            let ca_key = KeyPair::generate().expect("key");
            let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
            ca.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            ca.distinguished_name
                .push(rcgen::DnType::CommonName, "Gantry test CA");
            let ca_cert = ca.self_signed(&ca_key).expect("ca");
            let issuer = Issuer::new(ca, ca_key);
            let key = KeyPair::generate().expect("key");
            let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
            leaf.distinguished_name
                .push(rcgen::DnType::CommonName, "localhost");
            let cert = leaf.signed_by(&key, &issuer).expect("cert");
            std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("write");
            std::fs::write(dir.join("cert.pem"), cert.pem()).expect("write");
            std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("write");
            Pki { dir }
        }
        fn path(&self, name: &str) -> PathBuf {
            self.dir.join(name)
        }
    }

    impl Drop for Pki {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[tokio::test]
    async fn an_acceptor_from_server_config_shakes_hands_with_client_config() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let pki = Pki::new("handshake");
        let server =
            server_config(&pki.path("cert.pem"), &pki.path("key.pem")).expect("server config");
        assert_eq!(server.alpn_protocols, vec![b"http/1.1".to_vec()]);
        let client = client_config(Some(&pki.path("ca.pem"))).expect("client config");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let acceptor = tokio_rustls::TlsAcceptor::from(server);
        let served = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.expect("accept");
            let mut tls = acceptor.accept(tcp).await.expect("server handshake");
            let mut buf = [0u8; 4];
            tls.read_exact(&mut buf).await.expect("read");
            tls.write_all(&buf).await.expect("write");
            tls.shutdown().await.expect("shutdown");
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut tls = connect(&client, "localhost", tcp).await.expect("handshake");
        tls.write_all(b"ping").await.expect("write");
        let mut back = Vec::new();
        tls.read_to_end(&mut back).await.expect("read");
        assert_eq!(back, b"ping");
        served.await.expect("server");

        // The same server under another name, or to a client without its CA, is refused.
        let wrong = client_config(None).expect("system roots");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let acceptor = tokio_rustls::TlsAcceptor::from(
            server_config(&pki.path("cert.pem"), &pki.path("key.pem")).expect("server config"),
        );
        tokio::spawn(async move {
            for _ in 0..2 {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let _ = acceptor.accept(tcp).await;
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let e = connect(&wrong, "localhost", tcp)
            .await
            .expect_err("unknown CA");
        assert_eq!(
            failure(&e).map(|m| m.starts_with("unknown certificate authority")),
            Some(true),
            "{e}"
        );
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let e = connect(&client, "gantry.example", tcp)
            .await
            .expect_err("wrong name");
        let m = failure(&e).expect("a TLS failure");
        assert!(m.contains("not valid for name \"gantry.example\""), "{m}");
    }

    #[test]
    fn bad_files_are_named_and_keys_never_quoted() {
        let pki = Pki::new("files");
        let missing = pki.path("nope.pem");
        let e = client_config(Some(&missing)).expect_err("missing");
        assert!(e.to_string().starts_with("cannot read CA bundle "), "{e}");
        assert!(e.to_string().contains("nope.pem"), "{e}");

        // A key where the CA bundle belongs: no certificate in it, and nothing of it shown.
        let key_text = std::fs::read_to_string(pki.path("key.pem")).expect("key");
        let e = client_config(Some(&pki.path("key.pem"))).expect_err("not certs");
        assert!(e.to_string().contains("no certificate in it"), "{e}");
        let e = server_config(&pki.path("cert.pem"), &pki.path("cert.pem")).expect_err("no key");
        assert!(e.to_string().contains("no private key in it"), "{e}");

        // A damaged key: the file named, none of its lines printed.
        let broken = key_text.replace('A', "*");
        std::fs::write(pki.path("broken.pem"), &broken).expect("write");
        let e = server_config(&pki.path("cert.pem"), &pki.path("broken.pem")).expect_err("broken");
        let shown = format!("{e} {e:?}");
        assert!(shown.contains("broken.pem"), "{shown}");
        for line in broken.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!shown.contains(line), "key material in {shown}");
        }

        // Another key than the certificate's.
        std::fs::write(
            pki.path("other.pem"),
            KeyPair::generate().expect("key").serialize_pem(),
        )
        .expect("write");
        let e = server_config(&pki.path("cert.pem"), &pki.path("other.pem")).expect_err("mismatch");
        assert!(e.to_string().contains("other.pem"), "{e}");
        assert!(e.to_string().contains("cannot be used with"), "{e}");

        std::fs::write(
            pki.path("enc.pem"),
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .expect("write");
        let e = server_config(&pki.path("cert.pem"), &pki.path("enc.pem")).expect_err("enc");
        assert!(e.to_string().contains("encrypted"), "{e}");
    }

    #[test]
    fn server_names() {
        assert!(server_name("slurm.example").is_some());
        assert!(server_name("127.0.0.1").is_some());
        assert!(server_name("[::1]").is_some());
        assert!(server_name("bad name").is_none());
    }
}
