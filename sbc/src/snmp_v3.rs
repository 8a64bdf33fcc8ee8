//! The node as an SNMPv3 engine: its `snmpEngineBoots`, persisted next to the configuration
//! file and incremented at each start; its clock (the time since start); and the USM users'
//! localized keys, computed once per configuration (each key hashes a megabyte: off the async
//! runtime, or once at start) and shared by the agent and the trap sink. No password or key
//! is ever logged (`UsmUser`'s `Debug` prints neither).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use sbc_snmp::trap::TrapSecurity;
use sbc_snmp::usm::{Engine, UsmUser, MAX_BOOTS};
use sbc_snmp::TrapReceiver;
use tracing::warn;

/// An SNMPv3 USM user (`snmp-user-entry`): SHA authentication and AES-128 privacy with these
/// passwords. `Debug` prints neither password.
#[derive(Clone, PartialEq, Eq)]
pub struct UserSettings {
    /// `user-name`.
    pub name: String,
    /// `auth-password`.
    pub auth_password: String,
    /// `priv-password`.
    pub priv_password: String,
    /// The sources it may be used from (empty: any).
    pub sources: Vec<IpNet>,
}

impl std::fmt::Debug for UserSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSettings")
            .field("name", &self.name)
            .field("auth_password", &"********")
            .field("priv_password", &"********")
            .field("sources", &self.sources)
            .finish()
    }
}

/// A trap receiver as configured: v2c, or v3 as the named user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiverSettings {
    /// Where traps go, their community and filter (`v3` unset: this engine fills it).
    pub receiver: TrapReceiver,
    /// SNMPv3 as this `snmp-user-entry`; `None`: v2c.
    pub v3_user: Option<String>,
}

/// The node's SNMP settings: its engine ID, its USM users, its trap receivers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnmpSettings {
    /// `snmpEngineID` (`snmp-engine-id`, or derived from the host name).
    pub engine_id: Vec<u8>,
    /// The USM users.
    pub users: Vec<UserSettings>,
    /// The trap receivers.
    pub receivers: Vec<ReceiverSettings>,
}

/// What the keys were computed from: the users and the engine ID.
type KeySource = (Vec<UserSettings>, Vec<u8>);

/// The engine state of one run of the node.
#[derive(Debug)]
pub struct SnmpV3 {
    boots: u32,
    started: Instant,
    keys: Mutex<Option<(KeySource, Arc<Vec<UsmUser>>)>>,
}

/// Where the boots of the configuration at `config` are kept: `<file>.snmp-boots` beside it.
#[must_use]
pub fn boots_path(config: &Path) -> PathBuf {
    let mut name = config.file_name().unwrap_or_default().to_os_string();
    name.push(".snmp-boots");
    config.with_file_name(name)
}

/// Reads the boots at `path` (none or unreadable: 0), adds one (at most [`MAX_BOOTS`], where
/// RFC 3414 §2.2.2 latches it) and writes it back atomically (a temporary file renamed over).
///
/// # Errors
/// The new value cannot be written; the caller still runs with it.
pub fn next_boots(path: &Path) -> (u32, std::io::Result<()>) {
    let old = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let boots = old.saturating_add(1).clamp(1, MAX_BOOTS);
    let tmp = path.with_extension("snmp-boots.tmp");
    let written =
        std::fs::write(&tmp, format!("{boots}\n")).and_then(|()| std::fs::rename(&tmp, path));
    (boots, written)
}

fn compute(entries: &[UserSettings], engine_id: &[u8]) -> Vec<UsmUser> {
    entries
        .iter()
        .filter_map(|u| {
            // Short passwords were refused by validation; any left are skipped.
            UsmUser::new(
                &u.name,
                u.auth_password.as_bytes(),
                u.priv_password.as_bytes(),
                engine_id,
                u.sources.clone(),
            )
            .ok()
        })
        .collect()
}

impl SnmpV3 {
    /// Starts the engine of a node whose configuration is at `config` (none: boots 1, not
    /// kept).
    #[must_use]
    pub fn start(config: Option<&Path>) -> Arc<Self> {
        let boots = match config {
            None => 1,
            Some(path) => {
                let path = boots_path(path);
                let (boots, written) = next_boots(&path);
                if let Err(e) = written {
                    warn!(path = %path.display(), error = %e, "snmpEngineBoots not saved");
                }
                boots
            }
        };
        Arc::new(Self {
            boots,
            started: Instant::now(),
            keys: Mutex::new(None),
        })
    }

