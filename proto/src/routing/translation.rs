//! Oracle's `translation-rules` and `session-translation`, sans IO (issue 28's groundwork: not
//! wired into the engine or the configuration yet): rewriting the calling and called users.
//!
//! # The rules as implemented
//!
//! A user is a string of characters; an *index* is a position between characters: 0 is before
//! the leftmost one, `n` after the n-th, and `$` ([`StringIndex::End`]) the end, whatever the
//! length (Oracle prints `$` as 999999999; [`StringIndex::parse`] reads both as the end).
//!
//! - `add`: `add-string` is inserted at `add-index`. An index past the end appends, as `$` does.
//! - `delete`: `delete-string` is removed when it is found at `delete-index`: at `At(i)` the
//!   characters `i..i+len` must match, at `$` the last `len` characters (a suffix). In a delete
//!   rule `@` in `delete-string` matches any one character (Oracle's wildcard: `@@@` removes
//!   three characters whatever they are). When the string is not there, or is empty, nothing
//!   changes.
//! - `replace`: Oracle's "first the delete parameters, then the add parameters": the delete
//!   as above (but `@` is literal, Oracle's wildcard "only works if the type is delete"), and
//!   only when it removed something, `add-string` is inserted at `add-index` of the shortened
//!   user. So an empty or absent `delete-string` inserts nothing (as Oracle documents), and the
//!   usual replacement in place is written with `add-index` equal to `delete-index`
//!   (`$` and `$` for a suffix).
//! - `none`: the rule is off.
//!
//! A [`SessionTranslation`] applies its rules in order, each on the result of the one before
//! (chained, what kamailio#764 asks of `dialplan`). Users are compared and rewritten raw, as they
//! stand in the URI (no unescaping), and indexes count characters, not bytes.
//! [`rewrite_uri_user`] puts the new user back into a header value, every other byte unchanged.
//! [`TranslationRule::validate`] reports what Oracle's configuration refuses: `@` or `$` in
//! `add-string`, and a `delete-string` that mixes `@` with other characters (`123@@@`).

use thiserror::Error;

/// A translation rule's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuleKind {
    /// `add`: insert `add-string` at `add-index`.
    Add,
    /// `delete`: remove `delete-string` (with `@` wildcards) at `delete-index`.
    Delete,
    /// `replace`: the delete, then (only if it removed something) the add.
    Replace,
    /// `none`: the rule does nothing (Oracle's default).
    #[default]
    None,
}

/// `add-index` or `delete-index`: a character position, or `$` for the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringIndex {
    /// Position `n`: before the character at `n` (0 is before the leftmost).
    At(usize),
    /// `$`: the end of the user, whatever its length.
    End,
}

impl Default for StringIndex {
    fn default() -> Self {
        Self::At(0)
    }
}

impl StringIndex {
    /// The number Oracle shows for `$` (`show` prints 999999999 for an `add-index` of `$`).
    pub const ORACLE_END: usize = 999_999_999;

    /// The index a configuration word means: `$` or a number 0..=999999999 (999999999 is `$`).
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        if word == "$" {
            return Some(Self::End);
        }
        if word.is_empty() || !word.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        match word.parse::<usize>().ok()? {
            Self::ORACLE_END => Some(Self::End),
            n if n < Self::ORACLE_END => Some(Self::At(n)),
            _ => None,
        }
    }
}

/// What Oracle's configuration refuses in a translation rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RuleError {
    /// `add-string` holds `@` or `$`: it must be a real value.
    #[error("add-string must be a real value, without @ or $")]
    WildcardInAddString,
    /// `delete-string` mixes `@` with other characters (`123@@@`): all wildcards or none.
    #[error("delete-string must be all @ wildcards or none (not 123@@@)")]
    MixedDeleteString,
}

/// One of Oracle's `translation-rules`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TranslationRule {
    /// `type`.
    pub kind: RuleKind,
    /// `add-string`.
    pub add_string: String,
    /// `add-index`.
    pub add_index: StringIndex,
    /// `delete-string` (`@` matches any one character in a delete rule).
    pub delete_string: String,
    /// `delete-index`.
    pub delete_index: StringIndex,
}

