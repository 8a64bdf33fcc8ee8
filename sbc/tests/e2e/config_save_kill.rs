//! `save-config` is atomic: SIGKILL the node while it saves in a loop, and the config file is
//! always one of the two complete versions, never torn.
//!
//! Five rounds on the same directory. Each round starts a node on the file the previous round
//! left (so a stale socket file and a killed save are part of the start-up), then one thread
//! saves in a loop over one management connection, alternating `hostname alpha` and `hostname
//! beta` (bounded: 200 saves or 20 s), another thread reads the file as fast as it can, and the
//! test kills the node by PID with SIGKILL after a delay that differs per round.
//!
//! Asserts: every read during the loops and the file after each kill are byte for byte one of
//! the two versions that a clean save of `alpha` and of `beta` writes (captured first); the
//! backup `sbc.toml.bak` is too; the reader read the file many times and the saver saved more
//! than once per round; after the last kill a node starts on the file and runs the hostname the
//! file holds.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sbc_e2e::acli::{acli, acli_json};
use sbc_e2e::{SbcConfig, SbcNode, TestDir};

const HOSTNAMES: [&str; 2] = ["alpha", "beta"];
const ROUNDS: u32 = 5;
const MAX_SAVES: u32 = 200;
const LOOP_LIMIT: Duration = Duration::from_secs(20);

/// One management connection that stops (returns `false`) at the first I/O error: the node
/// is killed under it.
struct Saver {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Saver {
    fn connect(path: &Path) -> Self {
        let stream = UnixStream::connect(path).expect("connect to the management socket");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let writer = stream.try_clone().expect("clone");
        Self {
            reader: BufReader::new(stream),
            writer,
        }
    }

    /// Executes one line; `Some(reply)` or `None` when the connection is gone.
    fn exec(&mut self, line: &str) -> Option<serde_json::Value> {
        let req = serde_json::json!({"op": "exec", "line": line});
        self.writer.write_all(format!("{req}\n").as_bytes()).ok()?;
        let mut reply = String::new();
        match self.reader.read_line(&mut reply) {
            Ok(0) | Err(_) => None,
            Ok(_) => serde_json::from_str(&reply).ok(),
        }
    }

