//! Transfers through the B2BUA (RFC 3515 REFER, RFC 3891 Replaces): ids that name a dialog are
//! translated for the leg they go out on, since each side of a call knows only its own leg's
//! Call-ID and tags.
//!
//! - An in-dialog REFER whose `Refer-To` carries `?Replaces=` (attended transfer) names the
//!   transferor's other call as the transferor sees it: its leg's Call-ID, our tag on it as
//!   `to-tag` and the transferor's as `from-tag`. It goes out naming that call's *far* leg as
//!   the transfer target sees it: that leg's Call-ID, the target's tag as `to-tag`, ours as
//!   `from-tag`. A `Refer-To` host that is one of our own addresses becomes our address on the
//!   leg the REFER goes out on (the transferee reaches us there, not the other side).
//! - A new INVITE with `Replaces` naming one of our legs as its far end sees it (the Call-ID,
//!   our tag as `from-tag`, the far end's as `to-tag`) goes to that leg's far end, with the
//!   `Replaces` unchanged: that party finds the call it replaces.

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, CONTROLS};

use std::time::Instant;

use bytes::Bytes;

use super::{Engine, Inbound};
use crate::sip::dialog::{Leg, Side};
use crate::sip::dialog_info::{self, DialogIds};
use crate::sip::message::{param, uri_host, Header, HeaderName, Method, SipMessage};
use crate::sip::uri::UriParts;

/// What a `Replaces` value names (RFC 3891 section 6.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Replaces {
    /// The dialog's Call-ID.
    pub(super) call_id: String,
    /// The tag of the party receiving the INVITE with `Replaces`.
    pub(super) to_tag: String,
    /// The tag of the other party of that dialog.
    pub(super) from_tag: String,
    /// `early-only`, kept as given.
    pub(super) early_only: bool,
}

impl Replaces {
    /// Parses `callid;to-tag=..;from-tag=..[;early-only]`.
    pub(super) fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let call_id = value.split(';').next()?.trim();
        if call_id.is_empty() {
            return None;
        }
        let early_only = value
            .split(';')
            .skip(1)
            .any(|p| p.trim().eq_ignore_ascii_case("early-only"));
        Some(Self {
            call_id: call_id.to_owned(),
            to_tag: param(value, "to-tag")?.to_owned(),
            from_tag: param(value, "from-tag")?.to_owned(),
            early_only,
        })
    }

    /// `leg` as its far end sees it: what an INVITE to that far end names to replace it.
    pub(super) fn of_far_end(leg: &Leg, early_only: bool) -> Option<Self> {
        Some(Self {
            call_id: leg.call_id.clone(),
            to_tag: leg.remote_tag.clone()?,
            from_tag: leg.local_tag.clone(),
            early_only,
        })
    }

    /// The header value.
    pub(super) fn value(&self) -> String {
        let early = if self.early_only { ";early-only" } else { "" };
        format!(
            "{};to-tag={};from-tag={}{early}",
            self.call_id, self.to_tag, self.from_tag
        )
    }
}

/// What `Replaces` is escaped with inside a URI's headers (RFC 3261 section 19.1.1: `hvalue` is
/// `hnv-unreserved / unreserved / escaped`): everything but unreserved marks.
const URI_HEADER_VALUE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'&')
    .add(b';')
    .add(b'<')
    .add(b'=')
    .add(b'>')
    .add(b'?')
    .add(b'@')
    .add(b'[')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}')
    .add(b',')
    .add(b':');

/// Whether `h` is `Refer-To` (or its compact form `r`).
fn is_refer_to(h: &Header) -> bool {
    matches!(&h.name, HeaderName::Other(n) if n.eq_ignore_ascii_case("refer-to") || n.eq_ignore_ascii_case("r"))
}

/// Whether `h` is `Replaces`.
fn is_replaces(h: &Header) -> bool {
    matches!(&h.name, HeaderName::Other(n) if n.eq_ignore_ascii_case("replaces"))
}

/// A `Refer-To` value split: what comes before the URI, the URI without its headers, its
/// headers (after `?`, `&`-separated, still escaped), what comes after the URI.
struct ReferTo<'a> {
    before: &'a str,
    uri: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    after: &'a str,
}

