//! Large route tables kept in text files (Oracle's "local route tables"; here a file per
//! `local-routing-config` element), read into a compact immutable form.
//!
//! # Format
//!
//! One row per line, `to-address,next-hop[,cost]`:
//!
//! ```text
//! # UK mobiles to the mobile carrier, fixed lines to two carriers by cost
//! 447,carrier-m
//! 44,carrier-a,10
//! 44,SAG:carriers-b,20
//! *,default-sbc,100
//! ```
//!
//! `to-address` is a prefix of the Request-URI user, normalised like a policy's (a leading `+`
//! and the visual separators `-` `.` `(` `)` dropped from a number), or `*` for any user;
//! `next-hop` is a session-agent name or `SAG:<group>`; `cost` is a whole number (0 when
//! left out), lower preferred. Spaces around fields are ignored; a `#` line and a blank line are
//! skipped. A prefix may have several rows: each is a candidate, tried by cost (rows of equal
//! cost in file order).
//!
//! Each row acts as a `local-policy` from `*` to its prefix, in the source realms the caller
//! gives (the element's `source-realm` list; `*` or none: any realm), enabled, with one
//! attribute of its next hop and cost, every day, all day, in no realm of its own.
//!
//! # Memory
//!
//! A loaded file holds its prefixes in an FST (see `prefix_index`), its rows as 12 bytes each
//! (an index into a table of next-hop names, the cost, the line number) sorted by prefix, and
//! each distinct next-hop name once: about 25 bytes per prefix for a million random ones
//! (measured by `examples/route_table.rs`).

use std::io::{BufRead, Read};

use fnv::FnvHashMap;
use sha2::{Digest, Sha256};

use super::local_policy::AddressPattern;
use super::prefix_index::PrefixIndex;

/// The longest line read, in bytes: a longer one is refused rather than buffered.
pub const MAX_LINE: usize = 4096;

/// The form of a row, as errors state it.
const EXPECTED: &str = "to-address,next-hop[,cost]";

/// A route file, loaded: its rows indexed by prefix, immutable.
pub struct RouteFile {
    source_realms: Vec<String>,
    /// Each distinct next-hop name once; rows refer to them by index.
    names: Vec<Box<str>>,
    /// Each prefix's run of `rows`.
    index: PrefixIndex,
    /// Sorted by prefix, and by line within a prefix.
    rows: Vec<Row>,
    checksum: String,
}

/// One row as stored: 12 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    /// Index into `names`.
    hop: u32,
    pub(crate) cost: u32,
    pub(crate) line: u32,
}

/// One row of a route file, as [`RouteFile::rows`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRow<'a> {
    /// Its line in the file, from 1.
    pub line: u32,
    /// The normalised `to-address` prefix (empty for `*`).
    pub to: String,
    /// `next-hop`.
    pub next_hop: &'a str,
    /// `cost`.
    pub cost: u32,
}

/// Why a route file was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum RouteFileError {
    /// Reading the file failed.
    #[error("route file, line {line}: read failed: {source}")]
    Read {
        /// The line being read, from 1.
        line: u64,
        /// The reader's error.
        source: std::io::Error,
    },
    /// A line is not a row of the expected form.
    #[error("route file, line {line}: {problem} in {text:?}; expected `{EXPECTED}` (cost a whole number, default 0)")]
    Row {
        /// The line, from 1.
        line: u64,
        /// The line's text (at most 200 characters of it).
        text: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// More rows than the index can number (2^32 - 1).
    #[error("route file: more than {} rows", u32::MAX)]
    TooManyRows,
}

