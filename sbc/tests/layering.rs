//! The shell's layering, checked on its source (issue 25): no import circles between the
//! top-level modules of `sbc`, `sbc-alarms` and `sbc-snmp`, and the configuration model
//! (`sbc_config`) read in `sbc/src` only where a configuration becomes settings (`settings`),
//! where a node is started from one (`app`, the binary's `main`) and by the console (`control`),
//! which edits, saves and activates it.
//!
//! A module's imports are the `crate::<module>` paths in its code (comments and its
//! `#[cfg(test)] mod tests` left out: tests may build settings from a configuration).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

/// Every `.rs` file under `dir` with its module path below `dir` (`foo.rs` and `foo/mod.rs`:
/// `["foo"]`; `foo/bar.rs`: `["foo", "bar"]`; the crate root files `lib.rs` and `main.rs`, and
/// `dir`'s own `mod.rs`: `[]`).
fn sources(dir: &Path) -> Vec<(Vec<String>, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let Ok(rel) = path.strip_prefix(dir) else {
                continue;
            };
            let mut module: Vec<String> = rel
                .components()
                .map(|c| {
                    c.as_os_str()
                        .to_string_lossy()
                        .trim_end_matches(".rs")
                        .to_owned()
                })
                .collect();
            if module.last().is_some_and(|l| l == "mod") {
                module.pop();
            }
            if module.len() == 1 && (module[0] == "lib" || module[0] == "main") {
                module.clear();
            }
            out.push((module, path));
        }
    }
    out.sort();
    out
}

/// A file's code: without its test module (`tests.rs` files are test modules) and comments.
fn code(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first path segment of each item a path continues with at `rest` (just after a `::`):
/// `foo::bar` gives `foo`, `{foo, bar::baz}` gives `foo` and `bar`.
fn first_segments(rest: &str) -> Vec<String> {
    let ident = |t: &str| -> String {
        t.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(ident(&group[start..i]));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(ident(&group[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// The modules directly below `dir` (`prefix` names it from its crate: `crate::` for a
/// crate's `src`, `crate::control::` for `sbc/src/control`) and which of them each imports,
/// by `prefix` paths or by enough `super::` to reach `dir`.
fn imports(dir: &Path, prefix: &str) -> BTreeMap<String, BTreeSet<String>> {
    let files = sources(dir);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|(m, _)| m.first().cloned())
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for (path_in, file) in &files {
        let Some(module) = path_in.first() else {
            continue;
        };
        let code = code(file);
        let up = "super::".repeat(path_in.len());
        for anchor in [prefix, up.as_str()] {
            for (i, _) in code.match_indices(anchor) {
                // `super::super::x` is not `super::x` of a deeper file.
                if anchor == up && code[..i].ends_with("super::") {
                    continue;
                }
                for name in first_segments(&code[i + anchor.len()..]) {
                    if &name != module && modules.contains(&name) {
                        graph.entry(module.clone()).or_default().insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut c = path[at..].to_vec();
            c.push(node.to_owned());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_import_circles_between_modules() {
    for (dir, prefix) in [
        ("sbc/src", "crate::"),
        ("sbc/src/control", "crate::control::"),
        ("sbc/src/runtime", "crate::runtime::"),
        ("sbc/src/workers", "crate::workers::"),
        ("alarms/src", "crate::"),
        ("snmp/src", "crate::"),
    ] {
        let graph = imports(&root().join(dir), prefix);
        assert!(graph.len() > 3, "{dir}: too few modules found: {graph:?}");
        if let Some(c) = cycle(&graph) {
            panic!("{dir}: an import circle: {}", c.join(" -> "));
        }
    }
}

#[test]
fn grouped_and_relative_imports_are_seen() {
    assert_eq!(
        first_segments("{alarm_service::AlarmService, pair::{Pair, Hooks}, runtime};"),
        ["alarm_service", "pair", "runtime"]
    );
    assert_eq!(first_segments("status::NodeStatus;"), ["status"]);
}

#[test]
fn the_circle_check_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        cycle(&graph).map(|c| c.join(" -> ")),
        Some("a -> b -> c -> a".to_owned())
    );
}

#[test]
fn only_settings_app_and_the_console_read_the_configuration_model() {
    let dir = root().join("sbc/src");
    let allowed = ["settings", "app", "control"];
    let mut readers = Vec::new();
    for (module, path) in sources(&dir) {
        let is_main = path.file_name().is_some_and(|n| n == "main.rs") && module.is_empty();
        if is_main
            || module
                .first()
                .is_some_and(|m| allowed.contains(&m.as_str()))
        {
            continue;
        }
        let code = code(&path);
        if code.contains("sbc_config::") || code.contains("use sbc_config") {
            readers.push(
                path.strip_prefix(&dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            );
        }
    }
    assert!(
        readers.is_empty(),
        "these modules read sbc_config; give them typed settings from sbc::settings: {readers:?}"
    );
}