impl TranslationRule {
    /// An `add` rule.
    #[must_use]
    pub fn add(add_string: &str, add_index: StringIndex) -> Self {
        Self {
            kind: RuleKind::Add,
            add_string: add_string.to_owned(),
            add_index,
            ..Self::default()
        }
    }

    /// A `delete` rule.
    #[must_use]
    pub fn delete(delete_string: &str, delete_index: StringIndex) -> Self {
        Self {
            kind: RuleKind::Delete,
            delete_string: delete_string.to_owned(),
            delete_index,
            ..Self::default()
        }
    }

    /// A `replace` rule: `delete_string` at `delete_index`, then `add_string` at `add_index`.
    #[must_use]
    pub fn replace(
        delete_string: &str,
        delete_index: StringIndex,
        add_string: &str,
        add_index: StringIndex,
    ) -> Self {
        Self {
            kind: RuleKind::Replace,
            add_string: add_string.to_owned(),
            add_index,
            delete_string: delete_string.to_owned(),
            delete_index,
        }
    }

    /// Whether Oracle's configuration would accept the rule (see the module docs).
    pub fn validate(&self) -> Result<(), RuleError> {
        if self.add_string.contains(['@', '$']) {
            return Err(RuleError::WildcardInAddString);
        }
        let wild = self.delete_string.chars().filter(|&c| c == '@').count();
        if wild > 0 && wild != self.delete_string.chars().count() {
            return Err(RuleError::MixedDeleteString);
        }
        Ok(())
    }

    /// The user after this rule.
    #[must_use]
    pub fn apply(&self, user: &str) -> String {
        let mut chars: Vec<char> = user.chars().collect();
        match self.kind {
            RuleKind::None => {}
            RuleKind::Add => insert(&mut chars, &self.add_string, self.add_index),
            RuleKind::Delete => {
                remove(&mut chars, &self.delete_string, self.delete_index, true);
            }
            RuleKind::Replace => {
                if remove(&mut chars, &self.delete_string, self.delete_index, false) {
                    insert(&mut chars, &self.add_string, self.add_index);
                }
            }
        }
        chars.into_iter().collect()
    }
}

/// Inserts `s` at `at` (past the end appends).
fn insert(chars: &mut Vec<char>, s: &str, at: StringIndex) {
    let pos = match at {
        StringIndex::At(i) => i.min(chars.len()),
        StringIndex::End => chars.len(),
    };
    chars.splice(pos..pos, s.chars());
}

/// Removes `pattern` at `at` if it is there (`@` any one character when `wildcard`); whether it
/// removed something.
fn remove(chars: &mut Vec<char>, pattern: &str, at: StringIndex, wildcard: bool) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let len = pattern.len();
    if len == 0 || len > chars.len() {
        return false;
    }
    let start = match at {
        StringIndex::At(i) => i,
        StringIndex::End => chars.len() - len,
    };
    let Some(window) = start.checked_add(len).and_then(|end| chars.get(start..end)) else {
        return false;
    };
    let matches = window
        .iter()
        .zip(&pattern)
        .all(|(&c, &p)| c == p || (wildcard && p == '@'));
    if matches {
        chars.drain(start..start + len);
    }
    matches
}

/// Oracle's `session-translation`: the rules for the calling user (`rules-calling`, the From
/// user) and for the called user (`rules-called`, the Request-URI and To user).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionTranslation {
    /// `rules-calling`, applied in order.
    pub calling: Vec<TranslationRule>,
    /// `rules-called`, applied in order.
    pub called: Vec<TranslationRule>,
}

impl SessionTranslation {
    /// The called user after `rules-called`, each rule on the previous one's result.
    #[must_use]
    pub fn translate_called(&self, user: &str) -> String {
        chain(&self.called, user)
    }

    /// The calling user after `rules-calling`, each rule on the previous one's result.
    #[must_use]
    pub fn translate_calling(&self, user: &str) -> String {
        chain(&self.calling, user)
    }
}

/// `rules` applied one after the other.
fn chain(rules: &[TranslationRule], user: &str) -> String {
    rules
        .iter()
        .fold(user.to_owned(), |user, rule| rule.apply(&user))
}