impl<'a> ReferTo<'a> {
    fn parse(value: &'a str) -> Option<Self> {
        let (before, uri_and_headers, after) = match (value.find('<'), value.rfind('>')) {
            (Some(open), Some(close)) if open < close => {
                (&value[..=open], &value[open + 1..close], &value[close..])
            }
            // A bare URI cannot carry headers (RFC 3261 section 20: `?` needs the brackets).
            _ => return None,
        };
        let (uri, headers) = match uri_and_headers.split_once('?') {
            Some((uri, headers)) => (
                uri,
                headers
                    .split('&')
                    .filter_map(|h| h.split_once('='))
                    .collect(),
            ),
            None => (uri_and_headers, Vec::new()),
        };
        Some(Self {
            before,
            uri,
            headers,
            after,
        })
    }

    fn replaces(&self) -> Option<Replaces> {
        let (_, escaped) = self
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("replaces"))?;
        Replaces::parse(&percent_decode_str(escaped).decode_utf8().ok()?)
    }

    /// The value again, with `uri` and `replaces` in place of its own.
    fn write(&self, uri: &str, replaces: Option<&Replaces>) -> String {
        let mut out = format!("{}{uri}", self.before);
        let mut first = true;
        for (name, value) in &self.headers {
            let value = if name.eq_ignore_ascii_case("replaces") {
                match replaces {
                    Some(r) => utf8_percent_encode(&r.value(), URI_HEADER_VALUE).to_string(),
                    None => (*value).to_owned(),
                }
            } else {
                (*value).to_owned()
            };
            out.push(if first { '?' } else { '&' });
            first = false;
            out.push_str(name);
            out.push('=');
            out.push_str(&value);
        }
        out.push_str(self.after);
        out
    }
}

/// What an in-dialog REFER asks to be called: its `Refer-To` URI (without URI headers), and
/// the `Replaces` among its headers (attended transfer). `None` when it names no SIP URI.
pub(super) fn refer_to_target(msg: &SipMessage) -> Option<(String, Option<Replaces>)> {
    let value = msg.headers.iter().find(|h| is_refer_to(h))?.value.trim();
    let (uri, replaces) = match ReferTo::parse(value) {
        Some(r) => (r.uri.trim().to_owned(), r.replaces()),
        // A bare URI: no headers, its parameters are the header's.
        None => (value.split(';').next()?.trim().to_owned(), None),
    };
    let scheme = uri.split_once(':')?.0;
    (scheme.eq_ignore_ascii_case("sip") || scheme.eq_ignore_ascii_case("sips"))
        .then_some((uri, replaces))
}

/// What a transfer message names: its `Replaces`, and whether it is an INVITE's (naming a leg
/// as that leg's far end sees it) or a REFER's `Refer-To` (naming a leg as the transferor,
/// that leg's near end, sees it).
fn named_in(msg: &SipMessage) -> Option<(Replaces, bool)> {
    match msg.method()? {
        Method::Invite => {
            let value = msg.headers.iter().find(|h| is_replaces(h))?.value.as_str();
            Some((Replaces::parse(value)?, true))
        }
        Method::Refer => {
            let h = msg.headers.iter().find(|h| is_refer_to(h))?;
            Some((ReferTo::parse(&h.value)?.replaces()?, false))
        }
        _ => None,
    }
}

/// The Call-ID of a call a message names, read without a full parse for any other message: a
/// transfer's (an INVITE's `Replaces`, a REFER's `Refer-To` with `?Replaces=`) or a busy
/// lamp's (the first dialog of a NOTIFY's dialog-info body). The shell asks the engine of that
/// call's shard what it holds of it ([`Engine::named_call`]) before it hands the message to its
/// own shard, since a transferor's two calls, or a lamp's subscription and the call it shows,
/// live in different shards.
#[must_use]
pub fn named_call_id(data: &[u8]) -> Option<String> {
    if data.starts_with(b"NOTIFY ") {
        memchr::memmem::find(data, b"dialog-info")?;
        let msg = SipMessage::parse(data).ok()?;
        return dialog_info::named_dialogs(&msg.body)
            .into_iter()
            .next()
            .map(|d| d.call_id);
    }
    if !(data.starts_with(b"INVITE ") || data.starts_with(b"REFER ")) {
        return None;
    }
    // `Replaces` as a header or a URI header, in any case.
    memchr::memmem::find(data, b"eplaces")?;
    let msg = SipMessage::parse(data).ok()?;
    named_in(&msg).map(|(r, _)| r.call_id)
}

