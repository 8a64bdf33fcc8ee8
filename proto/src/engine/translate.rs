//! Number translations (Oracle's `session-translation`): a request from a session-agent with
//! an `in-translationid` is translated before routing; a request to an agent with an
//! `out-translationid` after routing, on its own copy (each candidate of a hunt gets its own
//! agent's). The called number is the Request-URI user and the To user (`rules-called`), the
//! calling number the From user and each P-Asserted-Identity user (`rules-calling`).

use std::borrow::Cow;

use super::transmit::Inbound;
use super::Engine;
use crate::routing::translation::{rewrite_uri_user, SessionTranslation};
use crate::sip::message::{HeaderName, SipMessage, StartLine};

/// `msg` with its numbers translated by `t`.
pub(super) fn translate(msg: &mut SipMessage, t: &SessionTranslation) {
    if let StartLine::Request { uri, .. } = &mut msg.start {
        if let Some(new) = rewrite_uri_user(uri, |u| t.translate_called(u)) {
            *uri = new;
        }
    }
    for h in &mut msg.headers {
        let called = match &h.name {
            HeaderName::To => true,
            HeaderName::From => false,
            HeaderName::Other(n) if n.eq_ignore_ascii_case("p-asserted-identity") => false,
            _ => continue,
        };
        let rewritten = if called {
            rewrite_uri_user(&h.value, |u| t.translate_called(u))
        } else {
            rewrite_uri_user(&h.value, |u| t.translate_calling(u))
        };
        if let Some(new) = rewritten {
            h.value = new;
        }
    }
}

impl Engine {
    /// A new request from a session-agent with an `in-translationid`, or arriving in a realm
    /// with one, translated (a copy: the caller's own From and To stay in what is echoed back
    /// to it); `None` otherwise.
    pub(super) fn translate_inbound(
        &mut self,
        inbound: &Inbound,
        msg: &SipMessage,
    ) -> Option<SipMessage> {
        let router = std::sync::Arc::clone(&self.cfg.router);
        let t = router.inbound_translation(inbound.interface, inbound.source)?;
        let mut copy = msg.clone();
        translate(&mut copy, t);
        self.stats.translated += 1;
        Some(copy)
    }

    /// The request as sent to an agent with `out`, its `out-translationid` (borrowed as it is
    /// without one).
    pub(super) fn translate_outbound<'m>(
        &mut self,
        out: Option<&SessionTranslation>,
        msg: &'m SipMessage,
    ) -> Cow<'m, SipMessage> {
        match out {
            Some(t) => {
                let mut copy = msg.clone();
                translate(&mut copy, t);
                self.stats.translated += 1;
                Cow::Owned(copy)
            }
            None => Cow::Borrowed(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::translation::{StringIndex, TranslationRule};

    #[test]
    fn called_and_calling_numbers_are_translated_in_their_headers() {
        let t = SessionTranslation {
            calling: vec![TranslationRule::add("+1", StringIndex::At(0))],
            called: vec![TranslationRule::delete("9", StringIndex::At(0))],
        };
        let mut msg = SipMessage::parse(
            b"INVITE sip:95551234@example.test SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bKx\r\n\
              From: \"A\" <sip:5550001@example.test>;tag=1\r\nTo: <sip:95551234@example.test>\r\n\
              P-Asserted-Identity: <sip:5550001@example.test>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\n\
              Content-Length: 0\r\n\r\n",
        )
        .expect("parses");
        translate(&mut msg, &t);
        assert_eq!(msg.request_uri(), Some("sip:5551234@example.test"));
        assert_eq!(
            msg.header(&HeaderName::To),
            Some("<sip:5551234@example.test>")
        );
        assert_eq!(
            msg.header(&HeaderName::From),
            Some("\"A\" <sip:+15550001@example.test>;tag=1")
        );
        let pai = msg
            .headers
            .iter()
            .find(|h| matches!(&h.name, HeaderName::Other(n) if n.eq_ignore_ascii_case("p-asserted-identity")))
            .map(|h| h.value.as_str());
        assert_eq!(pai, Some("<sip:+15550001@example.test>"));
    }
}
