//! `sbc acli`: the operator's shell, a thin client of a node's management socket.
//!
//! Three forms, as operators and scripts need them:
//! - interactive (stdin is a terminal): prompt, line editing, history, tab completion and `?`,
//!   all answered by the node so the command tree lives in one place;
//! - one-shot: `sbc acli -c "show health"` (repeat `-c` for several lines of one session);
//! - script: lines read from stdin when it is not a terminal, stopping at the first error with a
//!   non-zero exit code.

use std::io::{BufRead as _, BufReader, IsTerminal as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use base64::Engine as _;
use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::Helper;

use crate::control::mgmt::{Request, Response};

/// A connection to a node's management socket.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> anyhow::Result<Self> {
        let stream = UnixStream::connect(path).with_context(|| {
            format!(
                "cannot reach a node on {} (is `sbc run` running? choose the node with --mgmt-socket)",
                path.display()
            )
        })?;
        let writer = stream.try_clone()?;
        Ok(Self {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Sends one request and waits for its response.
    pub fn request(&mut self, req: &Request) -> anyhow::Result<Response> {
        let mut line = serde_json::to_vec(req)?;
        line.push(b'\n');
        let written = self.writer.write_all(&line);
        // A node that refuses the connection (another user, say) writes why and closes: read
        // that answer even when our write found the connection closed.
        let mut buf = String::new();
        let read = self.reader.read_line(&mut buf);
        match (read, written) {
            (Ok(n), _) if n > 0 => Ok(serde_json::from_str(&buf)?),
            (_, Err(e)) => Err(e.into()),
            (Err(e), Ok(())) => Err(e.into()),
            (Ok(_), Ok(())) => anyhow::bail!("the node closed the management connection"),
        }
    }

    /// Executes one ACLI line.
    pub fn exec(&mut self, line: &str, json: bool) -> anyhow::Result<Response> {
        self.request(&Request::Exec {
            line: line.to_owned(),
            json,
        })
    }

    /// Executes one ACLI line; a line with `--pcap FILE` (`show sip-trace <id> --pcap FILE`)
    /// asks the node for the capture's pcap and writes FILE here, on the client's side: the
    /// node writes nothing at a path a client chose.
    pub fn exec_line(&mut self, line: &str, json: bool) -> anyhow::Result<Response> {
        let Some((line, file)) = pcap_request(line) else {
            return self.exec(line, json);
        };
        let mut resp = self.exec(&line, true)?;
        if !resp.ok {
            return Ok(resp);
        }
        let encoded = resp
            .data
            .as_ref()
            .and_then(|d| d.get("pcap"))
            .and_then(serde_json::Value::as_str)
            .context("the node answered without a pcap")?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .context("the node's pcap is not base64")?;
        write_atomically(&file, &bytes)
            .with_context(|| format!("cannot write {}", file.display()))?;
        resp.output = format!(
            "{}, written to {}\n",
            resp.output.trim_end(),
            file.display()
        );
        resp.data = None;
        Ok(resp)
    }
}

/// `show sip-trace 7 --pcap out.pcap` as the line the node answers (`show sip-trace 7 pcap`)
/// and the file; `None` for a line without `--pcap`.
fn pcap_request(line: &str) -> Option<(String, std::path::PathBuf)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "--pcap")?;
    let file = words.get(at + 1)?;
    let mut rest: Vec<&str> = words[..at].to_vec();
    rest.extend_from_slice(&words[at + 2..]);
    rest.push("pcap");
    Some((rest.join(" "), std::path::PathBuf::from(file)))
}

/// Writes `bytes` to `path` through a temporary file in the same directory, renamed over it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(
        || std::ffi::OsString::from("capture"),
        std::ffi::OsStr::to_os_string,
    );
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

fn print_response(resp: &Response, json: bool) {
    if json {
        if let Some(data) = &resp.data {
            println!("{}", serde_json::to_string_pretty(data).unwrap_or_default());
            return;
        }
    }
    if !resp.output.is_empty() {
        print!("{}", resp.output);
        if !resp.output.ends_with('\n') {
            println!();
        }
    }
    if let Some(e) = &resp.error {
        eprintln!("% {e}");
    }
}

/// Runs `sbc acli`.
pub fn run(socket: &Path, commands: &[String], json: bool) -> anyhow::Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    if !commands.is_empty() {
        return run_lines(&mut client, commands.iter().map(String::as_str), json);
    }
    if !std::io::stdin().is_terminal() {
        let lines: Vec<String> = std::io::stdin().lock().lines().collect::<Result<_, _>>()?;
        return run_lines(&mut client, lines.iter().map(String::as_str), json);
    }
    interactive(client, json)
}

fn run_lines<'a>(
    client: &mut Client,
    lines: impl Iterator<Item = &'a str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    for (n, line) in lines.enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let resp = client.exec_line(trimmed, json)?;
        print_response(&resp, json);
        if !resp.ok {
            eprintln!("% stopped at line {}: {trimmed}", n + 1);
            return Ok(ExitCode::from(1));
        }
        if resp.exit {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

struct AcliHelper {
    client: std::cell::RefCell<Client>,
}

impl Completer for AcliHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let head = &line[..pos];
        let start = head.rfind(' ').map_or(0, |i| i + 1);
        let resp = self.client.borrow_mut().request(&Request::Complete {
            line: head.to_owned(),
        });
        Ok((start, resp.map(|r| r.candidates).unwrap_or_default()))
    }
}

impl Hinter for AcliHelper {
    type Hint = String;
}
impl Highlighter for AcliHelper {}
impl Validator for AcliHelper {}
impl Helper for AcliHelper {}

fn interactive(client: Client, json: bool) -> anyhow::Result<ExitCode> {
    let mut editor: rustyline::Editor<AcliHelper, rustyline::history::DefaultHistory> =
        rustyline::Editor::new()?;
    editor.set_helper(Some(AcliHelper {
        client: std::cell::RefCell::new(client),
    }));
    let history = std::env::var_os("HOME").map(|h| Path::new(&h).join(".sbc_acli_history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    let mut prompt = helper_client(&editor)
        .map(|c| c.borrow_mut().request(&Request::Prompt))
        .transpose()?
        .map(|r| r.prompt)
        .unwrap_or_else(|| "sbc# ".into());
    loop {
        let line = match editor.readline(&format!("{prompt} ")) {
            Ok(l) => l,
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(trimmed);
        let Some(client) = helper_client(&editor) else {
            break;
        };
        let resp = if trimmed.ends_with('?') {
            client.borrow_mut().request(&Request::Help)?
        } else {
            client.borrow_mut().exec_line(trimmed, json)?
        };
        print_response(&resp, json);
        prompt = resp.prompt.clone();
        if resp.exit {
            break;
        }
    }
    if let Some(h) = &history {
        let _ = editor.save_history(h);
    }
    Ok(ExitCode::SUCCESS)
}

fn helper_client(
    editor: &rustyline::Editor<AcliHelper, rustyline::history::DefaultHistory>,
) -> Option<&std::cell::RefCell<Client>> {
    editor.helper().map(|h| &h.client)
}

#[cfg(test)]
mod tests {
    use super::pcap_request;

    #[test]
    fn a_pcap_file_is_the_client_s_and_the_node_is_asked_for_pcap() {
        assert_eq!(
            pcap_request("show sip-trace 7 --pcap /tmp/x.pcap"),
            Some(("show sip-trace 7 pcap".to_owned(), "/tmp/x.pcap".into()))
        );
        assert_eq!(pcap_request("show sip-trace 7"), None);
        assert_eq!(pcap_request("show sip-trace 7 --pcap"), None);
    }
}
