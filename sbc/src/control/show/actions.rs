//! The node actions of the ACLI: `clear-alarm`, `clear-deny`, `notify berpd force`, `reboot`
//! and the lab's `lab ballast`.

use serde_json::json;
use tracing::{info, warn};

use super::Outcome;
use crate::control::context::{Console, Control};

/// `clear-alarm <id> <task>`: clears one alarm and sends its clear trap.
pub(crate) fn clear_alarm(console: &Console, id: u32, task: &str, json: bool) -> Outcome {
    let row = console.subsystems.alarms.clear_alarm(id, task)?;
    Ok((
        format!(
            "alarm {id} ({}) cleared; clear trap sent\n",
            row.description
        ),
        json.then(|| json!({ "cleared": row })),
    ))
}

/// `clear-deny <address | prefix>`: lifts the dynamic deny of the source(s) it names.
pub(crate) fn clear_deny(console: &Console, address: ipnet::IpNet, json: bool) -> Outcome {
    // A host prefix is shown as the address the operator typed.
    let shown = if address.prefix_len() == address.max_prefix_len() {
        address.addr().to_string()
    } else {
        address.to_string()
    };
    let lifted = console.node.clear_deny(address);
    if lifted > 0 {
        info!(address = %shown, lifted, "source deny cleared by an operator");
        let what = if lifted == 1 {
            String::new()
        } else {
            format!(" ({lifted} sources)")
        };
        Ok((
            format!("{shown} is no longer denied{what}\n"),
            json.then(|| json!({"cleared": shown, "sources": lifted})),
        ))
    } else {
        Err(format!(
            "{shown} is not denied (show access-control lists the denied sources)"
        ))
    }
}

/// `clear-registration <aor>`: forgets the address of record's cached bindings; its phones'
/// next REGISTERs are forwarded and bind them again.
pub(crate) fn clear_registration(console: &Console, aor: &str, json: bool) -> Outcome {
    let cleared = console
        .node
        .registrations()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear_aor(aor);
    if cleared == 0 {
        return Err(format!(
            "{aor:?} has no cached binding (show registrations lists them)"
        ));
    }
    info!(aor, cleared, "registration cleared by an operator");
    Ok((
        format!("{aor}: {cleared} binding(s) cleared\n"),
        json.then(|| json!({"cleared": aor, "bindings": cleared})),
    ))
}

/// `notify berpd force`: asks the redundancy machine for a switchover.
pub(crate) async fn force_switchover(console: &Console, json: bool) -> Outcome {
    let Some(p) = &console.subsystems.pair else {
        return Err(
            "redundancy-config state is disabled: this node has no peer to switch over to".into(),
        );
    };
    p.force_switchover().await?;
    Ok((
        "switchover requested\n".into(),
        json.then(|| json!({"switchover": "requested"})),
    ))
}

/// `reboot`: the node's main task restarts the process.
pub(crate) fn reboot(console: &Console, json: bool) -> Outcome {
    warn!("reboot requested from the ACLI");
    let _ = console.control.send(Control::Reboot);
    Ok((
        "rebooting: the node restarts now (alarms and health are cleared)\n".into(),
        json.then(|| json!({"rebooting": true})),
    ))
}

/// `lab ballast <MB>`: only with `lab-mode` in the running configuration.
pub(crate) fn lab_ballast(console: &Console, mb: u64, json: bool) -> Outcome {
    if !console.running().system.lab_mode {
        return Err("lab ballast needs system-config lab-mode enabled in the \
                    running configuration"
            .into());
    }
    console.subsystems.set_ballast(mb)?;
    info!(mb, "lab ballast set");
    Ok((
        format!("lab ballast now {mb} MB\n"),
        json.then(|| json!({"ballast_mb": mb})),
    ))
}