/// What an engine holds of a call another shard's message names (see [`named_call_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamedCall {
    /// A transfer's: the far leg of the leg its `Replaces` names, and, when that far leg is
    /// hairpinned back into one of our calls, that call's far leg (the party at the end).
    FarLeg(Box<Leg>, Option<Box<Leg>>),
    /// A busy lamp's NOTIFY: each dialog its body names that the engine holds, with the ids
    /// the other leg of that call has.
    DialogViews(Vec<(DialogIds, DialogIds)>),
}

impl Engine {
    /// The far leg of the leg `msg` names, if this engine holds its call: for an INVITE the leg
    /// its `Replaces` names as its far end sees it (our tag as `from-tag`); for a REFER the
    /// other leg of the call its `Refer-To` names as the transferor sees it (our tag as
    /// `to-tag`).
    fn far_leg_named(&self, msg: &SipMessage) -> Option<Leg> {
        let (r, far_end_view) = named_in(msg)?;
        let (our_tag, their_tag) = if far_end_view {
            (&r.from_tag, &r.to_tag)
        } else {
            (&r.to_tag, &r.from_tag)
        };
        let (id, side) = self.find_dialog(&r.call_id, our_tag)?;
        let call = self.calls.get(&id)?;
        if call.dialog.leg(side).remote_tag.as_deref() != Some(their_tag.as_str()) {
            return None;
        }
        let far = if far_end_view { side } else { side.other() };
        Some(call.dialog.leg(far).clone())
    }

    /// For the shell: what this engine holds of the call the message `data` names (see
    /// [`named_call_id`]).
    #[must_use]
    pub fn named_call(&self, data: &[u8]) -> Option<NamedCall> {
        let msg = SipMessage::parse(data).ok()?;
        if msg.method() == Some(&Method::Notify) {
            let views: Vec<_> = dialog_info::named_dialogs(&msg.body)
                .into_iter()
                .filter_map(|ids| Some((ids.clone(), self.dialog_view(&ids)?)))
                .collect();
            return (!views.is_empty()).then_some(NamedCall::DialogViews(views));
        }
        self.far_leg_named(&msg).map(|leg| {
            let beyond = self.beyond_hairpin(&leg).map(Box::new);
            NamedCall::FarLeg(Box::new(leg), beyond)
        })
    }

    /// [`Engine::handle_inbound`] for a message whose named call another shard's engine
    /// holds: `named` is what that engine's [`Engine::named_call`] gave.
    pub fn handle_inbound_with_named(
        &mut self,
        now: Instant,
        inbound: Inbound,
        named: Option<NamedCall>,
    ) {
        self.named_hint = named;
        self.handle_inbound(now, inbound);
        self.named_hint = None;
    }

    /// The far leg `msg` names: found by another shard's engine, or here.
    pub(super) fn far_leg_of(&mut self, msg: &SipMessage) -> Option<Leg> {
        match self.named_hint.take() {
            Some(NamedCall::FarLeg(leg, _)) => Some(*leg),
            _ => self.far_leg_named(msg),
        }
    }

    /// The party at the end of the far leg `msg` names: that leg, or, when it is hairpinned
    /// back into one of our calls, that call's far leg. Found by another shard's engine, or
    /// here.
    pub(super) fn far_party_of(&mut self, msg: &SipMessage) -> Option<Leg> {
        match self.named_hint.take() {
            Some(NamedCall::FarLeg(leg, beyond)) => Some(*beyond.unwrap_or(leg)),
            _ => {
                let leg = self.far_leg_named(msg)?;
                Some(self.beyond_hairpin(&leg).unwrap_or(leg))
            }
        }
    }