    /// Sets the hostname and saves; `Some(true)` when saved, `None` when the node is gone.
    fn save_hostname(&mut self, hostname: &str) -> Option<bool> {
        for line in [
            "configure terminal",
            "system",
            "system-config",
            &format!("hostname {hostname}"),
            "done",
            "exit",
            "exit",
            "exit",
            "save-config",
        ] {
            let reply = self.exec(line)?;
            if reply["ok"] != serde_json::json!(true) {
                panic!("{line:?} refused: {reply}");
            }
        }
        Some(true)
    }
}

/// Sets the hostname and saves with the ACLI; returns the file's text afterwards.
fn clean_save(node: &SbcNode, hostname: &str) -> String {
    acli(
        &node.mgmt_socket(),
        &[
            "configure terminal",
            "system",
            "system-config",
            &format!("hostname {hostname}"),
            "done",
            "exit",
            "exit",
            "exit",
            "save-config",
        ],
    )
    .assert_ok();
    std::fs::read_to_string(node.config_path()).expect("read the saved file")
}

fn which_version(text: &str, versions: &[String; 2]) -> Option<usize> {
    versions.iter().position(|v| v == text)
}

#[track_caller]
fn assert_complete(path: &PathBuf, versions: &[String; 2], when: &str) -> usize {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{when}: cannot read {}: {e}", path.display()));
    which_version(&text, versions).unwrap_or_else(|| {
        panic!(
            "{when}: {} is neither complete version ({} bytes):\n{text}\n--- alpha ---\n{}",
            path.display(),
            text.len(),
            versions[0]
        )
    })
}

#[test]
fn sigkill_during_save_config_never_tears_the_file() {
    let config = SbcConfig::new();
    let dir = TestDir::for_current_test();
    let mut node = SbcNode::start_in(&dir, &config.to_toml());
    let path = node.config_path();
    let bak = dir.file("sbc.toml.bak");

    // The two complete versions, as a clean save writes them; each must be valid TOML.
    let versions = [
        clean_save(&node, HOSTNAMES[0]),
        clean_save(&node, HOSTNAMES[1]),
    ];
    assert_ne!(versions[0], versions[1]);
    for (v, h) in versions.iter().zip(HOSTNAMES) {
        let parsed: toml::Value = v.parse().expect("a saved file is TOML");
        assert_eq!(parsed["system-config"]["hostname"].as_str(), Some(h));
    }
    assert_eq!(
        std::fs::read_to_string(&bak).expect("the .bak exists"),
        versions[0]
    );

    let mut total_reads = 0u64;
    let mut total_saves = 0u32;
    for round in 0..ROUNDS {
        if round > 0 {
            node = SbcNode::start_existing(&dir);
        }
        let sock = node.mgmt_socket();
        let stop = Arc::new(AtomicBool::new(false));
        let saves = Arc::new(AtomicU32::new(0));

        let saver = {
            let stop = Arc::clone(&stop);
            let saves = Arc::clone(&saves);
            let sock = sock.clone();
            std::thread::spawn(move || {
                let mut s = Saver::connect(&sock);
                let start = Instant::now();
                for i in 0..MAX_SAVES {
                    if stop.load(Ordering::SeqCst) || start.elapsed() > LOOP_LIMIT {
                        break;
                    }
                    if s.save_hostname(HOSTNAMES[(i % 2) as usize]).is_none() {
                        break; // killed
                    }
                    saves.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let reader = {
            let stop = Arc::clone(&stop);
            let versions = versions.clone();
            let path = path.clone();
            let bak = bak.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut reads = 0u64;
                let mut bad: Option<String> = None;
                while !stop.load(Ordering::SeqCst)
                    && start.elapsed() < LOOP_LIMIT + Duration::from_secs(5)
                {
                    for p in [&path, &bak] {
                        match std::fs::read_to_string(p) {
                            Ok(text) => {
                                reads += 1;
                                if which_version(&text, &versions).is_none() && bad.is_none() {
                                    bad = Some(format!(
                                        "{}: {} bytes:\n{text}",
                                        p.display(),
                                        text.len()
                                    ));
                                }
                            }
                            Err(e) => {
                                if bad.is_none() {
                                    bad = Some(format!("{}: read error {e}", p.display()));
                                }
                            }
                        }
                    }
                    if reads >= 10_000_000 {
                        break;
                    }
                }
                (reads, bad)
            })
        };

        // Kill after a delay that differs per round (all well inside the saver's bounds), once
        // a few saves went through.
        let delay = Duration::from_millis(300 + 277 * u64::from(round));
        let t0 = Instant::now();
        while saves.load(Ordering::SeqCst) < 3 && t0.elapsed() < Duration::from_secs(15) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(delay);
        let saved_before_kill = saves.load(Ordering::SeqCst);
        node.kill();
        stop.store(true, Ordering::SeqCst);
        saver.join().expect("the saver thread does not panic");
        let (reads, bad) = reader.join().expect("the reader thread does not panic");
        assert!(
            bad.is_none(),
            "round {round}: a read during the loop saw a torn or missing file: {}",
            bad.unwrap_or_default()
        );
        assert!(
            saved_before_kill >= 3,
            "round {round}: only {saved_before_kill} saves before the kill"
        );
        assert!(reads >= 10, "round {round}: only {reads} reads");
        total_reads += reads;
        total_saves += saves.load(Ordering::SeqCst);

        // After the kill: both files complete.
        assert_complete(&path, &versions, &format!("round {round}, after SIGKILL"));
        assert_complete(
            &bak,
            &versions,
            &format!("round {round}, backup after SIGKILL"),
        );
    }
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".sbc.toml."))
                .collect()
        })
        .unwrap_or_default();
    eprintln!(
        "{ROUNDS} rounds: {total_saves} saves, {total_reads} reads of the file and its backup; \
         temporary files left by the kills: {leftovers:?}"
    );

    // A node starts on what the last kill left and runs that hostname.
    let which = assert_complete(&path, &versions, "before the last start");
    let node = SbcNode::start_existing(&dir);
    let running = acli_json(&node.mgmt_socket(), &["show running-config"])
        .assert_ok()
        .json();
    assert_eq!(
        running["system-config"]["hostname"].as_str(),
        Some(HOSTNAMES[which]),
        "{running:#}"
    );
}