/// Reads a route file (see the module docs for its form) whose rows apply to requests from
/// `source_realms` (`*` in it, or none: any realm).
///
/// # Errors
/// The first line that is not a row, naming its number and text; a read error.
pub fn load_route_file(
    mut reader: impl BufRead,
    source_realms: Vec<String>,
) -> Result<RouteFile, RouteFileError> {
    let mut hasher = Sha256::new();
    let mut names: Vec<Box<str>> = Vec::new();
    let mut ids: FnvHashMap<Box<str>, u32> = FnvHashMap::default();
    let mut staged: Vec<(String, Row)> = Vec::new();
    let mut buf = Vec::new();
    let mut line: u64 = 0;
    loop {
        buf.clear();
        line += 1;
        let read = reader
            .by_ref()
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|source| RouteFileError::Read { line, source })?;
        if read == 0 {
            break;
        }
        let bad = |problem, text: &[u8]| RouteFileError::Row {
            line,
            text: String::from_utf8_lossy(text).chars().take(200).collect(),
            problem,
        };
        if buf.len() > MAX_LINE {
            return Err(bad("line longer than 4096 bytes", &buf));
        }
        hasher.update(&buf);
        let Ok(text) = std::str::from_utf8(&buf) else {
            return Err(bad("text not UTF-8", &buf));
        };
        let text = text.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let (to, hop, cost) = parse_row(text).map_err(|problem| bad(problem, text.as_bytes()))?;
        let hop = match ids.get(hop) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(names.len()).map_err(|_| RouteFileError::TooManyRows)?;
                names.push(hop.into());
                ids.insert(hop.into(), id);
                id
            }
        };
        let line_u32 = u32::try_from(line).map_err(|_| RouteFileError::TooManyRows)?;
        staged.push((
            to,
            Row {
                hop,
                cost,
                line: line_u32,
            },
        ));
    }
    if u32::try_from(staged.len()).is_err() {
        return Err(RouteFileError::TooManyRows);
    }
    // Stable: a prefix's rows stay in file order.
    staged.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rows = Vec::with_capacity(staged.len());
    let mut runs: Vec<(String, std::ops::Range<u32>)> = Vec::new();
    for (to, row) in staged {
        // Fits: checked above.
        let at = rows.len() as u32;
        match runs.last_mut() {
            Some((last, run)) if *last == to => run.end = at + 1,
            _ => runs.push((to, at..at + 1)),
        }
        rows.push(row);
    }
    names.shrink_to_fit();
    let index = PrefixIndex::from_sorted(runs);
    let checksum = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(RouteFile {
        source_realms,
        names,
        index,
        rows,
        checksum,
    })
}

/// A row's prefix (normalised; empty for `*`), next hop and cost, or what is wrong with it.
fn parse_row(text: &str) -> Result<(String, &str, u32), &'static str> {
    let mut fields = text.split(',').map(str::trim);
    let to = fields.next().unwrap_or_default();
    let Some(hop) = fields.next() else {
        return Err("no next-hop");
    };
    let cost = fields.next();
    if fields.next().is_some() {
        return Err("more than three fields");
    }
    if to.is_empty() {
        return Err("empty to-address");
    }
    if to.contains(char::is_whitespace) {
        return Err("a space in the to-address");
    }
    if hop.is_empty() {
        return Err("empty next-hop");
    }
    if hop.contains(char::is_whitespace) {
        return Err("a space in the next-hop");
    }
    if hop.strip_prefix("SAG:").is_some_and(str::is_empty) {
        return Err("SAG: without a group name");
    }
    let cost = match cost {
        None => 0,
        Some(c) => c.parse().map_err(|_| "a cost that is not a whole number")?,
    };
    let to = match AddressPattern::parse(to) {
        AddressPattern::Any => String::new(),
        AddressPattern::Prefix(p) => p,
    };
    Ok((to, hop, cost))
}

impl RouteFile {
    /// How many rows it has.
    #[must_use]
    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// How many distinct prefixes its rows have.
    #[must_use]
    pub fn prefix_count(&self) -> usize {
        self.index.len()
    }

    /// The SHA-256 of the file's bytes, in lowercase hex (what `show` reports, to tell which
    /// version of the file is loaded).
    #[must_use]
    pub fn checksum(&self) -> &str {
        &self.checksum
    }

    /// The source realms its rows apply to, as given.
    #[must_use]
    pub fn source_realms(&self) -> &[String] {
        &self.source_realms
    }

    /// Whether its rows apply to a request from `realm`.
    #[must_use]
    pub fn accepts_realm(&self, realm: &str) -> bool {
        self.source_realms.is_empty() || self.source_realms.iter().any(|r| r == "*" || r == realm)
    }

    /// Its rows, in file order.
    #[must_use]
    pub fn rows(&self) -> Vec<RouteRow<'_>> {
        let mut all = Vec::with_capacity(self.rows.len());
        for (to, run) in self.index.runs() {
            let to = String::from_utf8_lossy(&to).into_owned();
            for row in &self.rows[run] {
                all.push(RouteRow {
                    line: row.line,
                    to: to.clone(),
                    next_hop: self.name(row),
                    cost: row.cost,
                });
            }
        }
        all.sort_by_key(|r| r.line);
        all
    }

    /// The bytes it holds on the heap (its index, rows, names and realms), about.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
            + self.rows.capacity() * size_of::<Row>()
            + self.names.capacity() * size_of::<Box<str>>()
            + self.names.iter().map(|n| n.len()).sum::<usize>()
            + self
                .source_realms
                .iter()
                .map(|r| r.capacity() + size_of::<String>())
                .sum::<usize>()
            + self.checksum.capacity()
    }

    /// Calls `found(prefix_length, row)` for each row whose prefix `to` (normalised) starts
    /// with.
    pub(crate) fn walk(&self, to: &str, mut found: impl FnMut(usize, &Row)) {
        self.index.walk(to.as_bytes(), |len, run| {
            for row in &self.rows[run] {
                found(len, row);
            }
        });
    }

    /// A row's next-hop name.
    pub(crate) fn name(&self, row: &Row) -> &str {
        // Every row's index was given by `names` when it was read.
        &self.names[row.hop as usize]
    }
}

