//! The management socket: a Unix domain socket on which a running node serves the ACLI, one
//! session per connection.
//!
//! It is the node's control: whoever reaches it can reconfigure the node and switch the pair
//! over. So it lives in a private directory (created 0700; an existing one others can write to
//! is refused), is 0600 from the moment it exists (bound in a private staging directory, then
//! renamed into place), and the server checks every client's uid (`SO_PEERCRED`): only the
//! node's own user and root are served. At most [`MAX_SESSIONS`] sessions run at a time.
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

use std::os::unix::fs::{
    DirBuilderExt as _, FileTypeExt as _, MetadataExt as _, PermissionsExt as _,
};
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

/// Sessions served at a time, at most; clients beyond wait in the listen backlog.
pub const MAX_SESSIONS: usize = 16;

/// The longest management socket path a client can connect to: `sun_path` holds 108 bytes,
/// the last for the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// The default management socket: `$XDG_RUNTIME_DIR/sbc/sbc.sock` when the session has a
/// runtime directory, `/run/sbc/sbc.sock` for root, else `/tmp/sbc-<uid>/sbc.sock`. Its
/// directory is created 0700 by [`bind`] (and refused if someone else could write to it).
#[must_use]
pub fn default_socket_path() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
    {
        return dir.join("sbc").join("sbc.sock");
    }
    match own_uid() {
        Some(0) => PathBuf::from("/run/sbc/sbc.sock"),
        Some(uid) => PathBuf::from(format!("/tmp/sbc-{uid}/sbc.sock")),
        None => PathBuf::from("/tmp/sbc-unknown/sbc.sock"),
    }
}

/// This process's effective uid: the owner of `/proc/self` (Linux), without `unsafe`.
fn own_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// A bound management socket and whom it serves.
#[derive(Debug)]
pub struct Listener {
    listener: UnixListener,
    /// Only connections from this uid (the node's own) or root are served.
    uid: u32,
}

/// Binds the management socket at `path`, mode 0600 from the moment it exists.
///
/// Its directory is created 0700 if missing; an existing one must be a directory (not a
/// symlink) owned by this user or root that nobody else can write to, or a local user could
/// replace the socket. The socket is bound inside a private temporary directory, set to 0600
/// and only then renamed to `path`, so there is no moment at which another user can connect.
/// A stale socket (no node answers on it) is replaced; a live one is refused.
///
/// # Errors
/// A path longer than [`MAX_SOCKET_PATH`], an unsafe directory, a live node on `path`,
/// something else than a socket at `path`, or an I/O failure.
pub fn bind(path: &Path) -> anyhow::Result<Listener> {
    // The socket is bound at a short staging path and renamed, so binding would succeed at
    // any length; a client can only reach a path that fits `sun_path`.
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        anyhow::bail!(
            "management socket path {} is {len} bytes: a Unix socket path holds at most \
             {MAX_SOCKET_PATH}, so no client could connect; choose a shorter --mgmt-socket",
            path.display()
        );
    }
    let uid = own_uid().ok_or_else(|| anyhow::anyhow!("cannot tell this process's uid"))?;
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    check_private_dir(&dir, uid)?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            anyhow::bail!(
                "{} exists and is not a socket: refusing to replace it",
                path.display()
            );
        }
        // A live node answers on it: refuse to steal its socket.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "management socket {} is in use by a running node",
                path.display()
            );
        }
        std::fs::remove_file(path)?;
    }
    // A short name: a socket path is limited to about 107 bytes, and the staging path should
    // be no longer than the final one. Another process binding in the same directory takes
    // the next name.
    let mut staging = None;
    for n in 0..1000u32 {
        let candidate = dir.join(format!(".s{n}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&candidate) {
            Ok(()) => {
                staging = Some(candidate);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(anyhow::anyhow!(
                    "cannot create {}: {e}",
                    candidate.display()
                ))
            }
        }
    }
    let staging = staging.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: no free staging directory for the socket",
            dir.display()
        )
    })?;
    let result = (|| {
        let tmp = staging.join("s");
        let listener = UnixListener::bind(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&tmp, path)?;
        anyhow::Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    Ok(Listener {
        listener: result?,
        uid,
    })
}

/// Refuses a socket directory that someone other than `uid` (or root) could write to.
fn check_private_dir(dir: &Path, uid: u32) -> anyhow::Result<()> {
    let meta =
        std::fs::symlink_metadata(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let unsafe_dir = |why: String| {
        anyhow::anyhow!(
            "management socket directory {}: {why}; a local user could replace the socket. \
             Use a private directory (the default is $XDG_RUNTIME_DIR/sbc, /run/sbc for root, \
             or /tmp/sbc-<uid>, created 0700)",
            dir.display()
        )
    };
    if !meta.is_dir() {
        return Err(unsafe_dir("not a directory (or a symlink)".into()));
    }
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(unsafe_dir(format!("owned by uid {}", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_dir(format!(
            "writable by group or others (mode {:o})",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Serves sessions on `listener` until the task is dropped: only to clients of the node's own
/// uid or root (checked with `SO_PEERCRED`), at most [`MAX_SESSIONS`] at a time (further
/// clients wait to be accepted). Each session runs on `tasks`, so the node's shutdown ends it.
pub async fn serve<F: SessionFactory>(
    listener: Listener,
    path: PathBuf,
    factory: Arc<F>,
    tasks: crate::tasks::Tasks,
) {
    info!(socket = %path.display(), "management socket listening");
    let sessions = Arc::new(tokio::sync::Semaphore::new(MAX_SESSIONS));
    let mut refusals = sbc_ha::refusals::RefusalLog::<u32>::default();
    let own = listener.uid;
    loop {
        // As mini-redis does: take a session slot before accepting, so that beyond the cap
        // clients wait in the listen backlog instead of being served or refused.
        let Ok(permit) = sessions.clone().acquire_owned().await else {
            return;
        };
        let mut stream = match listener.listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                warn!(error = %e, "management accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let peer = stream.peer_cred().ok().map(|c| c.uid());
        if peer.is_none_or(|u| u != own && u != 0) {
            // One line per uid per interval.
            if let Some(line) = refusals.note(std::time::Instant::now(), peer.unwrap_or(u32::MAX)) {
                warn!(uid = ?peer, refused = line.count, "management connection refused: not the node's user or root");
            }
            let _ = stream
                .write_all(b"{\"ok\":false,\"error\":\"permission denied: only the node's user or root may use this socket\"}\n")
                .await;
            continue;
        }
        let mut session = factory.clone().session();
        tasks.spawn(async move {
            let _permit = permit;
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
