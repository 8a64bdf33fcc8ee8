//! The lab's TLS: a small PKI for tests and benchmarks, and rustls configurations for the
//! traffic generator ([`crate::traffic::TlsSettings`]) and for checks of a TLS server.
//!
//! - [`Pki`]: a CA (ECDSA P-256, made with rcgen) in a directory, and leaf certificates it
//!   signs, each usable as a TLS server and client certificate (both EKUs) with the SANs
//!   given. `sbc-lab tls-certs --out DIR` writes the standard lab set ([`write_lab_set`]).
//! - [`client_config`], [`server_config`]: rustls configurations from PEM files, with the
//!   `ring` provider (never aws-lc-rs), TLS 1.2 and 1.3.
//! - [`peer_certificate`], [`handshake`]: one handshake with a server, to see which
//!   certificate it presents (a rotation) or whether it refuses us (mutual TLS).
//!
//! Private keys are written 0600. Nothing here is for production: the CA key sits next to
//! its certificate.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How long a CA made by [`Pki::create`] is valid.
const CA_DAYS: u32 = 3650;
/// How long a leaf made by [`Pki::issue`] is valid.
const LEAF_DAYS: u32 = 825;
/// How long [`peer_certificate`] and [`handshake`] wait for the TCP connection and for the
/// handshake, each.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`handshake`] waits, after its handshake, for the server's keep-alive answer or
/// its refusal (a TLS 1.3 server refuses a client certificate after the client's handshake
/// has completed).
const VERDICT_WAIT: Duration = Duration::from_secs(2);

/// A lab certificate authority in a directory: `STEM.pem` (its certificate) and
/// `STEM-key.pem` (its key, 0600); the leaves it issues are written next to them.
#[derive(Debug)]
pub struct Pki {
    dir: PathBuf,
    cert: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate issued by a [`Pki`]: its PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The certificate (PEM, the leaf alone: the CA is the trust anchor).
    pub cert: PathBuf,
    /// Its private key (PEM, PKCS#8, 0600).
    pub key: PathBuf,
}

/// Sets `params` valid from an hour ago (clocks differ a little) for `days`. rcgen's dates
/// are the `time` crate's, reached through `date_time_ymd` so that `time` need not be a
/// dependency of ours.
fn set_validity(params: &mut CertificateParams, days: u32) -> anyhow::Result<()> {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("the clock is before 1970")?;
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + since.saturating_sub(Duration::from_secs(3600));
    params.not_after = epoch + since + Duration::from_secs(u64::from(days) * 86_400);
    Ok(())
}

