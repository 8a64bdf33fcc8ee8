//! The route table the engine asks (issue 28 item 7): the configured `local-policy`s and any
//! large route files ([`super::route_file`]), indexed by `to-address` prefix, immutable once
//! built.
//!
//! [`RouteTable::select`] returns exactly what the linear [`super::local_policy::select`] would
//! return over the same policies followed by the files' rows (each row a policy, see
//! [`super::route_file`]), in the same order, but looks only at the policies whose
//! `to-address` is a prefix of the called user (`*` being the empty prefix): one walk of an FST
//! per file and one for the policies, a node per character of the user. A million random
//! prefixes load in 1.0 s, keep 25 bytes each on the heap, and a lookup among them takes
//! 0.95 µs on average, 1.5 µs at the 99th percentile (2-core shared machine, release build,
//! `cargo run --release -p sbc-proto --example route_table -- 1000000`).
//!
//! Reloading (`activate-config`) is the caller's: build a new table off the call path and swap
//! an `Arc<RouteTable>`; calls in progress keep the old one until they drop it.

use super::local_policy::{normalize_user, AddressPattern, LocalPolicy, RouteQuery, SortKey};
use super::prefix_index::PrefixIndex;
use super::route_file::RouteFile;

/// The configured policies and route files, indexed by `to-address` prefix.
pub struct RouteTable {
    policies: Vec<LocalPolicy>,
    /// The enabled policies' indices into `policies`, sorted by `to-address` prefix (`*` as the
    /// empty prefix) and by index within one.
    by_to: Vec<u32>,
    /// Each prefix's run of `by_to`.
    index: PrefixIndex,
    files: Vec<RouteFile>,
}

/// A candidate next hop, borrowed from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'a> {
    /// `next-hop`: a session-agent name or `SAG:<group>`.
    pub next_hop: &'a str,
    /// The realm the request leaves by (`None`: the next hop's own).
    pub realm: Option<&'a str>,
    /// `cost`.
    pub cost: u32,
    /// `terminate-recursion`: a failure on this hop ends the hunt.
    pub terminate_recursion: bool,
    /// Where it was configured.
    pub origin: Origin,
}

/// Where a [`Route`] was configured; ordered as the table is (policies, then each file's rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// A `policy-attribute` of a `local-policy`.
    Policy {
        /// The policy's index in [`RouteTable::policies`].
        policy: usize,
        /// The attribute's index in its policy.
        attribute: usize,
    },
    /// A route file's row.
    File {
        /// The file's index in [`RouteTable::files`].
        file: usize,
        /// The row's line, from 1.
        line: u32,
    },
}

impl RouteTable {
    /// The table of `policies` (in configuration order) followed by the rows of `files`.
    ///
    /// # Panics
    /// With more than 2^32 - 1 policies.
    #[must_use]
    pub fn new(policies: Vec<LocalPolicy>, files: Vec<RouteFile>) -> Self {
        let mut keyed: Vec<(&str, u32)> = policies
            .iter()
            .enumerate()
            .filter(|(_, p)| p.enabled)
            .map(|(i, p)| {
                let to = match &p.to {
                    AddressPattern::Any => "",
                    AddressPattern::Prefix(prefix) => prefix.as_str(),
                };
                (to, u32::try_from(i).expect("fewer than 2^32 policies"))
            })
            .collect();
        keyed.sort_unstable();
        let mut runs: Vec<(&str, std::ops::Range<u32>)> = Vec::new();
        for (at, (to, _)) in (0u32..).zip(&keyed) {
            match runs.last_mut() {
                Some((last, run)) if last == to => run.end = at + 1,
                _ => runs.push((to, at..at + 1)),
            }
        }
        let index = PrefixIndex::from_sorted(runs);
        let by_to = keyed.into_iter().map(|(_, i)| i).collect();
        Self {
            policies,
            by_to,
            index,
            files,
        }
    }

