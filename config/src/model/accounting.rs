//! Issue 31's accounting element, with Oracle's names: `account-config` and its
//! `account-server`s (RADIUS accounting, RFC 2866), the local CSV files, and our spool's
//! bounds. This module only declares: what the records are and how they are delivered is
//! `sbc-accounting`'s and the node's. The keys' defaults and ranges are declared once in
//! [`crate::keys`].

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{quoted, ConfigError};
use crate::keys::{account_config, account_server};

keyword_enum! {
    /// `account-config` `state`: whether calls are accounted.
    AccountState, key "state", default Disabled {
        /// Records are generated, spooled and delivered.
        Enabled = "enabled",
        /// No record.
        Disabled = "disabled",
    }
}

keyword_enum! {
    /// `account-config` `strategy` (Oracle's words, without fastestrtt and fewestpending): how
    /// records are spread over the `account-server`s.
    AccountStrategy, key "strategy", default Hunt {
        /// Every record to the first server that is up.
        Hunt = "hunt",
        /// The current server until it fails, then the next one, which stays current.
        Failover = "failover",
        /// Records spread over the servers that are up, in turn.
        Roundrobin = "roundrobin",
    }
}

keyword_enum! {
    /// `account-config` `file-output`: whether records are also written to local CSV files.
    FileOutput, key "file-output", default Disabled {
        /// One CSV line per record in `file-path`.
        Enabled = "enabled",
        /// No file.
        Disabled = "disabled",
    }
}

keyword_enum! {
    /// `account-config` `generate-start`: when a call's Start record is generated.
    GenerateStart, key "generate-start", default Ok {
        /// No Start: only the Stop.
        None = "none",
        /// When the INVITE arrives.
        Invite = "invite",
        /// When the call is answered (the 2xx relayed to the caller).
        Ok = "ok",
    }
}

keyword_enum! {
    /// `account-config` `generate-interim`: what generates an Interim-Update.
    GenerateInterim, key "generate-interim", default ReinviteResponse {
        /// Nothing.
        None = "none",
        /// A re-INVITE of the call answered 2xx.
        ReinviteResponse = "reinvite-response",
    }
}

keyword_enum! {
    /// `account-config` `spool-full-action` (ours): what a full spool does to calls.
    SpoolFullAction, key "spool-full-action", default KeepCalls {
        /// Calls go on; each record that could not be kept is counted.
        KeepCalls = "keep-calls",
        /// New calls are refused 503 until the spool has room again.
        RefuseCalls = "refuse-calls",
    }
}

keyword_enum! {
    /// `account-server` `transport` (ours: Oracle sends RADIUS over UDP only): how records
    /// reach the server.
    AccountTransport, key "transport", default Udp {
        /// RADIUS over UDP (RFC 2866), one datagram per request.
        Udp = "udp",
        /// RADIUS over TLS (RFC 6614, "RadSec"): one TCP connection, many requests per write,
        /// the server's certificate verified with `tls-profile`.
        Tls = "tls",
    }
}

/// `account-config`: call detail records to RADIUS accounting servers and local files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AccountConfig {
    /// `state`: whether calls are accounted.
    pub state: AccountState,
    /// `strategy`: how records are spread over the servers.
    pub strategy: AccountStrategy,
    /// `max-wait-failover`: records sent to one server and not answered yet, at most.
    pub max_wait_failover: u32,
    /// `file-output`: local CSV files too.
    pub file_output: FileOutput,
    /// `file-path`: the directory of the CSV files.
    pub file_path: String,
    /// `max-file-size`: bytes after which a CSV file is closed and a new one started.
    pub max_file_size: u64,
    /// `max-files`: closed CSV files kept; the oldest is deleted beyond.
    pub max_files: u32,
    /// `file-rotate-time`: minutes after which a CSV file is closed (0: by size only).
    pub file_rotate_time: u32,
    /// `generate-start`: when the Start is generated.
    pub generate_start: GenerateStart,
    /// `generate-interim`: what generates an Interim-Update.
    pub generate_interim: GenerateInterim,
    /// `intermediate-period`: seconds between periodic Interim-Updates (0: none).
    pub intermediate_period: u32,
    /// `spool-path` (ours): the spool's directory.
    pub spool_path: String,
    /// `spool-max-size` (ours): the spool's bound, MiB.
    pub spool_max_size: u32,
    /// `spool-full-action` (ours): what a full spool does to calls.
    pub spool_full_action: SpoolFullAction,
    /// `account-server` (`[[account-config.account-server]]`): the RADIUS accounting servers,
    /// in their order of preference. Default none.
    #[serde(rename = "account-server")]
    pub account_servers: Vec<AccountServer>,
}

