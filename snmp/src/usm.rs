//! SNMPv3 User-based Security Model (RFC 3414) with AES-128 privacy (RFC 3826), sans IO: the
//! password-to-key algorithm and key localization (§A.2.2), the HMAC-SHA-96 authentication
//! parameter of a message (§7.3), AES-128-CFB encryption of the scoped PDU (RFC 3826 §3.1),
//! the engine's identity and clock ([`Engine`]: `snmpEngineID`, `snmpEngineBoots`,
//! `snmpEngineTime` from a passed-in elapsed time), the `usmStats` counters, and
//! [`encode_auth_priv`], which builds an authenticated and encrypted message (agent responses
//! and v3 traps). The agent's incoming message processing is in [`crate::agent`].
//!
//! The primitives are RustCrypto's (`sha1`, `hmac`, `aes`, `cfb-mode`); only the protocol's
//! use of them is here. Only SHA and AES-128 exist (MD5 and DES are refused on purpose), and
//! only authPriv is served.

use std::net::IpAddr;
use std::time::Duration;

use aes::cipher::{AsyncStreamCipher, KeyIvInit};
use hmac::{Hmac, Mac};
use ipnet::IpNet;
use rasn::types::{Integer, OctetString};
use rasn_snmp::v3::{HeaderData, Message, Pdus, ScopedPdu, ScopedPduData, USMSecurityParameters};
use sha1::{Digest, Sha1};

type Aes128CfbEnc = cfb_mode::Encryptor<aes::Aes128>;
type Aes128CfbDec = cfb_mode::Decryptor<aes::Aes128>;

/// `msgFlags` authFlag.
pub const FLAG_AUTH: u8 = 0x01;
/// `msgFlags` privFlag.
pub const FLAG_PRIV: u8 = 0x02;
/// `msgFlags` reportableFlag.
pub const FLAG_REPORTABLE: u8 = 0x04;
/// `msgSecurityModel` of the USM.
pub const SECURITY_MODEL_USM: i64 = 3;
/// The time window (RFC 3414 §2.2.3): 150 seconds either side.
pub const TIME_WINDOW: u32 = 150;
/// Octets of `msgPrivacyParameters` for AES (the salt, RFC 3826 §3.1.2.1).
pub const PRIV_PARAMS_LEN: usize = 8;
/// The largest `snmpEngineBoots` (RFC 3414 §2.2.2): the engine is then stuck until
/// reconfigured.
pub const MAX_BOOTS: u32 = 2_147_483_647;
/// `usmStats`: `1.3.6.1.6.3.15.1.1`.
pub const USM_STATS_ARC: [u32; 9] = [1, 3, 6, 1, 6, 3, 15, 1, 1];
/// `snmpEngine`: `1.3.6.1.6.3.10.2.1`.
pub const SNMP_ENGINE_ARC: [u32; 9] = [1, 3, 6, 1, 6, 3, 10, 2, 1];

/// Bytes of password material hashed to make a key (RFC 3414 §A.2: one megabyte).
const EXPANDED: usize = 1_048_576;
/// Octets of an HMAC-SHA-96 `msgAuthenticationParameters`.
pub const AUTH_PARAMS_LEN: usize = 12;
/// Whether `source` is in `nets` (an empty list allows every source). An IPv4-mapped IPv6
/// source (`::ffff:a.b.c.d`, how an agent listening on `[::]` sees an IPv4 manager) is also
/// matched as the IPv4 address it carries, so `10.0.0.0/8` allows it.
#[must_use]
pub fn source_allowed(nets: &[IpNet], source: IpAddr) -> bool {
    let canonical = source.to_canonical();
    nets.is_empty()
        || nets
            .iter()
            .any(|n| n.contains(&source) || n.contains(&canonical))
}

/// The shortest password RFC 3414 §11.2 allows.
pub const MIN_PASSWORD: usize = 8;

/// A password that cannot make a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an SNMPv3 password needs at least {MIN_PASSWORD} characters (RFC 3414 section 11.2)")]
pub struct ShortPassword;

