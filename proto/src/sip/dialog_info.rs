//! `application/dialog-info+xml` bodies (RFC 4235), the state a busy lamp shows: each
//! `<dialog>` element names a dialog by its `call-id`, `local-tag` and `remote-tag`, as the
//! monitored UA sees it. A B2BUA gives each leg its own Call-ID and tags, so a body made on one
//! side names ids the other side has never seen; a phone that picks the call up from its lamp
//! (an INVITE with `Replaces` built from them) would find nothing. [`rewrite`] writes the body
//! again with other ids, element by element; the XML is read and written by `quick-xml`.

use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, Writer};

/// The MIME type of a dialog-info body.
pub const CONTENT_TYPE: &str = "application/dialog-info+xml";

/// Most `<dialog>` elements of one body looked at (a lamp shows a handful).
pub const MAX_DIALOGS: usize = 32;

/// A dialog as a dialog-info body names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DialogIds {
    /// `call-id`.
    pub call_id: String,
    /// `local-tag`: the monitored UA's tag.
    pub local_tag: Option<String>,
    /// `remote-tag`: its peer's.
    pub remote_tag: Option<String>,
}

/// The ids of the first `<dialog>` elements of `body` (at most [`MAX_DIALOGS`]); empty when it
/// is not well-formed XML.
#[must_use]
pub fn named_dialogs(body: &[u8]) -> Vec<DialogIds> {
    let mut reader = Reader::from_reader(body);
    let mut found = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) if is_dialog(&e) => {
                if let Some(ids) = ids_of(&e) {
                    found.push(ids);
                    if found.len() == MAX_DIALOGS {
                        break;
                    }
                }
            }
            Ok(Event::Eof) => break,
            Err(_) => return Vec::new(),
            Ok(_) => {}
        }
    }
    found
}

/// `body` with the ids of each `<dialog>` that `view` gives others for replaced (a tag it
/// gives as `None` is left out); `None` when nothing changed or the body is not well-formed.
#[must_use]
pub fn rewrite(body: &[u8], view: impl Fn(&DialogIds) -> Option<DialogIds>) -> Option<Vec<u8>> {
    let mut reader = Reader::from_reader(body);
    let mut writer = Writer::new(Vec::with_capacity(body.len() + 64));
    let mut changed = false;
    let mut seen = 0usize;
    loop {
        let event = reader.read_event().ok()?;
        let looked_at = seen < MAX_DIALOGS;
        let mut element = |e: BytesStart<'_>| -> BytesStart<'static> {
            seen += 1;
            match rewritten(&e, &view) {
                Some(new) => {
                    changed = true;
                    new
                }
                None => e.into_owned(),
            }
        };
        let event = match event {
            Event::Eof => break,
            Event::Start(e) if looked_at && is_dialog(&e) => Event::Start(element(e)),
            Event::Empty(e) if looked_at && is_dialog(&e) => Event::Empty(element(e)),
            other => other,
        };
        writer.write_event(event).ok()?;
    }
    changed.then(|| writer.into_inner())
}

/// Whether `e` is a `<dialog>` element (any namespace prefix), not `<dialog-info>`.
fn is_dialog(e: &BytesStart<'_>) -> bool {
    e.local_name().as_ref() == b"dialog"
}

fn attribute(e: &BytesStart<'_>, name: &[u8]) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.as_ref() == name)
        .and_then(|a| a.unescape_value().ok().map(|v| v.into_owned()))
}

fn ids_of(e: &BytesStart<'_>) -> Option<DialogIds> {
    Some(DialogIds {
        call_id: attribute(e, b"call-id")?,
        local_tag: attribute(e, b"local-tag"),
        remote_tag: attribute(e, b"remote-tag"),
    })
}

/// `e` with `view`'s ids in place of its own, other attributes kept in order; `None` when
/// `view` knows it not.
fn rewritten(
    e: &BytesStart<'_>,
    view: &impl Fn(&DialogIds) -> Option<DialogIds>,
) -> Option<BytesStart<'static>> {
    let new = view(&ids_of(e)?)?;
    let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
    let mut out = BytesStart::new(name);
    for a in e.attributes().flatten() {
        let value = match a.key.as_ref() {
            b"call-id" => Some(new.call_id.clone()),
            b"local-tag" => new.local_tag.clone(),
            b"remote-tag" => new.remote_tag.clone(),
            _ => {
                out.push_attribute(a);
                continue;
            }
        };
        if let Some(v) = value {
            let key = String::from_utf8_lossy(a.key.as_ref()).into_owned();
            out.push_attribute((key.as_str(), v.as_str()));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"<?xml version="1.0"?>
<dialog-info xmlns="urn:ietf:params:xml:ns:dialog-info" version="3" state="full" entity="sip:bob@example.test">
  <dialog id="d1" call-id="b2b-1@sbc" local-tag="callee-tag" remote-tag="sbc-tag" direction="recipient">
    <state>confirmed</state>
    <local><identity>sip:bob@example.test</identity></local>
  </dialog>
  <dialog id="d2" call-id="other@x" local-tag="a" remote-tag="b"/>
</dialog-info>"#;

    #[test]
    fn dialogs_are_named_by_call_id_and_tags() {
        let found = named_dialogs(BODY.as_bytes());
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0],
            DialogIds {
                call_id: "b2b-1@sbc".into(),
                local_tag: Some("callee-tag".into()),
                remote_tag: Some("sbc-tag".into()),
            }
        );
        assert!(named_dialogs(b"<dialog-info><dialog call-id=").is_empty());
    }

    #[test]
    fn a_known_dialog_is_written_with_the_other_leg_s_ids_and_the_rest_is_kept() {
        let out = rewrite(BODY.as_bytes(), |ids| {
            (ids.call_id == "b2b-1@sbc").then(|| DialogIds {
                call_id: "caller-call@10.0.0.1".into(),
                local_tag: Some("our-access-tag".into()),
                remote_tag: None,
            })
        })
        .expect("rewritten");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains(
            r#"<dialog id="d1" call-id="caller-call@10.0.0.1" local-tag="our-access-tag" direction="recipient">"#
        ), "{text}");
        assert!(
            !text.contains("b2b-1@sbc") && !text.contains("sbc-tag"),
            "{text}"
        );
        assert!(
            text.contains(r#"<dialog id="d2" call-id="other@x" local-tag="a" remote-tag="b"/>"#)
        );
        assert!(text.contains("<state>confirmed</state>"));
        assert_eq!(
            rewrite(BODY.as_bytes(), |_| None),
            None,
            "nothing known, nothing changed"
        );
        assert_eq!(
            rewrite(b"<dialog call-id=\"x\"", |_| None),
            None,
            "not well-formed"
        );
    }

    #[test]
    fn values_are_escaped_again() {
        let body = br#"<dialog-info><dialog call-id="a&amp;b" local-tag="t"/></dialog-info>"#;
        assert_eq!(named_dialogs(body)[0].call_id, "a&b");
        let out = rewrite(body, |_| {
            Some(DialogIds {
                call_id: "c<d".into(),
                local_tag: Some("t".into()),
                remote_tag: None,
            })
        })
        .expect("rewritten");
        assert!(String::from_utf8_lossy(&out).contains(r#"call-id="c&lt;d""#));
    }
}
