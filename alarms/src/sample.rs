//! Samplers: the only impure part of the crate. Each reads one figure from the system and
//! returns a [`Reading`] (a percentage, plus the bytes behind it for memory and heap) or a
//! [`SampleError`]; none of them keeps history or decides anything: that is the
//! [`Evaluator`](crate::Evaluator)'s job.
//!
//! - [`MemorySampler`]: memory utilisation from a [`MemorySource`]: the host's used/total
//!   (sysinfo; the default, for bare metal and VMs), the cgroup's usage against its limit (for
//!   containers), or this process's resident memory against a configured limit (the lab and
//!   the tests, where a ballast inside the process drives a real alarm without starving the
//!   machine).
//! - [`HeapSampler`]: jemalloc's own statistics (`stats.allocated`, `stats.resident`, after
//!   advancing `epoch`) against a configured heap limit. The figures only mean something when
//!   jemalloc is the process's global allocator (`tikv-jemallocator` in the binary).
//! - [`CpuSampler`]: the host's CPU utilisation (sysinfo), averaged over the time since the
//!   previous sample.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One sample: a utilisation in percent and, for memory and heap, the bytes behind it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// Utilisation in percent; may exceed 100 when a process is over its configured limit.
    pub percent: f64,
    /// The bytes in use and the limit they are measured against (none for CPU).
    pub bytes: Option<ByteUsage>,
}

/// Bytes in use against a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteUsage {
    /// Bytes in use.
    pub used: u64,
    /// The limit (total memory, cgroup limit, configured limit).
    pub limit: u64,
}

impl Reading {
    /// A reading of `used` bytes against `limit` bytes.
    pub fn from_bytes(used: u64, limit: u64) -> Result<Self, SampleError> {
        if limit == 0 {
            return Err(SampleError::ZeroLimit);
        }
        // Precision loss above 2^53 bytes is irrelevant for a percentage.
        #[allow(clippy::cast_precision_loss)]
        let percent = used as f64 * 100.0 / limit as f64;
        Ok(Self {
            percent,
            bytes: Some(ByteUsage { used, limit }),
        })
    }
}

/// Why a sample could not be taken.
#[derive(Debug, Error)]
pub enum SampleError {
    /// A file of /proc or /sys could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A file of /proc or /sys did not hold what was expected.
    #[error("{path}: cannot parse {text:?}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The text that did not parse.
        text: String,
    },
    /// The cgroup has no memory limit (`memory.max` is `max`), so there is nothing to measure
    /// against: use the host or process source instead.
    #[error("cgroup has no memory limit ({path} is unlimited); use memory-source host or process")]
    NoCgroupLimit {
        /// The limit file.
        path: PathBuf,
    },
    /// No cgroup memory accounting was found for this process.
    #[error("no cgroup memory accounting found for this process under {root}")]
    NoCgroup {
        /// Where it was looked for.
        root: PathBuf,
    },
    /// sysinfo could not read the system's figures.
    #[error("system figures unavailable: {0}")]
    System(String),
    /// A limit of zero bytes.
    #[error("the limit is zero bytes")]
    ZeroLimit,
    /// jemalloc's statistics could not be read.
    #[error("jemalloc statistics: {0}")]
    Jemalloc(String),
}

/// What "memory utilisation" means for the `memory` alarm.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "kebab-case", deny_unknown_fields)]
pub enum MemorySource {
    /// The host's used memory (total − available) against its total (sysinfo). Default.
    #[default]
    Host,
    /// The cgroup's `memory.current` against `memory.max` (cgroup v2; v1's
    /// `memory.usage_in_bytes` / `memory.limit_in_bytes` as a fallback). An error when no limit
    /// is set.
    Cgroup {
        /// The cgroup directory; found from `/proc/self/cgroup` when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dir: Option<PathBuf>,
    },
    /// This process's resident memory (VmRSS) against `limit-bytes`.
    Process {
        /// The limit, in bytes.
        #[serde(rename = "limit-bytes")]
        limit_bytes: u64,
    },
}

/// Samples memory utilisation from a [`MemorySource`].
pub struct MemorySampler {
    source: MemorySource,
    system: Option<sysinfo::System>,
}

