//! The configuration lifecycle: `show running-config` and `show configuration`,
//! `verify-config`, `save-config` (atomic, with a backup), `activate-config`, and a push from
//! the pair's active; one activation at a time.
//!
//! What is bound at start (SIP interfaces, steering pools, worker groups, the pair's channels)
//! stays until a reboot: an activation runs on it ([`sbc_config::diff::on_bound_interfaces`])
//! and names what waits ([`sbc_config::diff::restart_needed`]).

use std::fmt::Write as _;

use sbc_config::acli::{render_config, LifecycleCommand};
use sbc_config::diff::{on_bound_interfaces, restart_needed};
use sbc_config::Config;
use serde_json::json;
use tracing::info;

use crate::control::context::{ConfigState, Console};
use crate::control::show::Outcome;
use crate::settings;

impl Console {
    pub(crate) async fn lifecycle(&self, cmd: LifecycleCommand, json: bool) -> Outcome {
        match cmd {
            LifecycleCommand::ShowRunningConfig => {
                let c = self.snapshot()?;
                Ok((
                    render_config(&c.running),
                    json.then(|| c.running.to_masked_json()),
                ))
            }
            LifecycleCommand::ShowConfiguration => {
                let c = self.snapshot()?;
                Ok((
                    render_config(&c.editing),
                    json.then(|| c.editing.to_masked_json()),
                ))
            }
            LifecycleCommand::VerifyConfig => {
                let c = self.snapshot()?;
                c.editing.validate().map_err(|e| e.to_string())?;
                Ok((
                    "configuration is valid\n".into(),
                    json.then(|| json!({"valid": true})),
                ))
            }
            LifecycleCommand::SaveConfig => {
                let c = self.snapshot()?;
                let path = c.path.ok_or(
                    "no configuration file: start the node with --config FILE to save (the file \
                     may not exist yet)",
                )?;
                c.editing.save_atomic(&path).map_err(|e| e.to_string())?;
                info!(path = %path.display(), "configuration saved");
                Ok((
                    format!(
                        "saved to {} (previous version kept as {})\n",
                        path.display(),
                        Config::backup_path(&path).display()
                    ),
                    json.then(|| json!({"saved": path})),
                ))
            }
            LifecycleCommand::ActivateConfig => self.activate(json).await,
        }
    }

    fn snapshot(&self) -> Result<ConfigState, String> {
        self.config
            .lock()
            .map(|c| c.clone())
            .map_err(|_| "configuration lock poisoned".to_owned())
    }

    /// A configuration pushed by the pair's active: its pushable part over this node's own
    /// node-local settings (`redundancy-config`, hostname, lab mode; a push naming one is
    /// refused whole), saved (when the node has a file) and activated.
    ///
    /// # Errors
    /// Why the push was refused; nothing was changed.
    pub async fn apply_pushed(&self, toml: &str) -> Result<(), String> {
        // Read, merged, saved and applied under the lock: an operator's activation on this
        // node in the meantime is neither undone nor overwritten in the file.
        let _one_at_a_time = self.one_activation_at_a_time();
        let c = self.snapshot()?;
        let cfg = c.running.with_push(toml).map_err(|e| e.to_string())?;
        if let Some(path) = &c.path {
            cfg.save_atomic(path).map_err(|e| e.to_string())?;
        }
        if let Ok(mut st) = self.config.lock() {
            st.editing = cfg.clone();
        }
        self.apply_locked(cfg).map(|restart| {
            info!(
                ?restart,
                "configuration from the active saved and activated"
            );
        })
    }

    /// Holds [`Console::activation`].
    fn one_activation_at_a_time(&self) -> std::sync::MutexGuard<'_, ()> {
        self.activation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `activate-config`: the saved file becomes the running configuration.
    async fn activate(&self, json: bool) -> Outcome {
        let _one_at_a_time = self.one_activation_at_a_time();
        let c = self.snapshot()?;
        let path = c
            .path
            .ok_or("no configuration file: nothing saved to activate (start with --config FILE)")?;
        let saved = Config::load(&path).map_err(|e| e.to_string())?;
        let restart = self.apply_locked(saved)?;
        info!(restart_needed = ?restart, "configuration activated");
        let mut out = String::from("configuration activated\n");
        if restart.is_empty() {
            out.push_str("all changes are in effect\n");
        } else {
            out.push_str("these changes take effect after a restart (reboot):\n");
            for r in &restart {
                let _ = writeln!(out, "  {r}");
            }
        }
        Ok((
            out,
            json.then(|| json!({"activated": true, "restart_needed": restart})),
        ))
    }

    /// Makes `cfg` the running configuration; returns the changes that need a restart.
    ///
    /// What is bound at start stays as it is: the engine keeps addressing the SIP interfaces
    /// it listens on (its Via, Contact and Record-Route ports), so a changed `sip-interface`
    /// waits for a restart instead of being advertised while nothing listens there.
    /// The caller holds [`Console::activation`].
    fn apply_locked(&self, cfg: Config) -> Result<Vec<String>, String> {
        let restart = restart_needed(&self.started_config, &cfg);
        let effective = on_bound_interfaces(&self.started_config, &cfg)?;
        let ecfg = settings::engine_config(&effective).map_err(|e| e.to_string())?;
        // New management addresses are bound before anything changes: one that is taken
        // refuses the activation.
        let (metrics, snmp_agent) = self
            .management
            .lock()
            .map_err(|_| "management sockets lock poisoned")?
            .bind_new(&cfg)?;
        // Certificates first: files that do not load refuse the whole activation, unchanged.
        let rotated = self
            .node
            .tls()
            .load(&settings::tls(&effective))
            .map_err(|e| e.to_string())?;
        if !rotated.is_empty() {
            info!(profiles = ?rotated, "TLS certificates rotated: new handshakes present them");
        }
        self.node.reconfigure(&ecfg);
        self.node
            .reconfigure_registrations(&settings::registration_settings(&effective));
        self.node.reconfigure_edge(&settings::live(&effective));
        self.subsystems.reconfigure(&effective, &cfg);
        if let Ok(mut m) = self.management.lock() {
            // Both replaced, None included: a socket bound for an address given up since is
            // closed here.
            m.metrics = metrics;
            m.snmp_agent = snmp_agent;
        }
        if let Ok(mut st) = self.config.lock() {
            st.running = cfg;
        }
        Ok(restart)
    }
}