impl std::fmt::Debug for RouteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteFile")
            .field("rows", &self.rows.len())
            .field("prefixes", &self.index.len())
            .field("names", &self.names.len())
            .field("source_realms", &self.source_realms)
            .field("checksum", &self.checksum)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<RouteFile, RouteFileError> {
        load_route_file(text.as_bytes(), vec!["*".into()])
    }

    #[test]
    fn rows_comments_blanks_defaults_and_repeated_prefixes() {
        let text = "# carriers\n\n+44(20),carrier-a,10\n 44 , SAG:b ,20\n447,carrier-m\n*,default,100\n44,carrier-a,5";
        let file = load(text).expect("loads");
        assert_eq!(file.row_count(), 5);
        assert_eq!(file.prefix_count(), 4);
        let rows: Vec<_> = file
            .rows()
            .into_iter()
            .map(|r| (r.line, r.to, r.next_hop.to_owned(), r.cost))
            .collect();
        assert_eq!(
            rows,
            [
                (3, "4420".to_owned(), "carrier-a".to_owned(), 10),
                (4, "44".to_owned(), "SAG:b".to_owned(), 20),
                (5, "447".to_owned(), "carrier-m".to_owned(), 0),
                (6, String::new(), "default".to_owned(), 100),
                (7, "44".to_owned(), "carrier-a".to_owned(), 5),
            ]
        );
        // One name for both carrier-a rows.
        assert_eq!(file.names.len(), 4);
    }

    #[test]
    fn a_bad_row_is_named_by_line_text_and_expected_form() {
        for (text, line, problem) in [
            ("1,a\n2\n", 2, "no next-hop"),
            ("1,a,1,2", 1, "more than three fields"),
            ("# x\n,a", 2, "empty to-address"),
            ("1,", 1, "empty next-hop"),
            ("1,a b", 1, "a space in the next-hop"),
            ("1 2,a", 1, "a space in the to-address"),
            ("1,SAG:", 1, "SAG: without a group name"),
            ("1,a,-1", 1, "a cost that is not a whole number"),
            ("1,a,99999999999", 1, "a cost that is not a whole number"),
        ] {
            let err = load(text).expect_err(text);
            let RouteFileError::Row {
                line: l,
                problem: p,
                ..
            } = &err
            else {
                panic!("{err}");
            };
            assert_eq!((*l, *p), (line, problem), "{text}");
            let shown = err.to_string();
            assert!(shown.contains(&format!("line {line}")), "{shown}");
            assert!(shown.contains("to-address,next-hop[,cost]"), "{shown}");
        }
        let err = load("1,a,x\n").expect_err("bad cost");
        assert!(err.to_string().contains("\"1,a,x\""), "{err}");
        let long = format!("1,{}\n", "a".repeat(MAX_LINE));
        assert!(matches!(
            load(&long),
            Err(RouteFileError::Row { line: 1, .. })
        ));
        let not_utf8: &[u8] = b"1,\xff\n";
        assert!(matches!(
            load_route_file(not_utf8, Vec::new()),
            Err(RouteFileError::Row {
                problem: "text not UTF-8",
                ..
            })
        ));
    }

    #[test]
    fn checksum_is_the_sha256_of_the_bytes() {
        // printf '1,a\n# c\n' | sha256sum
        let file = load("1,a\n# c\n").expect("loads");
        assert_eq!(
            file.checksum(),
            "7252a0b453622bdb503bf54e16eba6770efe588b4e7c2449c9452c94e7d49baf"
        );
        let empty = load("").expect("loads");
        assert_eq!(empty.row_count(), 0);
        assert_eq!(
            empty.checksum(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn realms() {
        let file = |realms: &[&str]| {
            load_route_file(
                &b"1,a"[..],
                realms.iter().map(|r| (*r).to_owned()).collect(),
            )
            .expect("loads")
        };
        assert!(file(&[]).accepts_realm("x"));
        assert!(file(&["core", "*"]).accepts_realm("x"));
        assert!(file(&["core", "access"]).accepts_realm("access"));
        assert!(!file(&["core"]).accepts_realm("access"));
    }
}