impl std::fmt::Debug for MemorySampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySampler")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl MemorySampler {
    /// A sampler for `source`. Opening sysinfo for the host source may fail.
    pub fn new(source: MemorySource) -> Result<Self, SampleError> {
        let system = match source {
            MemorySource::Host => Some(new_system()?),
            _ => None,
        };
        Ok(Self { source, system })
    }

    /// The source this sampler reads.
    #[must_use]
    pub const fn source(&self) -> &MemorySource {
        &self.source
    }

    /// Takes one sample.
    pub fn sample(&mut self) -> Result<Reading, SampleError> {
        match &self.source {
            MemorySource::Host => {
                let system = match &mut self.system {
                    Some(s) => s,
                    None => self.system.insert(new_system()?),
                };
                system.refresh_memory();
                Reading::from_bytes(system.used_memory(), system.total_memory())
            }
            MemorySource::Cgroup { dir } => cgroup_reading(dir.as_deref()),
            MemorySource::Process { limit_bytes } => {
                Reading::from_bytes(process_resident_bytes()?, *limit_bytes)
            }
        }
    }
}

fn new_system() -> Result<sysinfo::System, SampleError> {
    sysinfo::System::new().map_err(|e| SampleError::System(e.to_string()))
}

fn read(path: &Path) -> Result<String, SampleError> {
    fs::read_to_string(path).map_err(|source| SampleError::Io {
        path: path.to_owned(),
        source,
    })
}

fn parse_u64(path: &Path, text: &str) -> Result<u64, SampleError> {
    text.trim().parse().map_err(|_| SampleError::Parse {
        path: path.to_owned(),
        text: text.trim().to_owned(),
    })
}

/// This process's resident set size, from `VmRSS` in `/proc/self/status` (Linux), else from
/// sysinfo.
pub fn process_resident_bytes() -> Result<u64, SampleError> {
    let path = Path::new("/proc/self/status");
    match fs::read_to_string(path) {
        Ok(text) => {
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .ok_or_else(|| SampleError::Parse {
                    path: path.to_owned(),
                    text: "no VmRSS line".to_owned(),
                })?;
            let kib = line.trim().trim_end_matches("kB");
            Ok(parse_u64(path, kib)? * 1024)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let pid = sysinfo::get_current_pid().map_err(|e| SampleError::System(e.to_string()))?;
            let mut system = new_system()?;
            system.refresh_processes_specifics(
                sysinfo::ProcessesToUpdate::Some(&[pid]),
                false,
                sysinfo::ProcessRefreshKind::nothing().with_memory(),
            );
            system
                .process(pid)
                .map(sysinfo::Process::memory)
                .ok_or_else(|| SampleError::System("own process not found".to_owned()))
        }
        Err(source) => Err(SampleError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// cgroup v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX × page size).
const V1_UNLIMITED: u64 = 1 << 60;

fn cgroup_reading(dir: Option<&Path>) -> Result<Reading, SampleError> {
    if let Some(dir) = dir {
        return cgroup_v2_reading(dir);
    }
    let proc_cgroup = Path::new("/proc/self/cgroup");
    let text = read(proc_cgroup)?;
    let root = Path::new(CGROUP_ROOT);
    // cgroup v2: the line "0::/path"; inside a cgroup namespace the path may not exist under
    // the mount, whose root is then our own cgroup.
    if let Some(rel) = text.lines().find_map(|l| l.strip_prefix("0::")) {
        for candidate in [root.join(rel.trim_start_matches('/')), root.to_owned()] {
            if candidate.join("memory.current").exists() {
                return cgroup_v2_reading(&candidate);
            }
        }
    }
    // cgroup v1: the line "N:memory:/path" (or a list of controllers containing memory).
    let v1 = text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then(|| path.to_owned())
    });
    if let Some(rel) = v1 {
        let mount = root.join("memory");
        for candidate in [mount.join(rel.trim_start_matches('/')), mount.clone()] {
            let usage = candidate.join("memory.usage_in_bytes");
            if usage.exists() {
                let used = parse_u64(&usage, &read(&usage)?)?;
                let limit_path = candidate.join("memory.limit_in_bytes");
                let limit = parse_u64(&limit_path, &read(&limit_path)?)?;
                if limit >= V1_UNLIMITED {
                    return Err(SampleError::NoCgroupLimit { path: limit_path });
                }
                return Reading::from_bytes(used, limit);
            }
        }
    }
    Err(SampleError::NoCgroup {
        root: root.to_owned(),
    })
}

fn cgroup_v2_reading(dir: &Path) -> Result<Reading, SampleError> {
    let current = dir.join("memory.current");
    let used = parse_u64(&current, &read(&current)?)?;
    let max_path = dir.join("memory.max");
    let max = read(&max_path)?;
    if max.trim() == "max" {
        return Err(SampleError::NoCgroupLimit { path: max_path });
    }
    Reading::from_bytes(used, parse_u64(&max_path, &max)?)
}

/// jemalloc's heap figures at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeapStats {
    /// `stats.allocated`: bytes allocated by the application (free lists excluded).
    pub allocated: u64,
    /// `stats.resident`: bytes in physically resident data pages mapped by the allocator.
    pub resident: u64,
}