    /// Every candidate next hop for `query`, most preferred first: the same candidates, in the
    /// same order, as [`super::local_policy::select`] over the policies followed by the files' rows.
    #[must_use]
    pub fn select(&self, query: &RouteQuery<'_>) -> Vec<Route<'_>> {
        let from = normalize_user(query.from_user);
        let to = normalize_user(query.to_user);
        let mut found: Vec<(SortKey, Route<'_>)> = Vec::with_capacity(8);
        self.index.walk(to.as_bytes(), |to_len, run| {
            for &i in &self.by_to[run] {
                let policy = i as usize;
                let p = &self.policies[policy];
                if p.source_realm
                    .as_deref()
                    .is_some_and(|r| r != "*" && r != query.source_realm)
                {
                    continue;
                }
                let Some(from_len) = p.from.matched(&from) else {
                    continue;
                };
                for (attribute, a) in p.attributes.iter().enumerate() {
                    if !a.applies(query.minute, query.weekday) {
                        continue;
                    }
                    found.push((
                        SortKey::of(p, a, to_len, from_len),
                        Route {
                            next_hop: &a.next_hop,
                            realm: a.realm.as_deref(),
                            cost: a.cost,
                            terminate_recursion: a.terminate_recursion,
                            origin: Origin::Policy { policy, attribute },
                        },
                    ));
                }
            }
        });
        for (file, f) in self.files.iter().enumerate() {
            if !f.accepts_realm(query.source_realm) {
                continue;
            }
            f.walk(&to, |to_len, row| {
                found.push((
                    SortKey::of_row(row.cost, to_len),
                    Route {
                        next_hop: f.name(row),
                        realm: None,
                        cost: row.cost,
                        terminate_recursion: false,
                        origin: Origin::File {
                            file,
                            line: row.line,
                        },
                    },
                ));
            });
        }
        // Origins are unique and in table order, so ties fall in table order.
        found.sort_unstable_by_key(|(key, route)| (*key, route.origin));
        found.into_iter().map(|(_, route)| route).collect()
    }

    /// The configured policies, in configuration order.
    #[must_use]
    pub fn policies(&self) -> &[LocalPolicy] {
        &self.policies
    }

    /// The route files, in the order given.
    #[must_use]
    pub fn files(&self) -> &[RouteFile] {
        &self.files
    }

    /// The bytes the files and the policies' index hold on the heap, about (the policies
    /// themselves not counted).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
            + self.by_to.capacity() * size_of::<u32>()
            + self.files.iter().map(RouteFile::heap_bytes).sum::<usize>()
    }
}

impl std::fmt::Debug for RouteTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteTable")
            .field("policies", &self.policies.len())
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

// Shared between the threads that route calls, behind an `Arc`.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<RouteTable>();
};

#[cfg(test)]
mod tests {
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::routing::local_policy::{Days, PolicyAttribute};
    use crate::routing::route_file::load_route_file;

    /// A route as both sides can state it, owned.
    type Seen = (Origin, String, Option<String>, u32, bool);