    /// `snmpEngineBoots` of this run.
    #[must_use]
    pub const fn boots(&self) -> u32 {
        self.boots
    }

    /// When the engine started (`snmpEngineTime` counts from here).
    #[must_use]
    pub const fn started(&self) -> Instant {
        self.started
    }

    /// The time since start, the engine's clock.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The engine of `settings`: its engine ID, this run's boots.
    #[must_use]
    pub fn engine(&self, settings: &SnmpSettings) -> Engine {
        Engine {
            id: settings.engine_id.clone(),
            boots: self.boots,
        }
    }

    fn cached(&self, source: &KeySource) -> Option<Arc<Vec<UsmUser>>> {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.as_ref()
            .filter(|(s, _)| s == source)
            .map(|(_, users)| Arc::clone(users))
    }

    fn store(&self, source: KeySource, users: Vec<UsmUser>) -> Arc<Vec<UsmUser>> {
        let users = Arc::new(users);
        *self.keys.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((source, Arc::clone(&users)));
        users
    }

    /// The users of `settings` with their keys when the cache holds them, or when there are
    /// none (nothing to compute).
    #[must_use]
    pub fn users_if_ready(&self, settings: &SnmpSettings) -> Option<Arc<Vec<UsmUser>>> {
        if settings.users.is_empty() {
            return Some(Arc::new(Vec::new()));
        }
        self.cached(&key_source(settings))
    }

    /// The users of `settings` with their keys, computed here when the cache does not hold
    /// them: for the start of the node, before it serves.
    pub fn users_now(&self, settings: &SnmpSettings) -> Arc<Vec<UsmUser>> {
        let source = key_source(settings);
        if let Some(users) = self.cached(&source) {
            return users;
        }
        let users = compute(&source.0, &source.1);
        self.store(source, users)
    }

    /// The users of `settings` with their keys, computed on a blocking thread when the cache
    /// does not hold them.
    pub async fn users(&self, settings: &SnmpSettings) -> Arc<Vec<UsmUser>> {
        let source = key_source(settings);
        if let Some(users) = self.cached(&source) {
            return users;
        }
        let (entries, id) = source.clone();
        let users = tokio::task::spawn_blocking(move || compute(&entries, &id))
            .await
            .unwrap_or_default();
        self.store(source, users)
    }

    /// The sink's receivers of `settings`: the v2c ones as they are, the v3 ones with this
    /// engine and their user's keys (one whose user is missing is left out: validation refuses
    /// it).
    #[must_use]
    pub fn trap_receivers(&self, settings: &SnmpSettings, users: &[UsmUser]) -> Vec<TrapReceiver> {
        let engine = self.engine(settings);
        settings
            .receivers
            .iter()
            .filter_map(|c| {
                let mut r = c.receiver.clone();
                if let Some(name) = &c.v3_user {
                    let user = users.iter().find(|u| &u.name == name)?;
                    r.v3 = Some(Arc::new(TrapSecurity {
                        engine: engine.clone(),
                        user: user.clone(),
                    }));
                }
                Some(r)
            })
            .collect()
    }
}

/// The cache key of `settings`' users.
fn key_source(settings: &SnmpSettings) -> KeySource {
    (settings.users.clone(), settings.engine_id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boots_count_up_and_are_written_atomically() {
        let dir = std::env::temp_dir().join(format!("sbc-boots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = boots_path(&dir.join("sbc-a.toml"));
        assert!(path.ends_with("sbc-a.toml.snmp-boots"));
        let _ = std::fs::remove_file(&path);
        assert_eq!(next_boots(&path).0, 1);
        assert_eq!(next_boots(&path).0, 2);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "2\n");
        std::fs::write(&path, "garbage").expect("write");
        assert_eq!(next_boots(&path).0, 1, "unreadable: starts again");
        std::fs::write(&path, format!("{MAX_BOOTS}")).expect("write");
        assert_eq!(next_boots(&path).0, MAX_BOOTS, "latched");
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_config_and_the_usm_agree_on_the_shortest_password() {
        assert_eq!(sbc_config::MIN_SNMP_PASSWORD, sbc_snmp::usm::MIN_PASSWORD);
    }
}
