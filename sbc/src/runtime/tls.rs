//! SIP over TLS: the `tls-profile`s loaded from their PEM files, the acceptor of each TLS
//! listener, the connector toward each TLS next hop, and live certificate rotation.
//!
//! TLS connections are TCP connections of their own edge ([`super::tcp::TcpEdge`] with
//! [`LegTransport::Tls`]): the same connection caps, message deadline, idle timeout and bounded
//! write queues, plus a handshake deadline (`sip-config tls-handshake-timeout-ms`, 5 s by
//! default: Kamailio's `tls_handshake_timeout` is 30 s, but a handshake holds a place in the
//! connection caps, so a slow one must not hold it long) during which the connection already
//! holds its place in the caps.
//!
//! # Verification
//!
//! - **Next hops** (session-agents with `transport = "tls"`): their certificate must chain to
//!   the profile's `trusted-ca-certificates` and carry the agent's `tls-server-name` (its
//!   address by default) as a DNS or IP SubjectAltName (rustls' WebPKI verifier, RFC 5922
//!   §7.2); the name goes in SNI.
//! - **Peers dialled after a takeover** (a TLS caller's Contact, see `sbc_proto::engine`'s
//!   `reach`): verified with their interface's profile, against the IP address dialled.
//! - **Clients**, with `mutual-authenticate`: a certificate of a trusted CA, and one of
//!   `verify-names` if any is configured; without it, no certificate is asked for.
//!
//! # Rotation
//!
//! Each profile's certificate is served through a [`RotatingCert`] resolver. At every
//! `activate-config` the files are read again; a profile whose certificate changed swaps its
//! key in place (new handshakes present it; connections already up keep theirs), and one whose
//! verification settings or trusted CA files (their content: a bundle replaced at the same
//! path counts) changed gets new configurations. Files that do not load refuse the
//! whole activation, with the file and the reason, and nothing changes.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    ClientConfig, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme, SupportedProtocolVersion,
};
use serde::Serialize;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Sessions a listener remembers for resumption (about 200 bytes each).
const SESSION_CACHE: usize = 4096;

/// The `ring` provider: no C toolchain beyond a compiler, no CMake.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a profile's files do not load: the profile, the file, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The `tls-profile` name.
    pub profile: String,
    /// The attribute and file, e.g. `end-entity-certificate /etc/sbc/sbc.pem`.
    pub file: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tls-profile {}: {}: {}",
            self.profile, self.file, self.reason
        )
    }
}

impl std::error::Error for LoadError {}

/// A certificate's validity, read from its DER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// notBefore, seconds since the Unix epoch.
    pub not_before: i64,
    /// notAfter, seconds since the Unix epoch.
    pub not_after: i64,
}

fn validity_of(der: &[u8]) -> Result<Validity, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("not an X.509 certificate: {e}"))?;
    let v = cert.validity();
    Ok(Validity {
        not_before: v.not_before.timestamp(),
        not_after: v.not_after.timestamp(),
    })
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The date of `unix` seconds as `YYYY-MM-DD` (UTC), for messages.
fn date(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// A profile's certificate, as loaded: the key rustls signs with, and what `show tls` prints.
#[derive(Debug, Clone)]
pub struct LoadedCert {
    key: Arc<CertifiedKey>,
    /// Its validity.
    pub validity: Validity,
    /// The certificate file's path.
    pub path: String,
}

/// The resolver a profile's listener and connector share: one certificate, swapped in place by
/// a rotation (new handshakes take the new one at once).
#[derive(Debug)]
pub struct RotatingCert {
    current: RwLock<Option<Arc<CertifiedKey>>>,
}

impl RotatingCert {
    fn new(key: Option<Arc<CertifiedKey>>) -> Self {
        Self {
            current: RwLock::new(key),
        }
    }

    fn get(&self) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .map(|k| k.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    fn set(&self, key: Option<Arc<CertifiedKey>>) {
        match self.current.write() {
            Ok(mut k) => *k = key,
            Err(p) => *p.into_inner() = key,
        }
    }
}

impl ResolvesServerCert for RotatingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.get()
    }
}

