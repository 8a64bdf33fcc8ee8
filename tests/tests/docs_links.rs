//! Every relative link and image in `README.md` and the manual (`docs/**/*.md`) resolves.
//!
//! A link is `[text](target)`, `![alt](target)` or a reference definition `[name]: target`,
//! outside fenced code blocks and inline code spans. External links (`http://`, `https://`,
//! `mailto:`, anything with `://`) are not fetched. A relative target must name a file or a
//! directory that exists (relative to the file that links, or to the repository's root when it
//! starts with `/`, as GitHub reads it); a `#fragment` into a Markdown file must name one of
//! its headings by GitHub's slug rules (lower case, punctuation dropped, spaces to hyphens, a
//! repeated heading suffixed `-1`, `-2`, ...). A failure names the file, the line and the link.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root: this package lives in `tests/`.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// `README.md` and every `.md` file under `docs/`, sorted.
fn manual_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if let Some(open) = &fence {
            if marker.len() >= open.len() && marker.starts_with(&open[..1]) {
                fence = None;
            }
            continue;
        }
        if marker.len() >= 3
            && (marker.chars().all(|c| c == '`') || marker.chars().all(|c| c == '~'))
        {
            fence = Some(marker);
            continue;
        }
        out.push((i + 1, line.to_string()));
    }
    out
}

/// `line` with every inline code span (a run of backticks up to the same run) replaced by
/// spaces; an unclosed run is left as it is.
fn blank_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let r = chars[j..].iter().take_while(|&&c| c == '`').count();
                if r == run {
                    close = Some(j + r);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.extend(std::iter::repeat_n(' ', end - i));
                i = end;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The targets of the links and images on one prose line: `](target)` and `[name]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let trimmed = line.trim_start();
    if trimmed.starts_with('[') {
        if let Some(pos) = trimmed.find("]:") {
            let rest = trimmed[pos + 2..].trim();
            if let Some(t) = rest.split_whitespace().next() {
                targets.push(t.trim_matches(|c| c == '<' || c == '>').to_string());
            }
        }
    }
    let mut rest = line;
    while let Some(pos) = rest.find("](") {
        let after = &rest[pos + 2..];
        let mut depth = 0usize;
        let mut end = None;
        for (k, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(k);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inner = after[..end].trim();
        let target = if let Some(stripped) = inner.strip_prefix('<') {
            stripped.split('>').next().unwrap_or("")
        } else {
            inner.split_whitespace().next().unwrap_or("")
        };
        targets.push(target.to_string());
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchor of a heading's text: inline links reduced to their text, lower case,
/// everything but letters, digits, spaces, hyphens and underscores dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) -> text
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings (ATX headings outside code blocks), with GitHub's
/// `-1`, `-2` suffixes for repeats, and any `id="..."` or `name="..."` given in HTML.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    for (_, line) in prose_lines(text) {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let base = slug(trimmed[hashes..].trim().trim_end_matches('#'));
            let mut candidate = base.clone();
            let mut n = 0;
            while seen.contains(&candidate) {
                n += 1;
                candidate = format!("{base}-{n}");
            }
            seen.insert(candidate);
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = line.as_str();
            while let Some(pos) = rest.find(attr) {
                let after = &rest[pos + attr.len()..];
                if let Some(end) = after.find('"') {
                    seen.insert(after[..end].to_string());
                }
                rest = after;
            }
        }
    }
    seen
}

/// Every broken relative link of `file` (whose text is `text`), as `file:line: target: why`.
fn broken_links(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let shown = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let dir = file.parent().unwrap_or(root);
    let mut broken = Vec::new();
    for (number, line) in prose_lines(text) {
        // A link written inside backticks is not a link.
        for target in link_targets(&blank_code_spans(&line)) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with("tel:")
            {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                file.to_path_buf()
            } else if let Some(from_root) = path.strip_prefix('/') {
                root.join(from_root)
            } else {
                dir.join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{shown}:{number}: {target}: no such file"));
                continue;
            }
            let Some(fragment) = fragment.filter(|f| !f.is_empty()) else {
                continue;
            };
            if resolved.extension().is_none_or(|x| x != "md") {
                continue;
            }
            let target_text = match fs::read_to_string(&resolved) {
                Ok(t) => t,
                Err(e) => {
                    broken.push(format!("{shown}:{number}: {target}: {e}"));
                    continue;
                }
            };
            if !anchors(&target_text).contains(fragment) {
                broken.push(format!(
                    "{shown}:{number}: {target}: no heading #{fragment}"
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_of_the_readme_and_the_manual_resolves() {
    let root = repo_root();
    let files = manual_files(&root);
    assert!(
        files.len() > 1,
        "no docs/*.md found under {}",
        root.display()
    );
    let mut broken = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        broken.extend(broken_links(&root, file, &text));
    }
    assert!(
        broken.is_empty(),
        "{} broken link(s) in README.md and docs/:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn the_checker_finds_a_broken_file_a_broken_anchor_and_skips_code() {
    let root = std::env::temp_dir().join(format!("sbc-docs-links-{}", std::process::id()));
    let docs = root.join("docs");
    fs::create_dir_all(&docs).unwrap_or_else(|e| panic!("{}: {e}", docs.display()));
    fs::write(
        docs.join("a.md"),
        "# A title\n## The `sbc` crate: what it owns\n## Twice\n## Twice\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = "see [a](a.md#a-title) and [b](a.md#the-sbc-crate-what-it-owns) [c](a.md#twice-1)\n\
                ![img](missing.svg) and [gone](a.md#nowhere)\n\
                `[not a link](nowhere.md)` [ext](https://example.invalid/x)\n\
                ```\n[in a block](nowhere.md)\n```\n\
                [ref]: ../README.md\n";
    let file = docs.join("index.md");
    let broken = broken_links(&root, &file, text);
    let _ = fs::remove_dir_all(&root);
    assert_eq!(
        broken,
        vec![
            "docs/index.md:2: missing.svg: no such file".to_string(),
            "docs/index.md:2: a.md#nowhere: no heading #nowhere".to_string(),
            "docs/index.md:7: ../README.md: no such file".to_string(),
        ]
    );
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("Failover, measured"), "failover-measured");
    assert_eq!(slug("SIP over TLS"), "sip-over-tls");
    assert_eq!(
        slug("The PRSM experiment, against Kamailio"),
        "the-prsm-experiment-against-kamailio"
    );
    assert_eq!(slug("`sbc-proto`: the core"), "sbc-proto-the-core");
    assert_eq!(
        slug("Media vs [rtpengine](https://x)"),
        "media-vs-rtpengine"
    );
    assert_eq!(
        slug("Install as a service (.deb, systemd)"),
        "install-as-a-service-deb-systemd"
    );
}