    /// When the far end of `leg` is one of our own calls (a call hairpinned through a proxy
    /// such as a registrar: our leg out to it and the call it brought back in share one
    /// dialog), the far leg of that call. Both live in one engine: the call brought back in
    /// has our leg's Call-ID, which names the shard.
    fn beyond_hairpin(&self, leg: &Leg) -> Option<Leg> {
        let (id, side) = self.find_dialog(&leg.call_id, leg.remote_tag.as_deref()?)?;
        let call = self.calls.get(&id)?;
        (call.dialog.leg(side).remote_tag.as_deref() == Some(leg.local_tag.as_str()))
            .then(|| call.dialog.leg(side.other()).clone())
    }

    /// The dialog a dialog-info body names as `ids`, if it is a leg of one of our calls: the
    /// ids of that call's other leg, each tag mapped across (the leg's party appears on the
    /// other leg with our tag there, and ours with the party beyond; a tag not known yet, as
    /// an early dialog's, is left out).
    pub(super) fn dialog_view(&self, ids: &DialogIds) -> Option<DialogIds> {
        let (id, side) = [&ids.local_tag, &ids.remote_tag]
            .into_iter()
            .flatten()
            .find_map(|tag| self.find_dialog(&ids.call_id, tag))?;
        let call = self.calls.get(&id)?;
        if call.dialog.subscription.is_some() {
            return None;
        }
        let (named, other) = (call.dialog.leg(side), call.dialog.leg(side.other()));
        let across = |tag: &Option<String>| {
            let tag = tag.as_deref()?;
            if tag == named.local_tag {
                other.remote_tag.clone()
            } else if named.remote_tag.as_deref() == Some(tag) {
                Some(other.local_tag.clone())
            } else {
                None
            }
        };
        Some(DialogIds {
            call_id: other.call_id.clone(),
            local_tag: across(&ids.local_tag),
            remote_tag: across(&ids.remote_tag),
        })
    }

    /// A NOTIFY relayed in a subscription: a dialog-info body (a busy lamp's) is written again
    /// with the ids each named call has on its other leg, so that a pickup from the lamp (an
    /// INVITE with `Replaces` built from them) names a leg the subscriber's side knows.
    pub(super) fn translate_dialog_info(&mut self, msg: &mut SipMessage) {
        let is_dialog_info = msg.headers.iter().any(|h| {
            super::request::is_content_type(h)
                && h.value
                    .split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case(dialog_info::CONTENT_TYPE))
        });
        if !is_dialog_info || msg.body.is_empty() {
            return;
        }
        let hinted = match self.named_hint.take() {
            Some(NamedCall::DialogViews(views)) => views,
            _ => Vec::new(),
        };
        let rewritten = dialog_info::rewrite(&msg.body, |ids| {
            hinted
                .iter()
                .find(|(named, _)| named == ids)
                .map(|(_, view)| view.clone())
                .or_else(|| self.dialog_view(ids))
        });
        if let Some(body) = rewritten {
            self.stats.dialog_info_rewritten += 1;
            self.trace_note("dialog-info body written with the ids of the leg it goes out on");
            msg.body = Bytes::from(body);
        }
    }

    /// A new INVITE's `Replaces`, when it names one of our legs as its far end sees it: that
    /// leg, where the INVITE goes.
    pub(super) fn replaces_target(&mut self, msg: &SipMessage) -> Option<Leg> {
        if !msg.headers.iter().any(is_replaces) {
            return None;
        }
        let Some(far) = self.far_leg_of(msg) else {
            self.stats.replaces_unmatched += 1;
            return None;
        };
        self.stats.replaces_matched += 1;
        self.trace_note("an INVITE with Replaces: sent to the far end of the call it names");
        Some(far)
    }

    /// An in-dialog REFER from `side` of call `id`, before it goes out on the other leg: its
    /// `Refer-To` translated (see the module's text).
    pub(super) fn translate_refer(&mut self, id: u64, side: Side, msg: &mut SipMessage) {
        let Some(out_leg) = self
            .calls
            .get(&id)
            .map(|c| c.dialog.leg(side.other()).clone())
        else {
            return;
        };
        let named = match msg.headers.iter().find(|h| is_refer_to(h)) {
            Some(h) => ReferTo::parse(&h.value).and_then(|r| r.replaces()),
            None => return,
        };
        let named = match named {
            Some(r) => self
                .far_leg_of(msg)
                .and_then(|far| Replaces::of_far_end(&far, r.early_only)),
            None => None,
        };
        let interface = &self.cfg.interfaces[out_leg.interface];
        let (our_host, our_port) = (
            uri_host(interface.addr.ip()),
            interface.addr_for(out_leg.transport).port(),
        );
        let ours: Vec<std::net::IpAddr> = self.cfg.interfaces.iter().map(|i| i.addr.ip()).collect();
        let Some(h) = msg.headers.iter_mut().find(|h| is_refer_to(h)) else {
            return;
        };
        let Some(refer_to) = ReferTo::parse(&h.value) else {
            return;
        };
        let ip = UriParts::parse(refer_to.uri).and_then(|p| p.ip());
        let names_us = ip.is_some_and(|ip| ours.contains(&ip));
        // An IP host is ours, or the far side's, which the transferee must not be told: our
        // address on its side instead. A domain is kept.
        let uri = if names_us || (named.is_some() && ip.is_some()) {
            with_host(refer_to.uri, &our_host, our_port)
        } else {
            refer_to.uri.to_owned()
        };
        if named.is_none() && uri == refer_to.uri {
            return;
        }
        h.value = refer_to.write(&uri, named.as_ref());
        self.stats.refers_translated += 1;
    }
}