/// Samples the heap from jemalloc's statistics against a configured heap limit.
///
/// The percentage is `allocated / limit`: what the application holds, excluding the
/// allocator's free lists, as Oracle measures it ("the exact memory usage, excluding the free
/// list"). `resident` is reported beside it for `show memory`.
#[derive(Clone, Copy)]
pub struct HeapSampler {
    limit_bytes: u64,
    epoch: tikv_jemalloc_ctl::epoch_mib,
    allocated: tikv_jemalloc_ctl::stats::allocated_mib,
    resident: tikv_jemalloc_ctl::stats::resident_mib,
}

impl std::fmt::Debug for HeapSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeapSampler")
            .field("limit_bytes", &self.limit_bytes)
            .finish_non_exhaustive()
    }
}

fn jemalloc_err(e: tikv_jemalloc_ctl::Error) -> SampleError {
    SampleError::Jemalloc(e.to_string())
}

impl HeapSampler {
    /// A sampler against `limit_bytes` (not zero).
    pub fn new(limit_bytes: u64) -> Result<Self, SampleError> {
        if limit_bytes == 0 {
            return Err(SampleError::ZeroLimit);
        }
        Ok(Self {
            limit_bytes,
            epoch: tikv_jemalloc_ctl::epoch::mib().map_err(jemalloc_err)?,
            allocated: tikv_jemalloc_ctl::stats::allocated::mib().map_err(jemalloc_err)?,
            resident: tikv_jemalloc_ctl::stats::resident::mib().map_err(jemalloc_err)?,
        })
    }

    /// The configured heap limit, in bytes.
    #[must_use]
    pub const fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Advances jemalloc's epoch (its statistics are cached until then) and reads them.
    pub fn stats(&self) -> Result<HeapStats, SampleError> {
        self.epoch.advance().map_err(jemalloc_err)?;
        let allocated = self.allocated.read().map_err(jemalloc_err)?;
        let resident = self.resident.read().map_err(jemalloc_err)?;
        Ok(HeapStats {
            allocated: allocated as u64,
            resident: resident as u64,
        })
    }

    /// Takes one sample: allocated bytes against the limit.
    pub fn sample(&self) -> Result<Reading, SampleError> {
        Reading::from_bytes(self.stats()?.allocated, self.limit_bytes)
    }
}

/// Samples the host's CPU utilisation: the busy share of all CPUs since the previous sample
/// (or since [`CpuSampler::new`] for the first one). Samples closer together than 200 ms are
/// not meaningful (sysinfo's `MINIMUM_CPU_UPDATE_INTERVAL`).
pub struct CpuSampler {
    system: sysinfo::System,
}

impl std::fmt::Debug for CpuSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuSampler").finish_non_exhaustive()
    }
}

impl CpuSampler {
    /// A sampler; takes the first CPU time snapshot.
    pub fn new() -> Result<Self, SampleError> {
        let mut system = new_system()?;
        system.refresh_cpu_usage();
        Ok(Self { system })
    }

    /// Takes one sample.
    pub fn sample(&mut self) -> Result<Reading, SampleError> {
        self.system.refresh_cpu_usage();
        if self.system.cpus().is_empty() {
            return Err(SampleError::System("no CPU found".to_owned()));
        }
        Ok(Reading {
            percent: f64::from(self.system.global_cpu_usage()),
            bytes: None,
        })
    }
}

/// Returns the calling thread's jemalloc cache (its tcache) to the shared arenas.
///
/// A thread keeps objects it freed for its next allocations; they still count as allocated
/// heap. A SIP thread that goes idle after a burst would keep them for good, and the heap gate
/// (which reads `stats.allocated`) would stay above what the node holds: measured, 1.7 MB
/// after 2,000 calls on an idle node whose tables were empty. The `sbc` shell calls this from
/// each SIP thread when it goes idle. Disabling the cache flushes it; it is enabled again at
/// once. A no-op if jemalloc is not the process's allocator.
pub fn release_thread_cache() {
    use tikv_jemalloc_ctl::{Access as _, AsName as _};
    let name = b"thread.tcache.enabled\0".name();
    if name.read() == Ok(true) {
        let _ = name.write(false);
        let _ = name.write(true);
    }
}