/// The subject of the CA named `stem`: the same every time, so that [`Pki::open`] rebuilds
/// the issuer name its leaves must carry without parsing the certificate.
fn ca_params(stem: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "sbc-lab");
    dn.push(DnType::CommonName, format!("sbc-lab {stem}"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Writes `data` to `path`, with mode 0600 when `secret`.
fn write_file(path: &Path, data: &str, secret: bool) -> anyhow::Result<()> {
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    if secret {
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    if secret {
        // An existing file keeps its mode through `truncate`.
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(data.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

fn read_text(path: &Path) -> anyhow::Result<String> {
    fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

impl Pki {
    /// A new CA in `dir` (created if absent): `ca.pem` and `ca-key.pem`.
    ///
    /// # Errors
    /// If the directory or the files cannot be written.
    pub fn create(dir: &Path) -> anyhow::Result<Self> {
        Self::create_named(dir, "ca")
    }

    /// A new CA in `dir` written as `STEM.pem` and `STEM-key.pem`, its subject
    /// `CN=sbc-lab STEM, O=sbc-lab` (two CAs of different stems are unrelated).
    ///
    /// # Errors
    /// If the directory or the files cannot be written.
    pub fn create_named(dir: &Path, stem: &str) -> anyhow::Result<Self> {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let key = KeyPair::generate().context("cannot generate the CA key")?;
        let mut params = ca_params(stem);
        set_validity(&mut params, CA_DAYS)?;
        let cert = params
            .self_signed(&key)
            .context("cannot sign the CA certificate")?;
        let cert_path = dir.join(format!("{stem}.pem"));
        write_file(
            &dir.join(format!("{stem}-key.pem")),
            &key.serialize_pem(),
            true,
        )?;
        write_file(&cert_path, &cert.pem(), false)?;
        Ok(Self {
            dir: dir.to_owned(),
            cert: cert_path,
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA that [`Pki::create`] wrote in `dir` (to issue more leaves from it later, e.g.
    /// a rotated certificate).
    ///
    /// # Errors
    /// If `ca.pem` or `ca-key.pem` is missing, unreadable, or they do not belong together.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        Self::open_named(dir, "ca")
    }

    /// The CA that [`Pki::create_named`] wrote in `dir` as `STEM.pem` and `STEM-key.pem`.
    ///
    /// # Errors
    /// As [`Pki::open`].
    pub fn open_named(dir: &Path, stem: &str) -> anyhow::Result<Self> {
        let cert_path = dir.join(format!("{stem}.pem"));
        let key_path = dir.join(format!("{stem}-key.pem"));
        let key = KeyPair::from_pem(&read_text(&key_path)?)
            .with_context(|| format!("{}: not a private key", key_path.display()))?;
        let der = cert_der(&cert_path)?;
        // The certificate must carry this key and the subject `ca_params` gives.
        let holds = |needle: &[u8]| der.windows(needle.len()).any(|w| w == needle);
        let cn = format!("sbc-lab {stem}");
        if !holds(key.public_key_raw()) || !holds(cn.as_bytes()) {
            bail!(
                "{} and {} are not a CA made by sbc-lab (Pki::create_named({stem:?}))",
                cert_path.display(),
                key_path.display()
            );
        }
        Ok(Self {
            dir: dir.to_owned(),
            cert: cert_path,
            issuer: Issuer::new(ca_params(stem), key),
        })
    }

    /// The CA certificate's file (the trust anchor to give peers).
    #[must_use]
    pub fn ca_cert(&self) -> &Path {
        &self.cert
    }

    /// The directory of the CA and its leaves.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A leaf valid for 825 days: `STEM.pem` and `STEM-key.pem` in the CA's directory, with
    /// the DNS names and IP addresses given as SANs (its CN: the first DNS name, else STEM),
    /// usable as a TLS server and client certificate.
    ///
    /// # Errors
    /// If a DNS name is not valid in a certificate, or a file cannot be written.
    pub fn issue(&self, stem: &str, dns: &[&str], ips: &[IpAddr]) -> anyhow::Result<Issued> {
        self.issue_with_validity(stem, dns, ips, LEAF_DAYS)
    }

    /// As [`Pki::issue`], valid for `days` from now (e.g. 5 days: a certificate an expiry
    /// alarm must report).
    ///
    /// # Errors
    /// As [`Pki::issue`].
    pub fn issue_with_validity(
        &self,
        stem: &str,
        dns: &[&str],
        ips: &[IpAddr],
        days: u32,
    ) -> anyhow::Result<Issued> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "sbc-lab");
        dn.push(DnType::CommonName, dns.first().copied().unwrap_or(stem));
        params.distinguished_name = dn;
        for name in dns {
            let ia5 = (*name)
                .try_into()
                .with_context(|| format!("{name:?} is not a DNS name for a certificate"))?;
            params.subject_alt_names.push(SanType::DnsName(ia5));
        }
        params
            .subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, days)?;
        let key = KeyPair::generate().context("cannot generate a key")?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .with_context(|| format!("cannot sign {stem}"))?;
        let issued = Issued {
            cert: self.dir.join(format!("{stem}.pem")),
            key: self.dir.join(format!("{stem}-key.pem")),
        };
        write_file(&issued.key, &key.serialize_pem(), true)?;
        write_file(&issued.cert, &cert.pem(), false)?;
        Ok(issued)
    }
}

/// The lab's standard set of certificates (see [`write_lab_set`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabSet {
    /// The lab CA's certificate, `ca.pem` (its key `ca-key.pem`: [`Pki::open`] it).
    pub ca: PathBuf,
    /// `sbc`: DNS sbc.lab, IP 127.0.0.1.
    pub sbc: Issued,
    /// `uas`: DNS uas.lab, IP 127.0.0.1.
    pub uas: Issued,
    /// `uac`: DNS uac.lab, IP 127.0.0.1.
    pub uac: Issued,
    /// `other`: DNS other.lab only, no IP (a certificate for another host).
    pub other: Issued,
    /// An unrelated CA's certificate, `rogue-ca.pem`.
    pub rogue_ca: PathBuf,
    /// `rogue`: DNS uac.lab, IP 127.0.0.1, signed by the rogue CA (a client certificate the
    /// lab CA's trusters refuse).
    pub rogue: Issued,
}

impl LabSet {
    /// Every file of the set, keys included (14).
    #[must_use]
    pub fn files(&self) -> Vec<PathBuf> {
        let key_of = |ca: &Path| {
            ca.with_file_name(format!(
                "{}-key.pem",
                ca.file_stem()
                    .map(|s| s.to_string_lossy())
                    .unwrap_or_default()
            ))
        };
        let mut files = vec![self.ca.clone(), key_of(&self.ca)];
        for i in [&self.sbc, &self.uas, &self.uac, &self.other] {
            files.extend([i.cert.clone(), i.key.clone()]);
        }
        files.extend([self.rogue_ca.clone(), key_of(&self.rogue_ca)]);
        files.extend([self.rogue.cert.clone(), self.rogue.key.clone()]);
        files
    }
}

/// Writes the lab's standard set into `dir` (`sbc-lab tls-certs`): the CA `ca`; `sbc`
/// (DNS sbc.lab, IP 127.0.0.1), `uas` (uas.lab, 127.0.0.1), `uac` (uac.lab, 127.0.0.1) and
/// `other` (other.lab only, no IP) signed by it; and an unrelated CA `rogue-ca` with
/// `rogue` (uac.lab, 127.0.0.1) signed by it.
///
/// # Errors
/// If a file cannot be written.
pub fn write_lab_set(dir: &Path) -> anyhow::Result<LabSet> {
    let lo = [IpAddr::from([127, 0, 0, 1])];
    let ca = Pki::create(dir)?;
    let rogue_ca = Pki::create_named(dir, "rogue-ca")?;
    Ok(LabSet {
        ca: ca.ca_cert().to_owned(),
        sbc: ca.issue("sbc", &["sbc.lab"], &lo)?,
        uas: ca.issue("uas", &["uas.lab"], &lo)?,
        uac: ca.issue("uac", &["uac.lab"], &lo)?,
        other: ca.issue("other", &["other.lab"], &[])?,
        rogue_ca: rogue_ca.ca_cert().to_owned(),
        rogue: rogue_ca.issue("rogue", &["uac.lab"], &lo)?,
    })
}

/// The certificates of a PEM file (in order: leaf first in a chain).
///
/// # Errors
/// If the file cannot be read or holds no certificate.
pub fn read_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: bad PEM", path.display()))?;
    if certs.is_empty() {
        bail!("{}: no certificate in it", path.display());
    }
    Ok(certs)
}

/// The DER of the first certificate of a PEM file (compare it with [`peer_certificate`]).
///
/// # Errors
/// As [`read_certs`].
pub fn cert_der(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut certs = read_certs(path)?;
    Ok(certs.swap_remove(0).as_ref().to_vec())
}

fn read_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .with_context(|| format!("{}: no private key read from it", path.display()))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(ca_files: &[&Path]) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for f in ca_files {
        for c in read_certs(f)? {
            roots
                .add(c)
                .with_context(|| format!("{}: not a usable CA certificate", f.display()))?;
        }
    }
    Ok(roots)
}

/// A client configuration trusting the CA certificates of `ca_files` (TLS 1.2 and 1.3,
/// server names verified), presenting `client_cert` (certificate chain file, key file) when
/// given.
///
/// # Errors
/// If a file cannot be read, holds no certificate or key, or the key does not fit.
pub fn client_config(
    ca_files: &[&Path],
    client_cert: Option<(&Path, &Path)>,
) -> anyhow::Result<Arc<ClientConfig>> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca_files)?);
    let cfg = match client_cert {
        Some((cert, key)) => builder
            .with_client_auth_cert(read_certs(cert)?, read_key(key)?)
            .with_context(|| format!("{} and {}", cert.display(), key.display()))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(cfg))
}

/// A server configuration presenting `cert` (chain file, leaf first) with `key`; with
/// `client_ca`, clients must present a certificate from that CA (mutual TLS).
///
/// # Errors
/// If a file cannot be read, holds no certificate or key, or the key does not fit.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> anyhow::Result<Arc<ServerConfig>> {
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(&[ca])?), provider())
                    .build()
                    .context("client certificate verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let cfg = builder
        .with_single_cert(read_certs(cert)?, read_key(key)?)
        .with_context(|| format!("{} and {}", cert.display(), key.display()))?;
    Ok(Arc::new(cfg))
}