/// `Ku`: the user's key from a password (RFC 3414 §A.2.2, SHA-1): SHA-1 of the password
/// repeated over 1,048,576 octets.
///
/// # Errors
/// The password is shorter than [`MIN_PASSWORD`].
pub fn password_to_key(password: &[u8]) -> Result<[u8; 20], ShortPassword> {
    if password.len() < MIN_PASSWORD {
        return Err(ShortPassword);
    }
    let mut hasher = Sha1::new();
    let mut block = [0u8; 64];
    let mut at = 0usize;
    for _ in 0..EXPANDED / block.len() {
        for b in &mut block {
            *b = password[at % password.len()];
            at += 1;
        }
        hasher.update(block);
    }
    Ok(hasher.finalize().into())
}

/// `Kul`: `Ku` localized to an engine (RFC 3414 §A.2.2): SHA-1(Ku || engineID || Ku).
#[must_use]
pub fn localize(key: &[u8; 20], engine_id: &[u8]) -> [u8; 20] {
    let mut hasher = Sha1::new();
    hasher.update(key);
    hasher.update(engine_id);
    hasher.update(key);
    hasher.finalize().into()
}

/// The localized key of `password` for `engine_id`.
///
/// # Errors
/// The password is shorter than [`MIN_PASSWORD`].
pub fn localized_key(password: &[u8], engine_id: &[u8]) -> Result<[u8; 20], ShortPassword> {
    Ok(localize(&password_to_key(password)?, engine_id))
}

/// HMAC-SHA-96 of a whole message whose `msgAuthenticationParameters` are 12 zero octets
/// (RFC 3414 §7.3.1): the first 12 octets of HMAC-SHA-1 with the localized key.
#[must_use]
pub fn auth_params(localized: &[u8; 20], whole_message: &[u8]) -> [u8; AUTH_PARAMS_LEN] {
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(localized)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(whole_message);
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; AUTH_PARAMS_LEN];
    out.copy_from_slice(&full[..AUTH_PARAMS_LEN]);
    out
}

/// Checks a received message (RFC 3414 §7.3.2): `received` is its
/// `msgAuthenticationParameters`, `zeroed` the message with those octets replaced by zeros.
/// A mismatch is `usmStatsWrongDigests`. The comparison is in constant time (`hmac`'s).
#[must_use]
pub fn verify(localized: &[u8; 20], zeroed: &[u8], received: &[u8]) -> bool {
    let Ok(mut mac) = <Hmac<Sha1> as Mac>::new_from_slice(localized) else {
        return false;
    };
    mac.update(zeroed);
    received.len() == AUTH_PARAMS_LEN && mac.verify_truncated_left(received).is_ok()
}

/// AES-128-CFB encryption of a scoped PDU (RFC 3826 §3.1.3): the key is the first 16 octets
/// of the localized privacy key, the IV `boots ‖ time ‖ salt` (4 + 4 + 8 octets, big endian);
/// the salt is the message's `msgPrivacyParameters`.
#[must_use]
pub fn encrypt(
    priv_key: &[u8; 16],
    boots: u32,
    time: u32,
    salt: &[u8; 8],
    plain: &[u8],
) -> Vec<u8> {
    let mut buf = plain.to_vec();
    Aes128CfbEnc::new(priv_key.into(), &iv(boots, time, salt).into()).encrypt(&mut buf);
    buf
}

/// The inverse of [`encrypt`]; `None` when the salt is not 8 octets (a decryption error).
#[must_use]
pub fn decrypt(
    priv_key: &[u8; 16],
    boots: u32,
    time: u32,
    salt: &[u8],
    cipher: &[u8],
) -> Option<Vec<u8>> {
    let salt: &[u8; 8] = salt.try_into().ok()?;
    let mut buf = cipher.to_vec();
    Aes128CfbDec::new(priv_key.into(), &iv(boots, time, salt).into()).decrypt(&mut buf);
    Some(buf)
}

fn iv(boots: u32, time: u32, salt: &[u8; 8]) -> [u8; 16] {
    let mut iv = [0u8; 16];
    iv[..4].copy_from_slice(&boots.to_be_bytes());
    iv[4..8].copy_from_slice(&time.to_be_bytes());
    iv[8..].copy_from_slice(salt);
    iv
}

/// A USM user with its keys localized to one engine (computed once per configuration: each
/// key hashes a megabyte). Its `Debug` prints no key.
#[derive(Clone, PartialEq, Eq)]
pub struct UsmUser {
    /// `msgUserName`.
    pub name: String,
    /// Sources allowed to send requests as this user; empty allows every source.
    pub sources: Vec<IpNet>,
    auth_key: [u8; 20],
    priv_key: [u8; 16],
}

