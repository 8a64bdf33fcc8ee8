//! The management socket: a Unix domain socket (mode 0600) on which a running node serves the
//! ACLI, one session per connection.
//!
//! The protocol is one JSON object per line in each direction, so it can be driven by `sbc acli`,
//! by scripts (`socat`) and by tests alike:
//! ```text
//! → {"op":"exec","line":"show sip-stats","json":true}
//! ← {"ok":true,"output":"...","prompt":"sbc#","data":{...}}
//! → {"op":"complete","line":"configure ter"}
//! ← {"ok":true,"output":"","prompt":"sbc#","candidates":["terminal"]}
//! ```
//! Nothing on it is reachable from the network. A client that sends garbage gets an error reply
//! and may go on; one that disconnects mid-request only ends its own session. Lines longer than
//! [`MAX_LINE`] close the connection.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixListener;
use tracing::{debug, info, warn};

/// Longest request line accepted (bytes).
pub const MAX_LINE: usize = 64 * 1024;

/// A request from a management client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Execute one ACLI line.
    Exec {
        /// The line as typed.
        line: String,
        /// Whether the client wants machine-readable output in `data`.
        #[serde(default)]
        json: bool,
    },
    /// Tab completion candidates for a partial line.
    Complete {
        /// The line up to the cursor.
        line: String,
    },
    /// The commands valid at the session's current level (`?`).
    Help,
    /// The current prompt.
    Prompt,
}

/// The node's answer to one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request succeeded. A refused command is `false` with the reason in `error`.
    pub ok: bool,
    /// Text to print.
    #[serde(default)]
    pub output: String,
    /// Why the request was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The prompt after the request.
    #[serde(default)]
    pub prompt: String,
    /// Machine-readable output of `show`/`display` commands when `json` was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// Completion candidates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
    /// The session ended (`exit` at top level).
    #[serde(default)]
    pub exit: bool,
}

impl Response {
    /// A refusal.
    pub fn error(error: impl Into<String>, prompt: String) -> Self {
        Self {
            ok: false,
            error: Some(error.into()),
            prompt,
            ..Self::default()
        }
    }
}

/// One client's session: turns requests into responses. Implemented by the console.
pub trait Session: Send {
    /// Handles one request.
    fn handle(&mut self, req: Request) -> impl std::future::Future<Output = Response> + Send;
}

/// Makes a session per connection.
pub trait SessionFactory: Send + Sync + 'static {
    /// The session type.
    type Session: Session + 'static;
    /// A new session.
    fn session(self: Arc<Self>) -> Self::Session;
}

/// Binds the management socket at `path` (replacing a stale socket file) with mode 0600.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if path.exists() {
        // A live node answers on it: refuse to steal its socket.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "management socket {} is in use by a running node",
                path.display()
            );
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serves sessions on `listener` until the task is dropped.
pub async fn serve<F: SessionFactory>(listener: UnixListener, path: PathBuf, factory: Arc<F>) {
    info!(socket = %path.display(), "management socket listening");
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                warn!(error = %e, "management accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut session = factory.clone().session();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut reader = BufReader::new(read);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = match (&mut reader)
                    .take(MAX_LINE as u64 + 1)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(n) => n,
                    Err(e) => {
                        debug!(error = %e, "management client gone");
                        break;
                    }
                };
                if n == 0 {
                    break;
                }
                if line.len() > MAX_LINE {
                    let _ = write
                        .write_all(b"{\"ok\":false,\"error\":\"request line too long\"}\n")
                        .await;
                    break;
                }
                let response = match serde_json::from_slice::<Request>(&line) {
                    Ok(req) => session.handle(req).await,
                    Err(e) => Response::error(format!("bad request: {e}"), String::new()),
                };
                let exit = response.exit;
                let mut out = serde_json::to_vec(&response).unwrap_or_else(|_| {
                    b"{\"ok\":false,\"error\":\"response not serialisable\"}".to_vec()
                });
                out.push(b'\n');
                if write.write_all(&out).await.is_err() || exit {
                    break;
                }
            }
        });
    }
}

use tokio::io::AsyncReadExt as _;