/// A server name (SNI, and the name the server's certificate must carry): a DNS name or an
/// IP literal.
///
/// # Errors
/// If `name` is neither.
pub fn server_name(name: &str) -> anyhow::Result<ServerName<'static>> {
    ServerName::try_from(name.to_owned()).map_err(|e| anyhow!("bad TLS server name {name:?}: {e}"))
}

async fn connect(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
    name: &str,
) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let name = server_name(name)?;
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow!("TCP connect to {addr} timed out"))?
        .with_context(|| format!("TCP connect to {addr}"))?;
    let tls = tokio::time::timeout(CONNECT_TIMEOUT, TlsConnector::from(cfg).connect(name, tcp))
        .await
        .map_err(|_| anyhow!("TLS handshake with {addr} timed out"))??;
    Ok(tls)
}

/// Connects to `addr` with `cfg` (SNI and verified name `server_name`), completes one
/// handshake and returns the DER of the certificate the server presented (its leaf).
///
/// # Errors
/// If the connection or the handshake fails (the error's text says why).
pub async fn peer_certificate(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
    server_name: &str,
) -> anyhow::Result<Vec<u8>> {
    let tls = connect(addr, cfg, server_name).await?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or_else(|| anyhow!("{addr} presented no certificate"))?;
    Ok(leaf.as_ref().to_vec())
}

