//! The operational commands: one file per group of `show` commands, each formatting a typed
//! status snapshot ([`crate::status`]) as text and as JSON; the node actions (`reboot`,
//! `clear-alarm`, `clear-deny`, `notify berpd force`, `lab ballast`) in [`actions`].
//!
//! Every view reads a snapshot taken for it; none reads another view's output.

mod access;
mod accounting;
pub mod actions;
mod alarms;
mod dialogs;
mod health;
mod media;
mod memory;
mod redundancy;
mod registrations;
mod session_agents;
mod sip_stats;
mod sip_trace;
mod subscriptions;
mod tls;
mod workers;

use serde_json::Value;

use crate::control::context::Console;
use crate::control::oper::OperCommand;
use crate::status;

/// The outcome of a command: text and, when asked for, JSON; or why it was refused.
pub type Outcome = Result<(String, Option<Value>), String>;

/// Text and, when `json`, the JSON view of the same snapshot.
fn view<T: ?Sized>(
    snapshot: &T,
    json: bool,
    text: fn(&T) -> String,
    to_json: fn(&T) -> Value,
) -> Outcome {
    Ok((text(snapshot), json.then(|| to_json(snapshot))))
}

impl Console {
    /// Executes an operational command (`show ...`, `display-alarms`, the node actions) as a
    /// session asked for it.
    pub async fn operational(&self, cmd: OperCommand, json: bool) -> Outcome {
        let subsystems = &self.subsystems;
        match cmd {
            OperCommand::ShowSipStats => {
                let s = status::sip(&self.node).await;
                view(&s, json, sip_stats::text, sip_stats::json)
            }
            OperCommand::ShowSessionAgents => {
                let rows = status::session_agents(&self.node);
                view(
                    rows.as_slice(),
                    json,
                    session_agents::text,
                    session_agents::json,
                )
            }
            OperCommand::ShowLocalRouting => {
                let rows = status::route_files(&self.node, self.subsystems.pair.as_deref());
                view(
                    rows.as_slice(),
                    json,
                    session_agents::route_files_text,
                    session_agents::route_files_json,
                )
            }
            OperCommand::ShowWorkers => {
                let groups = self.node.worker_groups();
                view(groups.as_slice(), json, workers::text, workers::json)
            }
            OperCommand::ShowDialogs => {
                let dialogs = self
                    .node
                    .snapshots(true)
                    .await
                    .into_iter()
                    .flat_map(|s| s.dialogs)
                    .collect();
                let calls = self
                    .node
                    .media_report()
                    .map(|m| m.calls)
                    .unwrap_or_default();
                let v = dialogs::DialogsView::new(dialogs, calls);
                view(&v, json, dialogs::text, dialogs::json)
            }
            OperCommand::ShowRegistrations => {
                let r = status::registrations(&self.node);
                view(&r, json, registrations::text, registrations::json)
            }
            OperCommand::ShowSubscriptions => {
                let r = status::subscriptions(&self.node).await;
                view(&r, json, subscriptions::text, subscriptions::json)
            }
            OperCommand::ClearRegistration { aor } => actions::clear_registration(self, &aor, json),
            OperCommand::ShowMedia => {
                let m = self.node.media_report();
                let text = m
                    .as_ref()
                    .map_or(media::NOT_ANCHORED.to_owned(), media::text);
                Ok((text, json.then(|| media::json(m.as_ref()))))
            }
            OperCommand::ShowAccounting => {
                let a = self.node.accounting().report();
                view(&a, json, accounting::text, accounting::json)
            }
            OperCommand::ShowTls => {
                let t = status::tls(&self.node);
                view(&t, json, tls::text, tls::json)
            }
            OperCommand::ShowSipTrace { id: None, .. } => {
                let not_traced = self.node.stats().trace_dropped;
                sip_trace::list(self.node.trace(), not_traced, json)
            }
            OperCommand::ShowSipTrace { id: Some(id), view } => {
                sip_trace::one(self.node.trace(), id, view, json)
            }
            OperCommand::Capture { start, filter } => {
                sip_trace::capture(self.node.trace(), start, filter, json)
            }
            OperCommand::ClearSipTrace => sip_trace::clear(self.node.trace(), json),
            OperCommand::ShowAccessControl => {
                let (denied, counters) = self.node.access_report();
                let running = self.running();
                let v = access::AccessView {
                    denied: &denied,
                    counters: &counters,
                    running: &running,
                };
                view(&v, json, access::text, access::json)
            }
            OperCommand::ShowHealth => {
                let h = self.health();
                view(&h, json, health::text, health::json)
            }
            OperCommand::ShowRedundancy => match &subsystems.pair {
                None => Ok((
                    redundancy::text_standalone(self.running().redundancy.state),
                    json.then(redundancy::json_standalone),
                )),
                Some(pair) => {
                    let r = status::redundancy(pair);
                    view(&r, json, redundancy::text, redundancy::json)
                }
            },
            OperCommand::ShowMemory => {
                let m = status::memory(&subsystems.alarms, subsystems.ballast_mb());
                view(&m, json, memory::text, memory::json)
            }
            OperCommand::DisplayAlarms => {
                let rows = subsystems.alarms.rows();
                view(rows.as_slice(), json, alarms::text, alarms::json)
            }
            OperCommand::ClearAlarm { id, task } => actions::clear_alarm(self, id, &task, json),
            OperCommand::ClearDeny { address } => actions::clear_deny(self, address, json),
            OperCommand::NotifyBerpdForce => actions::force_switchover(self, json).await,
            OperCommand::Reboot => actions::reboot(self, json),
            OperCommand::LabBallast { mb } => actions::lab_ballast(self, mb, json),
        }
    }

    /// `show health`'s snapshot: the alarm service's score, the pair's sync, and what the
    /// running configuration changed that waits for a reboot.
    pub fn health(&self) -> status::HealthReport {
        let restart = sbc_config::diff::restart_needed(&self.started_config, &self.running());
        status::health(
            &self.subsystems.alarms,
            self.subsystems.pair.as_deref(),
            restart,
        )
    }

    /// Every part of the status a scrape reads, taken now.
    pub async fn status(&self) -> status::NodeStatus {
        let subsystems = &self.subsystems;
        let running = self.running();
        let restart = sbc_config::diff::restart_needed(&self.started_config, &running);
        status::NodeStatus {
            hostname: running.system.hostname,
            uptime: self.started.elapsed(),
            sip: status::sip(&self.node).await,
            workers: self.node.worker_groups(),
            redundancy: subsystems.pair.as_deref().map(status::redundancy),
            health: status::health(&subsystems.alarms, subsystems.pair.as_deref(), restart),
            memory: status::memory(&subsystems.alarms, subsystems.ballast_mb()),
            alarms: subsystems.alarms.rows(),
            tls: status::tls(&self.node),
            trace: self.node.trace().counters(),
            session_agents: status::session_agents(&self.node),
            route_files: status::route_files(&self.node, subsystems.pair.as_deref()),
            registrations: status::registrations(&self.node),
            accounting: self.node.accounting().report(),
        }
    }
}