impl ResolvesClientCert for RotatingCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.get()
    }

    fn has_certs(&self) -> bool {
        self.get().is_some()
    }
}

/// Reads a PEM certificate chain, checked: at least one certificate, each X.509, the first
/// valid now.
fn read_chain(
    profile: &str,
    attr: &str,
    path: &str,
    now: i64,
) -> Result<(Vec<CertificateDer<'static>>, Validity), LoadError> {
    let err = |reason: String| LoadError {
        profile: profile.to_owned(),
        file: format!("{attr} {path}"),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| err(format!("not PEM: {e}")))?;
    let first = certs
        .first()
        .ok_or_else(|| err("no CERTIFICATE block in the file".into()))?;
    let validity = validity_of(first).map_err(err)?;
    if now < validity.not_before {
        return Err(err(format!(
            "the certificate is not valid before {}",
            date(validity.not_before)
        )));
    }
    if now > validity.not_after {
        return Err(err(format!(
            "the certificate expired on {}",
            date(validity.not_after)
        )));
    }
    for (i, c) in certs.iter().enumerate().skip(1) {
        validity_of(c).map_err(|e| err(format!("certificate {} of the chain: {e}", i + 1)))?;
    }
    Ok((certs, validity))
}

/// A `tls-profile` as the TLS context loads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsProfile {
    /// The profile's name.
    pub name: String,
    /// The certificate chain file (PEM); empty: the profile only dials.
    pub end_entity_certificate: String,
    /// The certificate's private key file (PEM).
    pub private_key: String,
    /// The CA files peers are verified against.
    pub trusted_ca_certificates: Vec<String>,
    /// Clients must present a certificate of those CAs.
    pub mutual_authenticate: bool,
    /// With mutual authentication, the names a client certificate must carry one of.
    pub verify_names: Vec<String>,
    /// The TLS versions offered.
    pub tls_version: TlsVersion,
    /// Days before expiry from which the certificate is reported as expiring.
    pub expiry_warning_days: u32,
}

impl TlsProfile {
    /// Whether the profile has a certificate to present.
    #[must_use]
    pub fn has_certificate(&self) -> bool {
        !self.end_entity_certificate.is_empty()
    }
}

/// The TLS versions a profile offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3.
    Compatibility,
    /// TLS 1.2 only.
    Tlsv12,
    /// TLS 1.3 only.
    Tlsv13,
}

/// A session agent reached over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsAgent {
    /// The agent's name (for messages).
    pub name: String,
    /// Where it is dialled.
    pub address: SocketAddr,
    /// The profile it is dialled with.
    pub profile: String,
    /// The name sent as SNI and verified (`None`: its IP address).
    pub server_name: Option<String>,
}

/// Every profile, which profile each interface listens with, and how each TLS session agent is
/// dialled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// The profiles.
    pub profiles: Vec<TlsProfile>,
    /// Per interface (by index): its TLS listener's profile, when it listens on TLS.
    pub interfaces: Vec<Option<String>>,
    /// The session agents reached over TLS.
    pub agents: Vec<TlsAgent>,
}

/// Loads the certificate and key of `p`, checked to match.
fn load_cert(p: &TlsProfile, now: i64) -> Result<Option<LoadedCert>, LoadError> {
    if !p.has_certificate() {
        return Ok(None);
    }
    let (chain, validity) = read_chain(
        &p.name,
        "end-entity-certificate",
        &p.end_entity_certificate,
        now,
    )?;
    let key_err = |reason: String| LoadError {
        profile: p.name.clone(),
        file: format!("private-key {}", p.private_key),
        reason,
    };
    let bytes = std::fs::read(&p.private_key).map_err(|e| key_err(e.to_string()))?;
    if let Ok(meta) = std::fs::metadata(&p.private_key) {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                profile = %p.name,
                file = %p.private_key,
                mode = format_args!("{mode:04o}"),
                "the TLS private key is readable by other users: chmod 600 it"
            );
        }
    }
    let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        key_err(format!(
            "no PKCS#8, SEC1 or PKCS#1 private key in the file ({e})"
        ))
    })?;
    let certified = CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
        key_err(match e {
            rustls::Error::InconsistentKeys(_) => {
                format!(
                    "the key does not belong to the certificate of {}",
                    p.end_entity_certificate
                )
            }
            other => format!("not a usable key: {other}"),
        })
    })?;
    Ok(Some(LoadedCert {
        key: Arc::new(certified),
        validity,
        path: p.end_entity_certificate.clone(),
    }))
}