impl std::fmt::Debug for UsmUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsmUser")
            .field("name", &self.name)
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl UsmUser {
    /// A user of SHA and AES-128 with keys localized to `engine_id`. Slow (two megabytes of
    /// SHA-1): call it off an async runtime.
    ///
    /// # Errors
    /// A password is shorter than [`MIN_PASSWORD`].
    pub fn new(
        name: &str,
        auth_password: &[u8],
        priv_password: &[u8],
        engine_id: &[u8],
        sources: Vec<IpNet>,
    ) -> Result<Self, ShortPassword> {
        let auth_key = localized_key(auth_password, engine_id)?;
        let full = localized_key(priv_password, engine_id)?;
        let mut priv_key = [0u8; 16];
        priv_key.copy_from_slice(&full[..16]);
        Ok(Self {
            name: name.to_owned(),
            sources,
            auth_key,
            priv_key,
        })
    }

    /// Whether `source` may send requests as this user (see [`source_allowed`]).
    #[must_use]
    pub fn allows(&self, source: IpAddr) -> bool {
        source_allowed(&self.sources, source)
    }

    /// The localized authentication key.
    #[must_use]
    pub const fn auth_key(&self) -> &[u8; 20] {
        &self.auth_key
    }

    /// The AES-128 key (the first 16 octets of the localized privacy key).
    #[must_use]
    pub const fn priv_key(&self) -> &[u8; 16] {
        &self.priv_key
    }
}

/// This node as an SNMP engine: its ID and boots (persisted and incremented at each start by
/// the shell). Its time is the elapsed time since start, passed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    /// `snmpEngineID`.
    pub id: Vec<u8>,
    /// `snmpEngineBoots`.
    pub boots: u32,
}

impl Engine {
    /// `snmpEngineTime` after `elapsed` since the engine started (boots last changed), in
    /// whole seconds, at most [`MAX_BOOTS`].
    #[must_use]
    pub fn time(elapsed: Duration) -> u32 {
        u32::try_from(elapsed.as_secs()).map_or(MAX_BOOTS, |s| s.min(MAX_BOOTS))
    }

    /// Whether a message's boots and time are inside the time window (RFC 3414 §3.2 step 7a,
    /// we being authoritative): same boots (and not the latched maximum), time within 150 s.
    #[must_use]
    pub fn in_time_window(&self, elapsed: Duration, boots: u32, time: u32) -> bool {
        let now = Self::time(elapsed);
        self.boots != MAX_BOOTS && boots == self.boots && now.abs_diff(time) <= TIME_WINDOW
    }
}

/// The `usmStats` counters (SNMP-USER-BASED-SM-MIB), each answerable by GET.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsmStats {
    /// `usmStatsUnsupportedSecLevels` (`.1`).
    pub unsupported_sec_levels: u32,
    /// `usmStatsNotInTimeWindows` (`.2`).
    pub not_in_time_windows: u32,
    /// `usmStatsUnknownUserNames` (`.3`).
    pub unknown_user_names: u32,
    /// `usmStatsUnknownEngineIDs` (`.4`).
    pub unknown_engine_ids: u32,
    /// `usmStatsWrongDigests` (`.5`).
    pub wrong_digests: u32,
    /// `usmStatsDecryptionErrors` (`.6`).
    pub decryption_errors: u32,
}

/// One of the USM's report reasons, which names its `usmStats` counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsmError {
    /// `usmStatsUnsupportedSecLevels`.
    UnsupportedSecLevel,
    /// `usmStatsNotInTimeWindows`.
    NotInTimeWindow,
    /// `usmStatsUnknownUserNames`.
    UnknownUserName,
    /// `usmStatsUnknownEngineIDs`.
    UnknownEngineId,
    /// `usmStatsWrongDigests`.
    WrongDigest,
    /// `usmStatsDecryptionErrors`.
    DecryptionError,
}

impl UsmError {
    /// The column under [`USM_STATS_ARC`].
    #[must_use]
    pub const fn column(self) -> u32 {
        match self {
            Self::UnsupportedSecLevel => 1,
            Self::NotInTimeWindow => 2,
            Self::UnknownUserName => 3,
            Self::UnknownEngineId => 4,
            Self::WrongDigest => 5,
            Self::DecryptionError => 6,
        }
    }
}