/// Starts jemalloc's background threads, which return unused pages to the system on their
/// own schedule (`dirty_decay_ms`), so that resident memory comes back when a node goes idle;
/// without them, decay only advances on allocation activity. Returns whether they run.
pub fn enable_background_purge() -> bool {
    tikv_jemalloc_ctl::background_thread::write(true).is_ok()
        && tikv_jemalloc_ctl::background_thread::read().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_source_reads_rss_against_limit() {
        let mut s = MemorySampler::new(MemorySource::Process {
            limit_bytes: 1 << 40,
        })
        .expect("sampler");
        let r = s.sample().expect("sample");
        let b = r.bytes.expect("bytes");
        assert!(
            b.used > 1 << 20,
            "a test process holds more than 1 MiB: {b:?}"
        );
        assert!(r.percent > 0.0 && r.percent < 1.0, "{r:?}");
    }

    #[test]
    fn memory_source_serde_shape() {
        let p: MemorySource =
            serde_json::from_str(r#"{"source":"process","limit-bytes":1048576}"#).expect("json");
        assert_eq!(
            p,
            MemorySource::Process {
                limit_bytes: 1 << 20
            }
        );
        let h: MemorySource = serde_json::from_str(r#"{"source":"host"}"#).expect("json");
        assert_eq!(h, MemorySource::Host);
        let c: MemorySource = serde_json::from_str(r#"{"source":"cgroup"}"#).expect("json");
        assert_eq!(c, MemorySource::Cgroup { dir: None });
        assert!(serde_json::from_str::<MemorySource>(r#"{"source":"swap"}"#).is_err());
    }

    #[test]
    fn host_source_reads_used_over_total() {
        let mut s = MemorySampler::new(MemorySource::Host).expect("sampler");
        let r = s.sample().expect("sample");
        assert!(r.percent > 0.0 && r.percent <= 100.0, "{r:?}");
    }

    #[test]
    fn cgroup_v2_dir() {
        let dir = std::env::temp_dir().join(format!("sbc-alarms-cg-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("mkdir");
        fs::write(dir.join("memory.current"), "250\n").expect("write");
        fs::write(dir.join("memory.max"), "1000\n").expect("write");
        let mut s = MemorySampler::new(MemorySource::Cgroup {
            dir: Some(dir.clone()),
        })
        .expect("sampler");
        assert_eq!(s.sample().expect("sample").percent, 25.0);
        fs::write(dir.join("memory.max"), "max\n").expect("write");
        let e = s.sample().expect_err("no limit");
        assert!(matches!(e, SampleError::NoCgroupLimit { .. }), "{e}");
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn heap_sampler_sees_an_allocation() {
        // The lib's test binary uses jemalloc as its global allocator (see lib.rs).
        let heap = HeapSampler::new(1 << 30).expect("sampler");
        let before = heap.stats().expect("stats");
        let block = vec![7u8; 64 << 20];
        let during = heap.stats().expect("stats");
        assert!(
            during.allocated >= before.allocated + (60 << 20),
            "{before:?} -> {during:?}"
        );
        assert!(during.resident >= during.allocated / 2);
        assert!(heap.sample().expect("sample").percent >= 6.0);
        drop(block);
    }

    #[test]
    fn cpu_sampler_gives_a_percentage() {
        let mut cpu = CpuSampler::new().expect("sampler");
        std::thread::sleep(std::time::Duration::from_millis(250));
        let r = cpu.sample().expect("sample");
        assert!((0.0..=100.0).contains(&r.percent), "{r:?}");
    }

    #[test]
    fn the_allocator_housekeeping_runs_under_jemalloc() {
        // The tests run with jemalloc as the global allocator (a dev-dependency), as sbc does.
        let garbage: Vec<Vec<u8>> = (0..1000).map(|i| vec![0u8; 64 + i % 512]).collect();
        drop(garbage);
        release_thread_cache();
        release_thread_cache(); // twice: the cache is back on after the first
        use tikv_jemalloc_ctl::{Access as _, AsName as _};
        let enabled: Result<bool, _> = b"thread.tcache.enabled\0".name().read();
        assert_eq!(enabled.ok(), Some(true));
        assert!(enable_background_purge());
    }
}