/// The profile's trusted CA certificates, in order, each with the file it came from.
type Cas = Vec<(String, CertificateDer<'static>)>;

/// Reads the profile's trusted CA files (checked as [`read_chain`] does).
fn read_cas(p: &TlsProfile, now: i64) -> Result<Cas, LoadError> {
    let mut cas = Vec::new();
    for path in &p.trusted_ca_certificates {
        let (certs, _) = read_chain(&p.name, "trusted-ca-certificates", path, now)?;
        cas.extend(certs.into_iter().map(|c| (path.clone(), c)));
    }
    Ok(cas)
}

/// The root store of the profile's trusted CAs `cas` (from [`read_cas`]).
fn load_roots(p: &TlsProfile, cas: &Cas) -> Result<RootCertStore, LoadError> {
    let mut roots = RootCertStore::empty();
    for (path, c) in cas {
        roots.add(c.clone()).map_err(|e| LoadError {
            profile: p.name.clone(),
            file: format!("trusted-ca-certificates {path}"),
            reason: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

static ONLY_TLS12: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
static ONLY_TLS13: [&SupportedProtocolVersion; 1] = [&rustls::version::TLS13];

fn versions(v: TlsVersion) -> &'static [&'static SupportedProtocolVersion] {
    match v {
        TlsVersion::Compatibility => rustls::ALL_VERSIONS,
        TlsVersion::Tlsv12 => &ONLY_TLS12,
        TlsVersion::Tlsv13 => &ONLY_TLS13,
    }
}

/// A client verifier that, after WebPKI's chain check, requires one of the configured names.
#[derive(Debug)]
struct NamedClients {
    inner: Arc<dyn ClientCertVerifier>,
    names: Vec<ServerName<'static>>,
}

impl ClientCertVerifier for NamedClients {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let ok = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|e| rustls::Error::General(format!("client certificate: {e}")))?;
        if self
            .names
            .iter()
            .any(|n| cert.verify_is_valid_for_subject_name(n).is_ok())
        {
            Ok(ok)
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// One profile as the node uses it.
#[derive(Debug)]
struct Loaded {
    settings: TlsProfile,
    cert: Option<LoadedCert>,
    resolver: Arc<RotatingCert>,
    /// `None` for a profile without a certificate (it only dials).
    acceptor: Option<Arc<ServerConfig>>,
    /// `None` for a profile without trusted CAs (it cannot verify a server).
    connector: Option<Arc<ClientConfig>>,
    /// The trusted CAs the configurations were built with: a file whose content changed
    /// (same path) rebuilds them.
    cas: Cas,
}

/// What a profile's configurations depend on besides its certificate and the content of its
/// CA files: a change rebuilds them.
fn same_verification(a: &TlsProfile, b: &TlsProfile) -> bool {
    a.trusted_ca_certificates == b.trusted_ca_certificates
        && a.mutual_authenticate == b.mutual_authenticate
        && a.verify_names == b.verify_names
        && a.tls_version == b.tls_version
}

fn build(
    p: &TlsProfile,
    cert: Option<LoadedCert>,
    resolver: Arc<RotatingCert>,
    cas: Cas,
) -> Result<Loaded, LoadError> {
    let err = |file: &str, reason: String| LoadError {
        profile: p.name.clone(),
        file: file.to_owned(),
        reason,
    };
    let roots = Arc::new(load_roots(p, &cas)?);
    let provider = provider();
    let acceptor = if cert.is_some() {
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions(p.tls_version))
            .map_err(|e| err("tls-version", e.to_string()))?;
        let builder = if p.mutual_authenticate {
            let webpki =
                WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                    .build()
                    .map_err(|e| err("trusted-ca-certificates", e.to_string()))?;
            let verifier: Arc<dyn ClientCertVerifier> = if p.verify_names.is_empty() {
                webpki
            } else {
                let names = p
                    .verify_names
                    .iter()
                    .map(|n| {
                        ServerName::try_from(n.clone())
                            .map_err(|e| err("verify-names", format!("{n}: {e}")))
                    })
                    .collect::<Result<_, _>>()?;
                Arc::new(NamedClients {
                    inner: webpki,
                    names,
                })
            };
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder.with_cert_resolver(resolver.clone());
        // Resumption for clients that reconnect (phones, PBXs): rustls keeps 256 sessions by
        // default, which an access interface with thousands of clients outgrows.
        config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
        Some(Arc::new(config))
    } else {
        None
    };
    let connector = if roots.is_empty() {
        None
    } else {
        let verifier: Arc<dyn ServerCertVerifier> =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| err("trusted-ca-certificates", e.to_string()))?;
        let config = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions(p.tls_version))
            .map_err(|e| err("tls-version", e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_cert_resolver(resolver.clone());
        Some(Arc::new(config))
    };
    Ok(Loaded {
        settings: p.clone(),
        cert,
        resolver,
        acceptor,
        connector,
        cas,
    })
}

/// Where a dialled TLS connection goes and how it is verified.
#[derive(Debug, Clone)]
struct DialTarget {
    profile: String,
    name: ServerName<'static>,
}

/// The node's TLS: every profile loaded, which profile each interface listens with, and how
/// each TLS session-agent is dialled.
#[derive(Debug, Default)]
pub struct TlsContext {
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    profiles: HashMap<String, Arc<Loaded>>,
    /// Per interface (by index): its listener's profile.
    interfaces: Vec<Option<String>>,
    /// TLS session-agents by address.
    agents: HashMap<SocketAddr, DialTarget>,
}

/// A certificate's entry in `show tls`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertStatus {
    /// The profile.
    pub profile: String,
    /// The certificate file.
    pub file: String,
    /// notAfter, `YYYY-MM-DD`.
    pub expires: String,
    /// notAfter, Unix seconds (the metrics' expiry timestamp).
    pub expires_unix: i64,
    /// Whole days left (negative once expired).
    pub days_left: i64,
    /// Within the profile's `expiry-warning-days`.
    pub expiring: bool,
}

fn server_name_of(agent_name: Option<&str>, ip: IpAddr) -> Result<ServerName<'static>, String> {
    match agent_name {
        Some(n) => ServerName::try_from(n.to_owned()).map_err(|e| format!("{n}: {e}")),
        None => Ok(ServerName::IpAddress(ip.into())),
    }
}

impl TlsContext {
    /// Loads every profile of `settings` (checked), replacing what was loaded: see the module
    /// docs on rotation. Returns the profiles whose certificate changed.
    ///
    /// # Errors
    /// The first file that does not load; nothing was changed then.
    pub fn load(&self, settings: &TlsSettings) -> Result<Vec<String>, LoadError> {
        let now = unix_now();
        let old = self
            .state
            .read()
            .map(|s| s.profiles.clone())
            .unwrap_or_default();
        let mut profiles = HashMap::new();
        let mut rotated = Vec::new();
        // Everything loads first; only then does anything change.
        let mut swaps = Vec::new();
        for p in &settings.profiles {
            let cert = load_cert(p, now)?;
            let cas = read_cas(p, now)?;
            let loaded = match old.get(&p.name) {
                Some(prev)
                    if same_verification(&prev.settings, p)
                        && prev.cas == cas
                        && prev.acceptor.is_some() == cert.is_some() =>
                {
                    // Verification unchanged (settings and CA files' content): the
                    // configurations stay, the key is swapped.
                    let changed = prev.cert.as_ref().map(|c| &c.key.cert)
                        != cert.as_ref().map(|c| &c.key.cert);
                    if changed {
                        rotated.push(p.name.clone());
                    }
                    swaps.push((prev.resolver.clone(), cert.as_ref().map(|c| c.key.clone())));
                    Arc::new(Loaded {
                        settings: p.clone(),
                        cert,
                        resolver: prev.resolver.clone(),
                        acceptor: prev.acceptor.clone(),
                        connector: prev.connector.clone(),
                        cas,
                    })
                }
                prev => {
                    if prev.is_some() {
                        rotated.push(p.name.clone());
                    }
                    let resolver =
                        Arc::new(RotatingCert::new(cert.as_ref().map(|c| c.key.clone())));
                    Arc::new(build(p, cert, resolver, cas)?)
                }
            };
            profiles.insert(p.name.clone(), loaded);
        }
        let mut agents = HashMap::new();
        for a in &settings.agents {
            let name =
                server_name_of(a.server_name.as_deref(), a.address.ip()).map_err(|reason| {
                    LoadError {
                        profile: a.profile.clone(),
                        file: format!("session-agent {} tls-server-name", a.name),
                        reason,
                    }
                })?;
            agents.insert(
                a.address,
                DialTarget {
                    profile: a.profile.clone(),
                    name,
                },
            );
        }
        let interfaces = settings.interfaces.clone();
        for (resolver, key) in swaps {
            resolver.set(key);
        }
        if let Ok(mut s) = self.state.write() {
            *s = State {
                profiles,
                interfaces,
                agents,
            };
        }
        Ok(rotated)
    }

    /// The acceptor of interface `interface`'s TLS listener.
    #[must_use]
    pub fn acceptor(&self, interface: usize) -> Option<TlsAcceptor> {
        let s = self.state.read().ok()?;
        let name = s.interfaces.get(interface)?.as_ref()?;
        s.profiles
            .get(name)?
            .acceptor
            .clone()
            .map(TlsAcceptor::from)
    }

    /// How to dial `dest` from `interface`: a TLS session-agent's profile and name, else the
    /// interface's profile verifying the IP address dialled.
    #[must_use]
    pub fn connector(
        &self,
        interface: usize,
        dest: SocketAddr,
    ) -> Option<(TlsConnector, ServerName<'static>)> {
        let s = self.state.read().ok()?;
        let (profile, name) = match s.agents.get(&dest) {
            Some(t) => (t.profile.clone(), t.name.clone()),
            None => (
                s.interfaces.get(interface)?.clone()?,
                ServerName::IpAddress(dest.ip().into()),
            ),
        };
        let config = s.profiles.get(&profile)?.connector.clone()?;
        Some((TlsConnector::from(config), name))
    }

    /// The client configuration of profile `profile` (its trusted CAs verify the server, its
    /// certificate is presented when asked), for a dial outside SIP: a RADIUS/TLS accounting
    /// server. `None` if the profile is not loaded or has no trusted CAs.
    #[must_use]
    pub fn client_config(&self, profile: &str) -> Option<Arc<ClientConfig>> {
        let s = self.state.read().ok()?;
        s.profiles.get(profile)?.connector.clone()
    }

    /// Every loaded certificate with its expiry, against `now` (Unix seconds).
    #[must_use]
    pub fn certificates_at(&self, now: i64) -> Vec<CertStatus> {
        let Ok(s) = self.state.read() else {
            return Vec::new();
        };
        let mut out: Vec<CertStatus> = s
            .profiles
            .values()
            .filter_map(|p| {
                let c = p.cert.as_ref()?;
                let days_left = (c.validity.not_after - now).div_euclid(86_400);
                Some(CertStatus {
                    profile: p.settings.name.clone(),
                    file: c.path.clone(),
                    expires: date(c.validity.not_after),
                    expires_unix: c.validity.not_after,
                    days_left,
                    expiring: days_left < i64::from(p.settings.expiry_warning_days)
                        || c.validity.not_after <= now,
                })
            })
            .collect();
        out.sort_by(|a, b| a.profile.cmp(&b.profile));
        out
    }

    /// [`Self::certificates_at`] now.
    #[must_use]
    pub fn certificates(&self) -> Vec<CertStatus> {
        self.certificates_at(unix_now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sbc_config::Config;

    #[test]
    fn dates_print_as_utc_days() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(951_782_400), "2000-02-29");
        assert_eq!(date(1_796_083_200), "2026-12-01");
    }

    use std::path::{Path, PathBuf};

    use sbc_lab::tls::{Issued, Pki};

    /// A fresh directory for one test's files.
    fn test_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sbc-tls-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test dir");
        dir
    }

    /// A node whose core realm dials the TLS agent `peer.lab` at 127.0.0.1:5061, verified
    /// with the CAs of `bundle`.
    fn dialling_config(sbc: &Issued, bundle: &Path) -> TlsSettings {
        let toml = format!(
            r#"
[[sip-interface]]
realm = "core"
address = "127.0.0.1"
port = 5070
transports = ["udp", "tls"]
tls-port = 5071
tls-profile = "edge"

[[session-agent]]
name = "peer"
realm = "core"
address = "127.0.0.1"
port = 5061
transport = "tls"
tls-profile = "edge"
tls-server-name = "peer.lab"

[[tls-profile]]
name = "edge"
end-entity-certificate = "{}"
private-key = "{}"
trusted-ca-certificates = ["{}"]
"#,
            sbc.cert.display(),
            sbc.key.display(),
            bundle.display()
        );
        crate::settings::tls(&Config::from_toml_str(&toml).expect("test config"))
    }

    /// One in-memory handshake of the connector toward the agent with a server presenting
    /// `peer`: whether the node accepted the peer's certificate.
    fn dial_verifies(ctx: &TlsContext, peer: &Issued) -> bool {
        let (connector, name) = ctx
            .connector(0, "127.0.0.1:5061".parse().expect("addr"))
            .expect("a connector for the agent");
        let server = sbc_lab::tls::server_config(&peer.cert, &peer.key, None).expect("server");
        let mut client =
            rustls::ClientConnection::new(connector.config().clone(), name).expect("client");
        let mut server = rustls::ServerConnection::new(server).expect("server");
        let mut buf = Vec::new();
        for _ in 0..10 {
            buf.clear();
            let _ = client.write_tls(&mut buf);
            let _ = server.read_tls(&mut buf.as_slice());
            if server.process_new_packets().is_err() {
                return false;
            }
            buf.clear();
            let _ = server.write_tls(&mut buf);
            let _ = client.read_tls(&mut buf.as_slice());
            if client.process_new_packets().is_err() {
                return false;
            }
            if !client.is_handshaking() {
                return true;
            }
        }
        false
    }

    #[test]
    fn a_ca_file_rewritten_in_place_is_trusted_from_the_next_load() {
        let dir = test_dir("ca-in-place");
        let lab = Pki::create(&dir).expect("lab CA");
        let other = Pki::create_named(&dir, "other-ca").expect("other CA");
        let sbc = lab.issue("sbc", &["sbc.lab"], &[]).expect("sbc");
        let lab_peer = lab.issue("peer", &["peer.lab"], &[]).expect("peer");
        let other_peer = other.issue("other-peer", &["peer.lab"], &[]).expect("peer");
        let bundle = dir.join("bundle.pem");
        std::fs::copy(lab.ca_cert(), &bundle).expect("bundle");
        let cfg = dialling_config(&sbc, &bundle);
        let ctx = TlsContext::default();
        ctx.load(&cfg).expect("load");
        assert!(dial_verifies(&ctx, &lab_peer));
        assert!(!dial_verifies(&ctx, &other_peer));

        // The same config again: nothing is rebuilt (the resumption cache survives).
        let before = ctx.acceptor(0).expect("acceptor");
        ctx.load(&cfg).expect("load");
        let after = ctx.acceptor(0).expect("acceptor");
        assert!(Arc::ptr_eq(before.config(), after.config()));

        // The bundle replaced at the same path (the other CA instead): the next load trusts
        // what the file now holds, and only that.
        std::fs::copy(other.ca_cert(), &bundle).expect("bundle");
        ctx.load(&cfg).expect("load");
        assert!(
            !dial_verifies(&ctx, &lab_peer),
            "the removed CA is still trusted"
        );
        assert!(
            dial_verifies(&ctx, &other_peer),
            "the added CA is not trusted"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