    fn seen(routes: &[Route<'_>]) -> Vec<Seen> {
        routes
            .iter()
            .map(|r| {
                (
                    r.origin,
                    r.next_hop.to_owned(),
                    r.realm.map(str::to_owned),
                    r.cost,
                    r.terminate_recursion,
                )
            })
            .collect()
    }

    /// The linear reference over `policies` followed by `files`' rows as policies (one per
    /// source realm), stated as [`Seen`].
    fn reference(
        policies: &[LocalPolicy],
        files: &[RouteFile],
        query: &RouteQuery<'_>,
    ) -> Vec<Seen> {
        let mut all = policies.to_vec();
        let mut origins: Vec<Option<Origin>> = vec![None; all.len()];
        for (file, f) in files.iter().enumerate() {
            let realms: Vec<Option<String>> =
                if f.source_realms().is_empty() || f.source_realms().iter().any(|r| r == "*") {
                    vec![None]
                } else {
                    let mut r: Vec<_> = f.source_realms().iter().cloned().map(Some).collect();
                    r.sort();
                    r.dedup();
                    r
                };
            for row in f.rows() {
                for realm in &realms {
                    all.push(LocalPolicy {
                        from: AddressPattern::Any,
                        to: if row.to.is_empty() {
                            AddressPattern::Any
                        } else {
                            AddressPattern::Prefix(row.to.clone())
                        },
                        source_realm: realm.clone(),
                        enabled: true,
                        attributes: vec![PolicyAttribute {
                            next_hop: row.next_hop.to_owned(),
                            realm: None,
                            cost: row.cost,
                            start: 0,
                            end: 2400,
                            days: Days::ALL,
                            terminate_recursion: false,
                            enabled: true,
                        }],
                    });
                    origins.push(Some(Origin::File {
                        file,
                        line: row.line,
                    }));
                }
            }
        }
        crate::routing::local_policy::select(&all, query)
            .iter()
            .map(|c| {
                let origin = origins[c.policy].unwrap_or_else(|| Origin::Policy {
                    policy: c.policy,
                    attribute: all[c.policy]
                        .attributes
                        .iter()
                        .position(|a| std::ptr::eq(a, c.attribute))
                        .expect("the candidate's attribute is its policy's"),
                });
                (
                    origin,
                    c.attribute.next_hop.clone(),
                    c.attribute.realm.clone(),
                    c.attribute.cost,
                    c.attribute.terminate_recursion,
                )
            })
            .collect()
    }

    fn pick<'a, T>(rng: &mut ChaCha8Rng, from: &'a [T]) -> &'a T {
        &from[rng.next_u32() as usize % from.len()]
    }

    fn below(rng: &mut ChaCha8Rng, n: u32) -> u32 {
        rng.next_u32() % n
    }

    /// A short user or prefix over few characters, so that many of them match.
    fn digits(rng: &mut ChaCha8Rng, max: u32) -> String {
        let len = below(rng, max + 1);
        (0..len).map(|_| *pick(rng, &['1', '2', '3'])).collect()
    }

    fn pattern(rng: &mut ChaCha8Rng, words: &[&str]) -> String {
        match below(rng, 4) {
            0 => "*".to_owned(),
            1 => (*pick(rng, words)).to_owned(),
            _ => digits(rng, 3),
        }
    }

    fn hhmm(rng: &mut ChaCha8Rng) -> u16 {
        *pick(rng, &[0, 600, 1200, 2200, 2400, 930, 1745])
    }

    fn random_policy(rng: &mut ChaCha8Rng) -> LocalPolicy {
        let attributes = (0..below(rng, 4))
            .map(|_| PolicyAttribute {
                next_hop: (*pick(rng, &["sa1", "sa2", "SAG:g", "sa3"])).to_owned(),
                realm: pick(rng, &[None, Some("egress".to_owned())]).clone(),
                cost: below(rng, 3),
                // All day half the time, as a file's rows are, to tie with them.
                start: if below(rng, 2) == 0 { 0 } else { hhmm(rng) },
                end: if below(rng, 2) == 0 { 2400 } else { hhmm(rng) },
                days: if below(rng, 2) == 0 {
                    Days::ALL
                } else {
                    Days::parse(pick::<&str>(rng, &["MTWRF", "US", "W", "UMW"])).expect("days")
                },
                terminate_recursion: below(rng, 4) == 0,
                enabled: below(rng, 6) != 0,
            })
            .collect();
        LocalPolicy {
            from: AddressPattern::parse(&pattern(rng, &["al", "alice", "bob"])),
            to: AddressPattern::parse(&pattern(rng, &["bo", "+1-2", "(12)3"])),
            source_realm: pick(rng, &[None, Some("*"), Some("core"), Some("access")])
                .map(str::to_owned),
            enabled: below(rng, 8) != 0,
            attributes,
        }
    }

    fn random_file(rng: &mut ChaCha8Rng) -> RouteFile {
        let mut text = String::from("# generated\n");
        for _ in 0..below(rng, 12) {
            let to = match below(rng, 6) {
                0 => "*".to_owned(),
                1 => "+1-2".to_owned(),
                _ => {
                    let d = digits(rng, 4);
                    if d.is_empty() {
                        "3".to_owned()
                    } else {
                        d
                    }
                }
            };
            let hop = pick(rng, &["fa", "fb", "SAG:fg"]);
            match below(rng, 3) {
                0 => text.push_str(&format!("{to},{hop}\n")),
                _ => text.push_str(&format!("{to},{hop},{}\n", below(rng, 3))),
            }
            if below(rng, 5) == 0 {
                text.push('\n');
            }
        }
        let realms = pick(
            rng,
            &[
                &[][..],
                &["*"],
                &["access"],
                &["core", "access", "core"],
                &["core"],
            ],
        )
        .iter()
        .map(|r| (*r).to_owned())
        .collect();
        load_route_file(text.as_bytes(), realms).expect("generated rows load")
    }

    #[test]
    fn the_table_selects_what_the_linear_reference_selects() {
        let mut rng = ChaCha8Rng::seed_from_u64(28);
        let mut candidates = 0;
        for _ in 0..400 {
            let policies: Vec<_> = (0..below(&mut rng, 14))
                .map(|_| random_policy(&mut rng))
                .collect();
            let files_a: Vec<_> = (0..below(&mut rng, 3))
                .map(|_| random_file(&mut rng))
                .collect();
            // The same files again, for the reference (a RouteFile is not Clone).
            let files_b: Vec<RouteFile> = files_a
                .iter()
                .map(|f| {
                    let text: String = {
                        let mut rows = f.rows();
                        rows.sort_by_key(|r| r.line);
                        let mut t = String::new();
                        let mut line = 1;
                        for r in rows {
                            while line < r.line {
                                t.push('\n');
                                line += 1;
                            }
                            let to = if r.to.is_empty() { "*" } else { &r.to };
                            t.push_str(&format!("{to},{},{}\n", r.next_hop, r.cost));
                            line += 1;
                        }
                        t
                    };
                    load_route_file(text.as_bytes(), f.source_realms().to_vec()).expect("reloads")
                })
                .collect();
            let table = RouteTable::new(policies.clone(), files_a);
            for _ in 0..50 {
                let to_user = match below(&mut rng, 6) {
                    0 => format!("+{}", digits(&mut rng, 6)),
                    1 => (*pick(&mut rng, &["bob", "bo", "+1-23", "(123)"])).to_owned(),
                    _ => digits(&mut rng, 7),
                };
                let from_user = match below(&mut rng, 3) {
                    0 => (*pick(&mut rng, &["alice", "al", "bob"])).to_owned(),
                    _ => digits(&mut rng, 4),
                };
                let query = RouteQuery {
                    from_user: &from_user,
                    to_user: &to_user,
                    source_realm: pick::<&str>(&mut rng, &["access", "core", "peer"]),
                    minute: below(&mut rng, 1440) as u16,
                    weekday: below(&mut rng, 7) as u8,
                };
                let got = seen(&table.select(&query));
                assert_eq!(got, reference(&policies, &files_b, &query), "{query:?}");
                candidates += got.len();
            }
        }
        // The generator makes tables that match, not only empty answers.
        assert!(candidates > 20_000, "{candidates}");
    }

    #[test]
    fn policies_and_file_rows_by_cost_then_longest_prefix() {
        let attr = |hop: &str, cost| PolicyAttribute {
            next_hop: hop.into(),
            realm: None,
            cost,
            start: 0,
            end: 2400,
            days: Days::ALL,
            terminate_recursion: false,
            enabled: true,
        };
        let policy = |to: &str, a| LocalPolicy {
            from: AddressPattern::Any,
            to: AddressPattern::parse(to),
            source_realm: None,
            enabled: true,
            attributes: vec![a],
        };
        let file = load_route_file(
            &b"44,carrier-a,10\n447,carrier-m,10\n44,carrier-b,10\n*,far,10\n"[..],
            vec!["access".into()],
        )
        .expect("loads");
        let table = RouteTable::new(
            vec![
                policy("*", attr("default", 50)),
                policy("44", attr("policy-44", 10)),
            ],
            vec![file],
        );
        let query = RouteQuery {
            from_user: "alice",
            to_user: "+44 7700",
            source_realm: "access",
            minute: 0,
            weekday: 0,
        };
        // "+44 7700" is no number (a space), so it is compared as it is: only `*` matches.
        let hops = |q: &RouteQuery<'_>| -> Vec<&str> {
            table.select(q).iter().map(|r| r.next_hop).collect()
        };
        assert_eq!(hops(&query), ["far", "default"]);
        let query = RouteQuery {
            to_user: "+44-7700",
            ..query
        };
        assert_eq!(
            hops(&query),
            [
                "carrier-m",
                "policy-44",
                "carrier-a",
                "carrier-b",
                "far",
                "default"
            ]
        );
        let from_core = RouteQuery {
            source_realm: "core",
            ..query
        };
        assert_eq!(hops(&from_core), ["policy-44", "default"]);
        assert_eq!(
            table.select(&query)[0].origin,
            Origin::File { file: 0, line: 2 }
        );
    }
}
