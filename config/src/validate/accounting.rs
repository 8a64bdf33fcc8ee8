//! `account-config` and its `account-server`s: ranges, the servers' addresses and secrets, the
//! paths, and something to send records to when it is on.

use std::collections::HashMap;

use super::check;
use crate::error::{quoted, ConfigError};
use crate::keys::{account_config, account_server};
use crate::model::{AccountConfig, AccountServer, AccountTransport, FileOutput, TlsProfile};

/// The longest RADIUS shared secret accepted (FreeRADIUS and most servers take up to 128).
const MAX_SECRET: usize = 128;

/// `account-config`: every range; `file-path` and `spool-path` absolute; each server an IP
/// address that can be sent to, on a port, once, with a secret of 1 to 128 bytes; when
/// enabled, at least one enabled server or `file-output` enabled.
pub(super) fn account_config(
    a: &AccountConfig,
    profiles: &[TlsProfile],
) -> Result<(), ConfigError> {
    let at = "account-config";
    check(at, &account_config::MAX_WAIT_FAILOVER, a.max_wait_failover)?;
    check(at, &account_config::MAX_FILE_SIZE, a.max_file_size)?;
    check(at, &account_config::MAX_FILES, a.max_files)?;
    check(at, &account_config::FILE_ROTATE_TIME, a.file_rotate_time)?;
    check(
        at,
        &account_config::INTERMEDIATE_PERIOD,
        a.intermediate_period,
    )?;
    check(at, &account_config::SPOOL_MAX_SIZE, a.spool_max_size)?;
    for (key, path) in [("file-path", &a.file_path), ("spool-path", &a.spool_path)] {
        if !path.starts_with('/') {
            return Err(ConfigError::invalid(
                format!("{at}.{key}"),
                quoted(path),
                "must be an absolute path",
                "an absolute directory, e.g. \"/var/lib/sbc/accounting\"",
            ));
        }
    }
    let mut seen = HashMap::new();
    for (i, s) in a.account_servers.iter().enumerate() {
        let key = |field: &str| format!("{at}.account-server[{i}].{field}");
        let s_at = format!("{at}.account-server[{i}]");
        check(&s_at, &account_server::PORT, s.port)?;
        check(&s_at, &account_server::MIN_ROUND_TRIP, s.min_round_trip)?;
        check(&s_at, &account_server::MAX_INACTIVITY, s.max_inactivity)?;
        check(&s_at, &account_server::RESTART_DELAY, s.restart_delay)?;
        if s.port == 0 {
            return Err(ConfigError::invalid(
                key("port"),
                "0",
                "port 0 is not allowed",
                "the server's UDP port, 1813 by default",
            ));
        }
        if s.hostname.is_unspecified() || s.hostname.is_multicast() {
            return Err(ConfigError::invalid(
                key("hostname"),
                quoted(&s.hostname.to_string()),
                "not an address records can be sent to",
                "the server's unicast IP address, e.g. 192.0.2.50 or 2001:db8::50",
            ));
        }
        if s.secret.is_empty() || s.secret.len() > MAX_SECRET {
            return Err(ConfigError::invalid(
                key("secret"),
                if s.secret.is_empty() {
                    "\"\""
                } else {
                    crate::MASK
                },
                format!("a RADIUS shared secret is 1 to {MAX_SECRET} bytes"),
                "the secret the server has for this node",
            ));
        }
        server_tls(s, profiles, key)?;
        if let Some(j) = seen.insert(s.address(), i) {
            return Err(ConfigError::invalid(
                key("hostname"),
                quoted(&s.address().to_string()),
                format!("{} is already account-server[{j}]", s.address()),
                "an address:port not used by another account-server",
            ));
        }
    }
    if a.enabled() && a.servers().next().is_none() && a.file_output != FileOutput::Enabled {
        // Named at the servers, not at `state`: the ACLI refuses a value at once only for a
        // rule on that attribute alone, and this one is checked at `done`.
        return Err(ConfigError::invalid(
            format!("{at}.account-server"),
            "none enabled",
            "state = \"enabled\" and records would go nowhere: file-output is disabled too",
            "an account-server, or file-output = \"enabled\", or state = \"disabled\"",
        ));
    }
    Ok(())
}

/// A server's TLS settings: with `transport tls`, a `tls-profile` that exists and has trusted
/// CAs, and a `tls-server-name` that is a certificate name; with `udp`, neither.
fn server_tls(
    s: &AccountServer,
    profiles: &[TlsProfile],
    key: impl Fn(&str) -> String,
) -> Result<(), ConfigError> {
    if s.transport == AccountTransport::Udp {
        for (field, value) in [
            ("tls-profile", &s.tls_profile),
            ("tls-server-name", &s.tls_server_name),
        ] {
            if let Some(v) = value {
                return Err(ConfigError::invalid(
                    key(field),
                    quoted(v),
                    "the server is reached over udp: no TLS to use it for",
                    format!("transport = \"tls\", or no {field}"),
                ));
            }
        }
        return Ok(());
    }
    let Some(name) = &s.tls_profile else {
        return Err(ConfigError::invalid(
            key("tls-profile"),
            "none",
            "a server reached over TLS is verified with a tls-profile's trusted CAs",
            "the name of a tls-profile with trusted-ca-certificates",
        ));
    };
    let profile = super::profile_ref(key("tls-profile"), name, profiles)?;
    if profile.trusted_ca_certificates.is_empty() {
        return Err(ConfigError::invalid(
            key("tls-profile"),
            quoted(name),
            "the profile has no trusted-ca-certificates to verify the server's certificate with",
            "a tls-profile with trusted-ca-certificates",
        ));
    }
    if let Some(sn) = s
        .tls_server_name
        .as_ref()
        .filter(|n| !super::is_cert_name(n))
    {
        return Err(ConfigError::invalid(
            key("tls-server-name"),
            quoted(sn),
            "not a DNS name or an IP address",
            "a DNS name (radius.example.com) or an IP address",
        ));
    }
    Ok(())
}
