//! A real Prometheus server (Debian's `prometheus`) scraping nodes on loopback, and a minimal
//! HTTP/1.x client for it and for the nodes' `/metrics`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{ports, TestDir};

/// An HTTP answer: status code, head (lower-cased), body.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The status line and headers, lower-cased.
    pub head: String,
    /// The body as text.
    pub body: String,
}

/// Sends `request` as is on a new connection to `addr` and reads the answer until the server
/// closes; `None` when it closes without an answer or nothing comes within 5 s.
#[must_use]
pub fn http_exchange(addr: SocketAddr, request: &[u8]) -> Option<HttpAnswer> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(request).ok()?;
    let mut raw = Vec::new();
    // A reset after a partial answer still leaves what was read.
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(HttpAnswer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    })
}

/// `GET path` in HTTP/1.0 (the server closes after the answer, and sends no chunks).
#[must_use]
pub fn http_get(addr: SocketAddr, path: &str) -> Option<HttpAnswer> {
    http_exchange(
        addr,
        format!("GET {path} HTTP/1.0\r\nHost: lab\r\n\r\n").as_bytes(),
    )
}

/// `s` percent-encoded for a query string (everything but RFC 3986's unreserved characters).
#[must_use]
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A Prometheus server scraping `targets` every second, its data in a test directory, killed
/// by PID when dropped.
#[derive(Debug)]
pub struct Prometheus {
    child: Option<Child>,
    addr: SocketAddr,
    log: PathBuf,
}

impl Prometheus {
    /// Starts `prometheus` on a fresh loopback port with one job, `sbc`, scraping `targets`'
    /// `/metrics` every second and evaluating `rules` (a rule file) every second, and waits
    /// until it is ready.
    ///
    /// # Panics
    /// If `prometheus` is missing (run-tests.sh installs Debian's `prometheus`) or is not
    /// ready within 30 s.
    #[must_use]
    pub fn start(dir: &TestDir, targets: &[SocketAddr], rules: Option<&std::path::Path>) -> Self {
        let binary = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .unwrap_or_else(|| {
                panic!(
                    "prometheus not found: sudo apt-get install --no-install-recommends prometheus"
                )
            });
        let list = targets
            .iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let conf = dir.file("prometheus.yml");
        std::fs::write(
            &conf,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
                 rule_files: [{}]\n\
                 scrape_configs:\n  - job_name: sbc\n    static_configs:\n      - targets: [{list}]\n",
                rules.map_or(String::new(), |r| format!("'{}'", r.display()))
            ),
        )
        .expect("write prometheus.yml");
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), ports::free_port());
        let log = dir.file("prometheus.log");
        let out = std::fs::File::create(&log).expect("create prometheus.log");
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.file("prometheus-data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let p = Self {
            child: Some(child),
            addr,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_get(addr, "/-/ready").is_none_or(|a| a.status != 200) {
            assert!(
                Instant::now() < deadline,
                "prometheus not ready on {addr}:\n{}",
                p.log_text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// Its log so far.
    #[must_use]
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET /api/v1/...` and its JSON; `None` on no answer or not JSON.
    #[must_use]
    pub fn api(&self, path_and_query: &str) -> Option<Value> {
        let a = http_get(self.addr, &format!("/api/v1/{path_and_query}"))?;
        serde_json::from_str(&a.body).ok()
    }

    /// An instant query: the whole answer (`status`, `data.result`, or `error`).
    #[must_use]
    pub fn query(&self, expr: &str) -> Value {
        self.api(&format!("query?query={}", percent_encode(expr)))
            .unwrap_or_else(|| panic!("prometheus does not answer: {}", self.log_text()))
    }

    /// The samples of an instant query as (instance, value).
    #[must_use]
    pub fn samples(&self, expr: &str) -> Vec<(String, f64)> {
        let v = self.query(expr);
        v["data"]["result"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|s| {
                        let instance = s["metric"]["instance"].as_str().unwrap_or("").to_owned();
                        let value = s["value"][1].as_str()?.parse().ok()?;
                        Some((instance, value))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The alerts as (name, state: `pending` or `firing`, labels).
    #[must_use]
    pub fn alerts(&self) -> Vec<(String, String, Value)> {
        self.api("alerts")
            .and_then(|v| v["data"]["alerts"].as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|a| {
                (
                    a["labels"]["alertname"].as_str().unwrap_or("").to_owned(),
                    a["state"].as_str().unwrap_or("").to_owned(),
                    a["labels"].clone(),
                )
            })
            .collect()
    }

    /// Waits (bounded by `timeout`, polling every 250 ms) until every target is `up`.
    #[track_caller]
    pub fn wait_targets_up(&self, targets: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let up = self.samples("up == 1").len();
            if up == targets {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{up} of {targets} targets up: {}",
                self.api("targets").unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL to this child's PID only.
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- prometheus log ---\n{}", self.log_text());
        }
    }
}
