//! The node side of the ACLI: the session protocol. One [`ConsoleSession`] per management
//! connection runs the pure interpreter ([`sbc_config::acli`]) on the editing configuration
//! and hands what it returns to the rooms that carry it out: the operational commands
//! ([`crate::control::show`]) and the configuration lifecycle ([`crate::control::lifecycle`]),
//! both acting on what a session can reach ([`crate::control::context::Console`]).

use std::fmt::Write as _;
use std::sync::Arc;

use sbc_config::acli::{Reply, Session};

use crate::control::context::Console;
use crate::control::mgmt::{self, Request, Response};
use crate::control::oper::{OperCommand, OPERATIONS};
use crate::control::show::Outcome;

impl mgmt::SessionFactory for Console {
    type Session = ConsoleSession;

    fn session(self: Arc<Self>) -> ConsoleSession {
        ConsoleSession {
            acli: Session::new(&OPERATIONS),
            console: self,
        }
    }
}

/// One management connection's session.
pub struct ConsoleSession {
    acli: Session,
    console: Arc<Console>,
}

fn ok(output: String, prompt: String, data: Option<serde_json::Value>) -> Response {
    Response {
        ok: true,
        output,
        prompt,
        data,
        ..Response::default()
    }
}

impl mgmt::Session for ConsoleSession {
    async fn handle(&mut self, req: Request) -> Response {
        let console = self.console.clone();
        let host = console.hostname();
        match req {
            Request::Prompt => ok(String::new(), self.acli.prompt(&host), None),
            Request::Help => {
                let mut out = String::new();
                for (cmd, what) in self.acli.help() {
                    let _ = writeln!(out, "  {cmd:<28} {what}");
                }
                ok(out, self.acli.prompt(&host), None)
            }
            Request::Complete { line } => {
                let candidates = match console.config.lock() {
                    Ok(c) => self.acli.complete(&line, &c.editing),
                    Err(_) => Vec::new(),
                };
                Response {
                    ok: true,
                    prompt: self.acli.prompt(&host),
                    candidates,
                    ..Response::default()
                }
            }
            Request::Exec { line, json } => {
                let reply = match console.config.lock() {
                    Ok(mut c) => self.acli.execute(&line, &mut c.editing),
                    Err(_) => Reply::Error("configuration lock poisoned".into()),
                };
                let prompt_after = |s: &Session| s.prompt(&host);
                match reply {
                    Reply::Text(t) => ok(t, prompt_after(&self.acli), None),
                    Reply::Error(e) => Response::error(e, prompt_after(&self.acli)),
                    Reply::Exit => Response {
                        ok: true,
                        exit: true,
                        ..Response::default()
                    },
                    Reply::Lifecycle(cmd) => {
                        let r = console.lifecycle(cmd, json).await;
                        finish(r, prompt_after(&self.acli))
                    }
                    Reply::Operational(line) => {
                        let lab_mode = console
                            .config
                            .lock()
                            .is_ok_and(|c| c.editing.system.lab_mode);
                        match OperCommand::parse(&line, lab_mode) {
                            Ok(cmd) => {
                                let r = console.operational(cmd, json).await;
                                finish(r, prompt_after(&self.acli))
                            }
                            Err(e) => Response::error(e, prompt_after(&self.acli)),
                        }
                    }
                }
            }
        }
    }
}

fn finish(r: Outcome, prompt: String) -> Response {
    match r {
        Ok((text, data)) => ok(text, prompt, data),
        Err(e) => Response::error(e, prompt),
    }
}