/// Whether the server at `addr` accepts a TLS connection from us (`cfg`, name
/// `server_name`): `Err` with the reason (the TLS error's text, e.g. `invalid peer
/// certificate: UnknownIssuer` or `received fatal alert: CertificateRequired`) when it does
/// not.
///
/// After the handshake it sends a CRLFCRLF keep-alive (RFC 5626) and waits up to 2 s: a TLS
/// 1.3 server refuses a client certificate only after the client's side of the handshake
/// has completed, with an alert. An answer, or silence, is acceptance; the alert, or the
/// connection closed, is refusal.
///
/// # Errors
/// The reason of the refusal.
pub async fn handshake(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
    server_name: &str,
) -> Result<(), String> {
    let mut tls = connect(addr, cfg, server_name)
        .await
        .map_err(|e| format!("{e:#}"))?;
    let ping = async {
        tls.write_all(b"\r\n\r\n").await?;
        tls.flush().await?;
        let mut buf = [0u8; 64];
        tls.read(&mut buf).await
    };
    match tokio::time::timeout(VERDICT_WAIT, ping).await {
        Err(_) | Ok(Ok(1..)) => Ok(()),
        Ok(Ok(0)) => Err("the server closed the connection after the handshake".into()),
        Ok(Err(e)) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use sbc_e2e::dir::TestDir;

    #[test]
    fn lab_set_files_and_modes() {
        let tmp = TestDir::for_current_test();
        let dir = tmp.path();
        let set = write_lab_set(dir).expect("lab set");
        let files = set.files();
        assert_eq!(files.len(), 14, "{files:?}");
        for f in &files {
            let mode = fs::metadata(f)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
                .permissions()
                .mode()
                & 0o777;
            let key = f.to_string_lossy().ends_with("-key.pem");
            assert!(!key || mode == 0o600, "{} has mode {mode:o}", f.display());
        }
        // The configurations load from them.
        let uac = (dir.join("uac.pem"), dir.join("uac-key.pem"));
        client_config(&[&dir.join("ca.pem")], Some((&uac.0, &uac.1))).expect("client");
        server_config(
            &dir.join("sbc.pem"),
            &dir.join("sbc-key.pem"),
            Some(&dir.join("ca.pem")),
        )
        .expect("server");
        // The rogue CA is not the lab CA.
        assert_ne!(
            cert_der(&dir.join("ca.pem")).expect("ca"),
            cert_der(&dir.join("rogue-ca.pem")).expect("rogue")
        );
    }

    #[test]
    fn open_refuses_a_foreign_key() {
        let tmp = TestDir::for_current_test();
        let dir = tmp.path();
        Pki::create(dir).expect("ca");
        Pki::create_named(dir, "other-ca").expect("other");
        assert!(Pki::open(dir).is_ok());
        fs::copy(dir.join("other-ca-key.pem"), dir.join("ca-key.pem")).expect("copy");
        let err = Pki::open(dir).expect_err("mismatched key");
        assert!(
            err.to_string().contains("not a CA made by sbc-lab"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_file_is_named() {
        let err = client_config(&[Path::new("/nonexistent/ca.pem")], None).expect_err("missing");
        assert!(
            format!("{err:#}").contains("/nonexistent/ca.pem"),
            "{err:#}"
        );
    }
}