/// The user part of the `sip:`, `sips:` or `tel:` URI in a header value (a name-addr
/// `"Name" <sip:user@host;params>;tag=x`, an addr-spec `sip:user@host`, or a bare URI, such as a
/// Request-URI), raw; `None` when it has none (no `@`, an empty user, another scheme).
#[must_use]
pub fn uri_user(value: &str) -> Option<&str> {
    let (start, end) = user_span(value)?;
    value.get(start..end)
}

/// `value` with the user part of its URI replaced by `f(user)`, every other byte unchanged
/// (display name, password, host, parameters, header parameters); `None` when there is no user
/// part (see [`uri_user`]).
pub fn rewrite_uri_user(value: &str, f: impl FnOnce(&str) -> String) -> Option<String> {
    let (start, end) = user_span(value)?;
    let user = value.get(start..end)?;
    let new = f(user);
    let mut out = String::with_capacity(value.len() - user.len() + new.len());
    out.push_str(&value[..start]);
    out.push_str(&new);
    out.push_str(&value[end..]);
    Some(out)
}

/// Byte range of the URI's user in `value`.
fn user_span(value: &str) -> Option<(usize, usize)> {
    let uri = uri_start(value)?;
    let rest = &value[uri..];
    let colon = rest.find(':')?;
    let scheme = &rest[..colon];
    let body_at = uri + colon + 1;
    let body = &value[body_at..];
    if scheme.eq_ignore_ascii_case("sip") || scheme.eq_ignore_ascii_case("sips") {
        // userinfo = user [":" password] "@": ';' may be in the user, these may not.
        let at = body.find(|c: char| {
            matches!(c, '@' | '>' | '<' | '?' | '/' | ',' | '"') || c.is_ascii_whitespace()
        })?;
        if body.as_bytes().get(at) != Some(&b'@') {
            return None;
        }
        let user_len = body[..at].find(':').unwrap_or(at);
        (user_len > 0).then_some((body_at, body_at + user_len))
    } else if scheme.eq_ignore_ascii_case("tel") {
        // telephone-subscriber: the number up to its parameters.
        let len = body
            .find(|c: char| matches!(c, ';' | '>' | '?' | ',') || c.is_ascii_whitespace())
            .unwrap_or(body.len());
        (len > 0).then_some((body_at, body_at + len))
    } else {
        None
    }
}