impl Default for AccountConfig {
    fn default() -> Self {
        Self {
            state: AccountState::DEFAULT,
            strategy: AccountStrategy::DEFAULT,
            max_wait_failover: const { account_config::MAX_WAIT_FAILOVER.u32() },
            file_output: FileOutput::DEFAULT,
            file_path: account_config::FILE_PATH.text().to_owned(),
            max_file_size: const { account_config::MAX_FILE_SIZE.int() },
            max_files: const { account_config::MAX_FILES.u32() },
            file_rotate_time: const { account_config::FILE_ROTATE_TIME.u32() },
            generate_start: GenerateStart::DEFAULT,
            generate_interim: GenerateInterim::DEFAULT,
            intermediate_period: const { account_config::INTERMEDIATE_PERIOD.u32() },
            spool_path: account_config::SPOOL_PATH.text().to_owned(),
            spool_max_size: const { account_config::SPOOL_MAX_SIZE.u32() },
            spool_full_action: SpoolFullAction::DEFAULT,
            account_servers: Vec::new(),
        }
    }
}

impl AccountConfig {
    /// Whether calls are accounted (`state = "enabled"`).
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.state == AccountState::Enabled
    }

    /// The servers records are sent to (those enabled), in order.
    pub fn servers(&self) -> impl Iterator<Item = &AccountServer> {
        self.account_servers
            .iter()
            .filter(|s| s.state == AccountState::Enabled)
    }
}

/// `account-server`, a sub-element of `account-config`: one RADIUS accounting server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AccountServer {
    /// `hostname`: the server's IP address (IPv4 or IPv6; no DNS name).
    pub hostname: IpAddr,
    /// `port`: its UDP port (1813), or its TCP port with `transport tls` (2083, RFC 6614).
    pub port: u16,
    /// `state`: whether records are sent to it.
    pub state: AccountState,
    /// `transport` (ours): RADIUS over UDP or over TLS.
    pub transport: AccountTransport,
    /// `tls-profile`: with `transport tls`, the CAs that verify the server's certificate, and
    /// the certificate this node presents (RadSec servers ask for one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_profile: Option<String>,
    /// `tls-server-name`: with `transport tls`, the name the server's certificate must carry
    /// (default its IP address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// `secret`: the RADIUS shared secret. Masked in `show`, the JSON and `Debug`.
    pub secret: String,
    /// `min-round-trip`: ms; an unanswered record is sent again after four times this (at
    /// least a second), doubling.
    pub min_round_trip: u32,
    /// `max-inactivity`: seconds without an answer after which the server is taken as failed.
    pub max_inactivity: u32,
    /// `restart-delay`: seconds a failed server is left alone before it is tried again.
    pub restart_delay: u32,
}

impl Default for AccountServer {
    fn default() -> Self {
        Self {
            hostname: const { account_server::HOSTNAME.ip() },
            port: const { account_server::PORT.u16() },
            state: AccountState::Enabled,
            transport: AccountTransport::DEFAULT,
            tls_profile: None,
            tls_server_name: None,
            secret: String::new(),
            min_round_trip: const { account_server::MIN_ROUND_TRIP.u32() },
            max_inactivity: const { account_server::MAX_INACTIVITY.u32() },
            restart_delay: const { account_server::RESTART_DELAY.u32() },
        }
    }
}

impl AccountServer {
    /// Its address and port.
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        SocketAddr::new(self.hostname, self.port)
    }
}

impl fmt::Debug for AccountServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = if self.secret.is_empty() {
            ""
        } else {
            crate::MASK
        };
        f.debug_struct("AccountServer")
            .field("hostname", &self.hostname)
            .field("port", &self.port)
            .field("state", &self.state)
            .field("transport", &self.transport)
            .field("tls_profile", &self.tls_profile)
            .field("tls_server_name", &self.tls_server_name)
            .field("secret", &secret)
            .field("min_round_trip", &self.min_round_trip)
            .field("max_inactivity", &self.max_inactivity)
            .field("restart_delay", &self.restart_delay)
            .finish()
    }
}