impl UsmStats {
    /// Counts `error` and returns the counter's new value.
    pub fn count(&mut self, error: UsmError) -> u32 {
        let c = match error {
            UsmError::UnsupportedSecLevel => &mut self.unsupported_sec_levels,
            UsmError::NotInTimeWindow => &mut self.not_in_time_windows,
            UsmError::UnknownUserName => &mut self.unknown_user_names,
            UsmError::UnknownEngineId => &mut self.unknown_engine_ids,
            UsmError::WrongDigest => &mut self.wrong_digests,
            UsmError::DecryptionError => &mut self.decryption_errors,
        };
        *c = c.wrapping_add(1);
        *c
    }

    /// The counters in column order (`.1` to `.6`).
    #[must_use]
    pub const fn columns(&self) -> [u32; 6] {
        [
            self.unsupported_sec_levels,
            self.not_in_time_windows,
            self.unknown_user_names,
            self.unknown_engine_ids,
            self.wrong_digests,
            self.decryption_errors,
        ]
    }
}

/// A BER element: its tag and where its contents are.
struct Tlv {
    tag: u8,
    start: usize,
    len: usize,
}

impl Tlv {
    const fn end(&self) -> usize {
        self.start + self.len
    }
}

/// The BER element at `at` of `buf` (single-octet tags, definite lengths of up to 4 octets).
fn tlv(buf: &[u8], at: usize) -> Option<Tlv> {
    let tag = *buf.get(at)?;
    let first = *buf.get(at + 1)?;
    let (len, start) = if first < 0x80 {
        (usize::from(first), at + 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let bytes = buf.get(at + 2..at + 2 + n)?;
        (
            bytes.iter().fold(0usize, |l, b| (l << 8) | usize::from(*b)),
            at + 2 + n,
        )
    };
    (start.checked_add(len)? <= buf.len()).then_some(Tlv { tag, start, len })
}

/// Where the contents of `msgAuthenticationParameters` are in a whole SNMPv3 message: walks
/// `SEQUENCE { version, msgGlobalData, OCTET STRING { SEQUENCE { engineID, boots, time,
/// userName, authParams ... } } }`. `None` when the message is not laid out so.
#[must_use]
pub fn auth_params_range(message: &[u8]) -> Option<std::ops::Range<usize>> {
    let outer = tlv(message, 0).filter(|t| t.tag == 0x30)?;
    let version = tlv(message, outer.start)?;
    let global = tlv(message, version.end())?;
    let params = tlv(message, global.end()).filter(|t| t.tag == 0x04)?;
    let usm = tlv(message, params.start).filter(|t| t.tag == 0x30 && t.end() <= params.end())?;
    let mut at = usm.start;
    for _ in 0..4 {
        at = tlv(message, at)?.end();
    }
    let auth = tlv(message, at).filter(|t| t.tag == 0x04 && t.end() <= usm.end())?;
    Some(auth.start..auth.end())
}

/// The `msgVersion` of an SNMP message (0: v1, 1: v2c, 3: v3), read without decoding the rest;
/// `None` when the bytes do not start so.
#[must_use]
pub fn message_version(raw: &[u8]) -> Option<i64> {
    let outer = tlv(raw, 0).filter(|t| t.tag == 0x30)?;
    let version = tlv(raw, outer.start).filter(|t| t.tag == 0x02 && (1..=8).contains(&t.len))?;
    let bytes = &raw[version.start..version.end()];
    let first = i64::from(i8::from_ne_bytes([bytes[0]]));
    Some(
        bytes[1..]
            .iter()
            .fold(first, |v, b| (v << 8) | i64::from(*b)),
    )
}

/// Builds an authPriv SNMPv3 message (RFC 3414 §3.1) from `engine` (authoritative: an agent's
/// response or report, or a trap we originate) for `user`: the scoped PDU `pdu` (context
/// engine ID ours, context name empty) encrypted with AES-128-CFB under `salt`, the whole
/// message authenticated with HMAC-SHA-96. `flags` are the `msgFlags` (authPriv: 0x03; a
/// report with `auth_only` is authNoPriv, its scoped PDU in clear).
///
/// # Errors
/// The message does not encode (the BER encoder's message).
#[allow(clippy::too_many_arguments)]
pub fn encode_auth_priv(
    engine: &Engine,
    engine_time: u32,
    user: &UsmUser,
    message_id: i32,
    max_size: i32,
    salt: u64,
    pdu: Pdus,
    auth_only: bool,
) -> Result<Vec<u8>, String> {
    let scoped = ScopedPdu {
        engine_id: OctetString::from(engine.id.clone()),
        name: OctetString::from(Vec::new()),
        data: pdu,
    };
    let salt = salt.to_be_bytes();
    let (scoped_data, privacy, flags) = if auth_only {
        (ScopedPduData::CleartextPdu(scoped), Vec::new(), FLAG_AUTH)
    } else {
        let plain = rasn::ber::encode(&scoped).map_err(|e| e.to_string())?;
        let cipher = encrypt(user.priv_key(), engine.boots, engine_time, &salt, &plain);
        (
            ScopedPduData::EncryptedPdu(OctetString::from(cipher)),
            salt.to_vec(),
            FLAG_AUTH | FLAG_PRIV,
        )
    };
    encode_authenticated(
        engine,
        engine_time,
        user,
        message_id,
        max_size,
        flags,
        scoped_data,
        privacy,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_authenticated(
    engine: &Engine,
    engine_time: u32,
    user: &UsmUser,
    message_id: i32,
    max_size: i32,
    flags: u8,
    scoped_data: ScopedPduData,
    privacy: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let params = USMSecurityParameters {
        authoritative_engine_id: OctetString::from(engine.id.clone()),
        authoritative_engine_boots: Integer::from(i64::from(engine.boots)),
        authoritative_engine_time: Integer::from(i64::from(engine_time)),
        user_name: OctetString::from(user.name.as_bytes().to_vec()),
        authentication_parameters: OctetString::from(vec![0u8; AUTH_PARAMS_LEN]),
        privacy_parameters: OctetString::from(privacy),
    };
    let message = Message {
        version: Integer::from(3),
        global_data: HeaderData {
            message_id: Integer::from(i64::from(message_id)),
            max_size: Integer::from(i64::from(max_size)),
            flags: OctetString::from(vec![flags]),
            security_model: Integer::from(SECURITY_MODEL_USM),
        },
        security_parameters: OctetString::from(
            rasn::ber::encode(&params).map_err(|e| e.to_string())?,
        ),
        scoped_data,
    };
    let mut bytes = rasn::ber::encode(&message).map_err(|e| e.to_string())?;
    let range = auth_params_range(&bytes).ok_or("no msgAuthenticationParameters")?;
    let tag = auth_params(user.auth_key(), &bytes);
    bytes[range].copy_from_slice(&tag);
    Ok(bytes)
}

/// Builds an unauthenticated report (noAuthNoPriv: discovery, unknown user, unsupported
/// security level, wrong digest, decryption error): our engine ID, boots and time, the user
/// name as received, the report PDU in clear.
///
/// # Errors
/// The message does not encode (the BER encoder's message).
pub fn encode_plain_report(
    engine: &Engine,
    engine_time: u32,
    user_name: &[u8],
    message_id: i32,
    max_size: i32,
    pdu: Pdus,
) -> Result<Vec<u8>, String> {
    encode_plain(engine, engine_time, user_name, message_id, max_size, 0, pdu)
}

/// A noAuthNoPriv message with `flags` (a report: 0; a discovery probe: reportable).
pub(crate) fn encode_plain(
    engine: &Engine,
    engine_time: u32,
    user_name: &[u8],
    message_id: i32,
    max_size: i32,
    flags: u8,
    pdu: Pdus,
) -> Result<Vec<u8>, String> {
    let params = USMSecurityParameters {
        authoritative_engine_id: OctetString::from(engine.id.clone()),
        authoritative_engine_boots: Integer::from(i64::from(engine.boots)),
        authoritative_engine_time: Integer::from(i64::from(engine_time)),
        user_name: OctetString::from(user_name.to_vec()),
        authentication_parameters: OctetString::from(Vec::new()),
        privacy_parameters: OctetString::from(Vec::new()),
    };
    let message = Message {
        version: Integer::from(3),
        global_data: HeaderData {
            message_id: Integer::from(i64::from(message_id)),
            max_size: Integer::from(i64::from(max_size)),
            flags: OctetString::from(vec![flags]),
            security_model: Integer::from(SECURITY_MODEL_USM),
        },
        security_parameters: OctetString::from(
            rasn::ber::encode(&params).map_err(|e| e.to_string())?,
        ),
        scoped_data: ScopedPduData::CleartextPdu(ScopedPdu {
            engine_id: OctetString::from(engine.id.clone()),
            name: OctetString::from(Vec::new()),
            data: pdu,
        }),
    };
    rasn::ber::encode(&message).map_err(|e| e.to_string())
}

/// A received SNMPv3 message checked and opened by the USM as the authoritative engine
/// (RFC 3414 §3.2): the user, the plaintext scoped PDU, the header fields the answer needs.
#[derive(Debug)]
pub struct Opened<'a> {
    /// The user it authenticated as.
    pub user: &'a UsmUser,
    /// `msgID`.
    pub message_id: i32,
    /// `msgMaxSize`.
    pub max_size: i32,
    /// The decrypted scoped PDU.
    pub scoped: ScopedPdu,
}

/// Why a message was not opened: a report to send (with the header fields it needs), or
/// nothing (not a USM message, undecodable: a parse error).
#[derive(Debug)]
pub enum Refusal<'a> {
    /// Undecodable or not USM: no answer.
    Parse,
    /// A USM error: counted; a report goes back when the request was reportable.
    Report {
        /// What went wrong.
        error: UsmError,
        /// `msgID`.
        message_id: i32,
        /// `msgMaxSize`.
        max_size: i32,
        /// The `msgUserName` received.
        user_name: Vec<u8>,
        /// The request-id of the PDU, when it could be read (2147483647 otherwise, RFC 3412
        /// §7.1 step 3).
        request_id: i32,
        /// Whether the request's reportableFlag was set.
        reportable: bool,
        /// The user, when the report is to be authenticated (not in time window).
        user: Option<&'a UsmUser>,
    },
}

fn int(i: &Integer) -> Option<i64> {
    i64::try_from(i).ok()
}

fn request_id_of(data: &ScopedPduData) -> i32 {
    match data {
        ScopedPduData::CleartextPdu(s) => pdu_request_id(&s.data),
        ScopedPduData::EncryptedPdu(_) => i32::MAX,
    }
}

/// The request-id of any PDU.
#[must_use]
pub const fn pdu_request_id(pdu: &Pdus) -> i32 {
    match pdu {
        Pdus::GetRequest(p) => p.0.request_id,
        Pdus::GetNextRequest(p) => p.0.request_id,
        Pdus::Response(p) => p.0.request_id,
        Pdus::SetRequest(p) => p.0.request_id,
        Pdus::GetBulkRequest(p) => p.0.request_id,
        Pdus::InformRequest(p) => p.0.request_id,
        Pdus::Trap(p) => p.0.request_id,
        Pdus::Report(p) => p.0.request_id,
    }
}

/// Processes an incoming SNMPv3 message as the authoritative engine (RFC 3414 §3.2, in its
/// order): engine ID (empty or another: `usmStatsUnknownEngineIDs`, which is discovery), user
/// (unknown or not allowed from `source`: `usmStatsUnknownUserNames`), security level
/// (anything but authPriv: `usmStatsUnsupportedSecLevels`), digest (`usmStatsWrongDigests`),
/// time window (`usmStatsNotInTimeWindows`), decryption (`usmStatsDecryptionErrors`). Each
/// refusal is counted in `stats`.
pub fn open<'a>(
    raw: &[u8],
    source: IpAddr,
    engine: &Engine,
    elapsed: Duration,
    users: &'a [UsmUser],
    stats: &mut UsmStats,
) -> Result<Opened<'a>, Refusal<'a>> {
    let message: Message = rasn::ber::decode(raw).map_err(|_| Refusal::Parse)?;
    let header = &message.global_data;
    if int(&header.security_model) != Some(SECURITY_MODEL_USM) {
        return Err(Refusal::Parse);
    }
    let (Some(message_id), Some(max_size)) = (int(&header.message_id), int(&header.max_size))
    else {
        return Err(Refusal::Parse);
    };
    let message_id = i32::try_from(message_id).map_err(|_| Refusal::Parse)?;
    let max_size = i32::try_from(max_size).map_err(|_| Refusal::Parse)?;
    let flags = header.flags.first().copied().ok_or(Refusal::Parse)?;
    let params: USMSecurityParameters = message
        .decode_security_parameters(rasn::Codec::Ber)
        .map_err(|_| Refusal::Parse)?;
    let mut refuse = |error: UsmError, user: Option<&'a UsmUser>| {
        stats.count(error);
        Refusal::Report {
            error,
            message_id,
            max_size,
            user_name: params.user_name.to_vec(),
            request_id: request_id_of(&message.scoped_data),
            reportable: flags & FLAG_REPORTABLE != 0,
            user,
        }
    };
    if params.authoritative_engine_id.as_ref() != engine.id.as_slice() {
        return Err(refuse(UsmError::UnknownEngineId, None));
    }
    let Some(user) = users
        .iter()
        .find(|u| u.name.as_bytes() == params.user_name.as_ref() && u.allows(source))
    else {
        return Err(refuse(UsmError::UnknownUserName, None));
    };
    if flags & (FLAG_AUTH | FLAG_PRIV) != FLAG_AUTH | FLAG_PRIV {
        return Err(refuse(UsmError::UnsupportedSecLevel, None));
    }
    let range = auth_params_range(raw).ok_or(Refusal::Parse)?;
    let mut zeroed = raw.to_vec();
    zeroed[range].fill(0);
    if !verify(user.auth_key(), &zeroed, &params.authentication_parameters) {
        return Err(refuse(UsmError::WrongDigest, None));
    }
    let boots = int(&params.authoritative_engine_boots).and_then(|b| u32::try_from(b).ok());
    let time = int(&params.authoritative_engine_time).and_then(|t| u32::try_from(t).ok());
    let (Some(boots), Some(time)) = (boots, time) else {
        return Err(refuse(UsmError::NotInTimeWindow, Some(user)));
    };
    if !engine.in_time_window(elapsed, boots, time) {
        return Err(refuse(UsmError::NotInTimeWindow, Some(user)));
    }
    let ScopedPduData::EncryptedPdu(cipher) = &message.scoped_data else {
        return Err(refuse(UsmError::DecryptionError, None));
    };
    let scoped = decrypt(
        user.priv_key(),
        boots,
        time,
        &params.privacy_parameters,
        cipher,
    )
    .and_then(|plain| rasn::ber::decode::<ScopedPdu>(&plain).ok());
    let Some(scoped) = scoped else {
        return Err(refuse(UsmError::DecryptionError, None));
    };
    Ok(Opened {
        user,
        message_id,
        max_size,
        scoped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn sources_of_either_family_and_ipv4_mapped_ones() {
        let net = |s: &str| -> IpNet { s.parse().expect("net") };
        let ip = |s: &str| -> IpAddr { s.parse().expect("ip") };
        let nets = [net("10.0.0.0/8"), net("2001:db8::/32"), net("::1/128")];
        for allowed in ["10.1.2.3", "::ffff:10.1.2.3", "2001:db8::7", "::1"] {
            assert!(source_allowed(&nets, ip(allowed)), "{allowed}");
        }
        for refused in [
            "11.0.0.1",
            "::ffff:11.0.0.1",
            "2001:db9::1",
            "::2",
            "127.0.0.1",
        ] {
            assert!(!source_allowed(&nets, ip(refused)), "{refused}");
        }
        // A list written with a mapped network matches the mapped form as it is.
        assert!(source_allowed(
            &[net("::ffff:10.0.0.0/104")],
            ip("::ffff:10.9.9.9")
        ));
        assert!(source_allowed(&[], ip("2001:db8::1")), "no list: everyone");
    }

    /// RFC 3414 §A.3.2: password "maplesyrup", engine ID 00..02.
    #[test]
    fn rfc3414_a32_sha_vectors() {
        let ku = password_to_key(b"maplesyrup").expect("key");
        assert_eq!(ku.to_vec(), hex("9fb5cc0381497b3793528939ff788d5d79145211"));
        let engine = hex("000000000000000000000002");
        assert_eq!(
            localize(&ku, &engine).to_vec(),
            hex("6695febc9288e36282235fc7151f128497b38f3f")
        );
        assert_eq!(
            localized_key(b"maplesyrup", &engine).expect("key"),
            localize(&ku, &engine)
        );
    }

    /// NIST SP 800-38A F.3.13 (CFB128-AES128), with the IV spelt as RFC 3826's boots ‖ time
    /// ‖ salt; and a round trip of a message that is not a whole number of blocks.
    #[test]
    fn aes_cfb_matches_the_nist_vector_and_round_trips() {
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c")
            .try_into()
            .expect("16");
        let salt: [u8; 8] = hex("08090a0b0c0d0e0f").try_into().expect("8");
        let plain = hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
        let cipher = encrypt(&key, 0x0001_0203, 0x0405_0607, &salt, &plain);
        assert_eq!(
            cipher,
            hex("3b3fd92eb72dad20333449f8e83cfb4ac8a64537a0b3a93fcde3cdad9f1ce58b")
        );
        let odd = b"a scoped PDU of 37 octets, not 48 ok".to_vec();
        let c = encrypt(&key, 7, 1234, &salt, &odd);
        assert_eq!(c.len(), odd.len());
        assert_ne!(c, odd);
        assert_eq!(decrypt(&key, 7, 1234, &salt, &c), Some(odd.clone()));
        // Another time is another IV: not the plaintext.
        assert_ne!(decrypt(&key, 7, 1235, &salt, &c), Some(odd));
        assert_eq!(decrypt(&key, 7, 1234, &salt[..7], &c), None, "a short salt");
    }

    /// The time window on a virtual clock (RFC 3414 §3.2 step 7a).
    #[test]
    fn time_window() {
        let e = Engine {
            id: vec![0x80, 0, 0x0c, 0xbd, 4, b'x'],
            boots: 5,
        };
        let at = Duration::from_secs(1_000);
        assert_eq!(Engine::time(at), 1_000);
        assert_eq!(Engine::time(Duration::from_millis(999)), 0);
        assert!(e.in_time_window(at, 5, 1_000));
        assert!(e.in_time_window(at, 5, 850));
        assert!(!e.in_time_window(at, 5, 849));
        assert!(e.in_time_window(at, 5, 1_150));
        assert!(!e.in_time_window(at, 5, 1_151));
        assert!(!e.in_time_window(at, 4, 1_000), "another boot");
        // The clock moves on: the same message is late 151 s later.
        assert!(!e.in_time_window(at + Duration::from_secs(151), 5, 1_000));
        let stuck = Engine {
            boots: MAX_BOOTS,
            ..e
        };
        assert!(!stuck.in_time_window(at, MAX_BOOTS, 1_000));
    }

    #[test]
    fn versions_and_auth_params_are_found() {
        let e = Engine {
            id: hex("80000cbd0473626361"),
            boots: 3,
        };
        let user =
            UsmUser::new("nms", b"authpass1", b"privpass1", &e.id, Vec::new()).expect("user");
        assert!(format!("{user:?}").contains("nms"));
        let pdu = Pdus::Report(rasn_snmp::v2::Report(rasn_snmp::v2::Pdu {
            request_id: 1,
            error_status: 0,
            error_index: 0,
            variable_bindings: Vec::new(),
        }));
        let bytes = encode_auth_priv(&e, 10, &user, 77, 1500, 9, pdu, false).expect("encode");
        assert_eq!(message_version(&bytes), Some(3));
        let range = auth_params_range(&bytes).expect("found");
        assert_eq!(range.len(), AUTH_PARAMS_LEN);
        let mut zeroed = bytes.clone();
        zeroed[range.clone()].fill(0);
        assert!(verify(user.auth_key(), &zeroed, &bytes[range]));
        assert_eq!(message_version(b"\x30\x03\x02\x01\x01"), Some(1));
        assert_eq!(message_version(b"garbage"), None);
        assert_eq!(auth_params_range(b"\x30\x03\x02\x01\x01"), None);
    }

    #[test]
    fn short_passwords_are_refused() {
        assert_eq!(password_to_key(b"1234567"), Err(ShortPassword));
        assert!(password_to_key(b"12345678").is_ok());
    }

    #[test]
    fn digests_verify_and_wrong_ones_do_not() {
        let key = localized_key(b"maplesyrup", &hex("000000000000000000000002")).expect("key");
        let other = localized_key(b"maplesyrupX", &hex("000000000000000000000002")).expect("key");
        let message = b"a whole message with zeroed auth params".to_vec();
        let tag = auth_params(&key, &message);
        assert!(verify(&key, &message, &tag));
        assert!(!verify(&other, &message, &tag), "another password");
        let mut tampered = message.clone();
        tampered[0] ^= 1;
        assert!(!verify(&key, &tampered, &tag), "another message");
        assert!(!verify(&key, &message, &tag[..11]), "a short digest");
        // HMAC-SHA-1 keyed with the localized key, truncated to 96 bits.
        let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(&key).expect("key");
        mac.update(&message);
        assert_eq!(tag[..], mac.finalize().into_bytes()[..12]);
    }
}