/// Byte offset where the URI starts: after `<` in a name-addr (a quoted display name may hold
/// `<`), else at the first non-blank character.
fn uri_start(value: &str) -> Option<usize> {
    let bytes = value.as_bytes();
    let mut i = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let first = i;
    if bytes[i] == b'"' {
        i += 1;
        loop {
            match bytes.get(i)? {
                b'\\' => i += 2,
                b'"' => {
                    i += 1;
                    break;
                }
                _ => i += 1,
            }
        }
    }
    match value[i..].find('<') {
        Some(lt) => {
            let after = i + lt + 1;
            let blank = value[after..]
                .bytes()
                .take_while(u8::is_ascii_whitespace)
                .count();
            Some(after + blank)
        }
        // A quoted display name with no `<` after it is no name-addr.
        None if i != first => None,
        None => Some(first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StringIndex::{At, End};

    #[test]
    fn index_words() {
        assert_eq!(StringIndex::parse("$"), Some(End));
        assert_eq!(StringIndex::parse("0"), Some(At(0)));
        assert_eq!(StringIndex::parse("12"), Some(At(12)));
        assert_eq!(StringIndex::parse("999999999"), Some(End));
        assert_eq!(StringIndex::parse("1000000000"), None);
        assert_eq!(StringIndex::parse("-1"), None);
        assert_eq!(StringIndex::parse("+1"), None);
        assert_eq!(StringIndex::parse(""), None);
    }

    #[test]
    fn add_at_index_and_end() {
        // Index 0 is before the leftmost character; $ the end.
        assert_eq!(
            TranslationRule::add("1", At(0)).apply("6175551234"),
            "16175551234"
        );
        assert_eq!(TranslationRule::add("-", At(3)).apply("617555"), "617-555");
        assert_eq!(TranslationRule::add("#", End).apply("1234"), "1234#");
        // Past the end appends, as Oracle's 999999999 does.
        assert_eq!(TranslationRule::add("#", At(10)).apply("1234"), "1234#");
        assert_eq!(TranslationRule::add("9", At(0)).apply(""), "9");
    }

    #[test]
    fn delete_literal_at_index() {
        assert_eq!(
            TranslationRule::delete("1", At(0)).apply("16175551234"),
            "6175551234"
        );
        assert_eq!(
            TranslationRule::delete("555", At(3)).apply("6175551234"),
            "6171234"
        );
        // Not there: unchanged.
        assert_eq!(
            TranslationRule::delete("2", At(0)).apply("16175551234"),
            "16175551234"
        );
        assert_eq!(TranslationRule::delete("34", At(9)).apply("1234"), "1234");
        assert_eq!(
            TranslationRule::delete("12345", At(0)).apply("1234"),
            "1234"
        );
        // Empty delete-string removes nothing.
        assert_eq!(TranslationRule::delete("", At(0)).apply("1234"), "1234");
    }

    #[test]
    fn delete_suffix_at_end() {
        assert_eq!(TranslationRule::delete("#", End).apply("1234#"), "1234");
        assert_eq!(TranslationRule::delete("#", End).apply("12#34"), "12#34");
        assert_eq!(TranslationRule::delete("1234", End).apply("1234"), "");
    }

    #[test]
    fn delete_wildcards_as_oracle_documents() {
        // delete-string=@@@@@ removes five characters, whatever they are.
        let rule = TranslationRule::delete("@@@@@", At(0));
        assert_eq!(rule.validate(), Ok(()));
        assert_eq!(rule.apply("0114412345"), "12345");
        assert_eq!(rule.apply("1234"), "1234");
        // Three trailing characters (an extension) at $.
        assert_eq!(
            TranslationRule::delete("@@@", End).apply("5551234x99"),
            "5551234"
        );
        // delete-string=123456 is a literal.
        assert_eq!(TranslationRule::delete("123456", At(0)).validate(), Ok(()));
    }

    #[test]
    fn replace_is_delete_then_add() {
        // A leading 0 replaced by +44: both indexes 0.
        let rule = TranslationRule::replace("0", At(0), "+44", At(0));
        assert_eq!(rule.apply("02079460000"), "+442079460000");
        // Not there: nothing deleted, so nothing added.
        assert_eq!(rule.apply("2079460000"), "2079460000");
        // A suffix replaced: both indexes $.
        let rule = TranslationRule::replace("#", End, "*", End);
        assert_eq!(rule.apply("1234#"), "1234*");
        // The add uses its own index, on the shortened user.
        let rule = TranslationRule::replace("617", At(0), "1", At(3));
        assert_eq!(rule.apply("6175551234"), "55511234");
        let rule = TranslationRule::replace("617", At(0), "1", End);
        assert_eq!(rule.apply("6175551234"), "55512341");
        // An empty delete-string inserts nothing (Oracle's documented case).
        assert_eq!(
            TranslationRule::replace("", At(0), "9", At(0)).apply("123"),
            "123"
        );
        // @ is literal in a replace rule.
        assert_eq!(
            TranslationRule::replace("@", At(0), "9", At(0)).apply("123"),
            "123"
        );
        assert_eq!(
            TranslationRule::replace("@", At(0), "9", At(0)).apply("@23"),
            "923"
        );
    }

    #[test]
    fn none_does_nothing() {
        let rule = TranslationRule {
            kind: RuleKind::None,
            add_string: "1".into(),
            delete_string: "2".into(),
            ..TranslationRule::default()
        };
        assert_eq!(rule.apply("2345"), "2345");
    }

    #[test]
    fn validation_follows_oracle() {
        assert_eq!(
            TranslationRule::delete("123@@@", At(0)).validate(),
            Err(RuleError::MixedDeleteString)
        );
        assert_eq!(
            TranslationRule::add("1@", At(0)).validate(),
            Err(RuleError::WildcardInAddString)
        );
        assert_eq!(
            TranslationRule::add("$", At(0)).validate(),
            Err(RuleError::WildcardInAddString)
        );
        assert_eq!(TranslationRule::add("+1", End).validate(), Ok(()));
    }

    #[test]
    fn indexes_count_characters() {
        assert_eq!(TranslationRule::add("x", At(1)).apply("éa"), "éxa");
        assert_eq!(TranslationRule::delete("@", At(0)).apply("éa"), "a");
    }

    #[test]
    fn session_translation_chains_rules() {
        let st = SessionTranslation {
            called: vec![
                // Strip the trunk prefix 9, then the leading 0, then add +44.
                TranslationRule::delete("9", At(0)),
                TranslationRule::delete("0", At(0)),
                TranslationRule::add("+44", At(0)),
            ],
            calling: vec![TranslationRule::replace("+1", At(0), "1", At(0))],
        };
        assert_eq!(st.translate_called("902079460000"), "+442079460000");
        assert_eq!(st.translate_called("02079460000"), "+442079460000");
        assert_eq!(st.translate_calling("+16175551234"), "16175551234");
        assert_eq!(st.translate_calling("6175551234"), "6175551234");
        assert_eq!(SessionTranslation::default().translate_called("123"), "123");
    }

    #[test]
    fn user_of_every_uri_form() {
        assert_eq!(uri_user("sip:alice@example.com"), Some("alice"));
        assert_eq!(uri_user("<sip:alice@example.com>;tag=1"), Some("alice"));
        assert_eq!(
            uri_user("\"Alice\" <sip:+1555@h;user=phone>;tag=x"),
            Some("+1555")
        );
        assert_eq!(uri_user("Alice <sips:alice:secret@h>"), Some("alice"));
        assert_eq!(uri_user("tel:+15551234;phone-context=x"), Some("+15551234"));
        assert_eq!(uri_user("<tel:+15551234>;tag=9"), Some("+15551234"));
        assert_eq!(uri_user("SIP:bob@h"), Some("bob"));
        // A user may hold ';' (user parameters) and escapes, kept raw.
        assert_eq!(uri_user("sip:+1555;npdi@h"), Some("+1555;npdi"));
        assert_eq!(uri_user("sip:a%40b@h"), Some("a%40b"));
        // No user.
        assert_eq!(uri_user("sip:example.com"), None);
        assert_eq!(uri_user("<sip:example.com;transport=tcp>;tag=a"), None);
        assert_eq!(uri_user("sip:@example.com"), None);
        assert_eq!(uri_user("<urn:service:sos>"), None);
        assert_eq!(uri_user("\"a@b\" "), None);
        assert_eq!(uri_user(""), None);
        assert_eq!(uri_user("\"unterminated <sip:a@b>"), None);
    }

    #[test]
    fn rewrite_leaves_every_other_byte() {
        let cases = [
            (
                "\"Alice <x> \\\"A\\\"\" <sip:0207@h.example;user=phone>;tag=x",
                "\"Alice <x> \\\"A\\\"\" <sip:+44207@h.example;user=phone>;tag=x",
            ),
            ("  <sip:0207:pw@h>;tag=1", "  <sip:+44207:pw@h>;tag=1"),
            ("sip:0207@h;tag=1", "sip:+44207@h;tag=1"),
            (
                "<tel:0207;phone-context=+44>",
                "<tel:+44207;phone-context=+44>",
            ),
            ("tel:0207", "tel:+44207"),
        ];
        let rule = TranslationRule::replace("0", At(0), "+44", At(0));
        for (value, want) in cases {
            assert_eq!(
                rewrite_uri_user(value, |u| rule.apply(u)).as_deref(),
                Some(want),
                "{value}"
            );
        }
        assert_eq!(rewrite_uri_user("<sip:h.example>", |u| u.to_owned()), None);
    }

    #[test]
    fn rewrite_may_lengthen_the_user() {
        let out = rewrite_uri_user("Bob <sip:1@h>", |u| format!("{u}{u}{u}"));
        assert_eq!(out.as_deref(), Some("Bob <sip:111@h>"));
    }
}