/// `uri` (`sip:user@host:port;params`) with `host:port` in place of its own.
fn with_host(uri: &str, host: &str, port: u16) -> String {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return uri.to_owned();
    };
    let (user, hostport_params) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let params = hostport_params
        .find(';')
        .map_or("", |i| &hostport_params[i..]);
    match user {
        Some(user) => format!("{scheme}:{user}@{host}:{port}{params}"),
        None => format!("{scheme}:{host}:{port}{params}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_values_parse_and_print_back() {
        let r = Replaces::parse("abc@host;to-tag=t1;from-tag=f1;early-only").expect("parses");
        assert_eq!(
            (r.call_id.as_str(), r.to_tag.as_str(), r.from_tag.as_str()),
            ("abc@host", "t1", "f1")
        );
        assert!(r.early_only);
        assert_eq!(r.value(), "abc@host;to-tag=t1;from-tag=f1;early-only");
        assert!(
            Replaces::parse("abc@host;to-tag=t1").is_none(),
            "no from-tag"
        );
        assert!(
            Replaces::parse(";to-tag=t1;from-tag=f1").is_none(),
            "no Call-ID"
        );
    }

    #[test]
    fn a_refer_to_is_rewritten_with_its_other_headers_kept() {
        let value = "\"Carol\" <sip:carol@192.0.2.10:5060;transport=udp?Replaces=c1%40h%3Bto-tag%3Da%3Bfrom-tag%3Db&Require=replaces>;x=1";
        let r = ReferTo::parse(value).expect("parses");
        let named = r.replaces().expect("a Replaces");
        assert_eq!(named.call_id, "c1@h");
        assert_eq!((named.to_tag.as_str(), named.from_tag.as_str()), ("a", "b"));
        let out = Replaces {
            call_id: "z9@core".into(),
            to_tag: "ct".into(),
            from_tag: "st".into(),
            early_only: false,
        };
        let uri = with_host(r.uri, "198.51.100.10", 5062);
        assert_eq!(
            r.write(&uri, Some(&out)),
            "\"Carol\" <sip:carol@198.51.100.10:5062;transport=udp?Replaces=z9%40core%3Bto-tag%3Dct%3Bfrom-tag%3Dst&Require=replaces>;x=1"
        );
        assert!(ReferTo::parse("sip:carol@example.test").is_none(), "bare");
    }
}
