//! Refusals: 400 to what does not parse, 503 with Retry-After when admission control says so,
//! and the stateless 503 the shell sends for requests refused before any engine.

use rand_chacha::rand_core::RngCore;
use tracing::debug;

use super::build::ResponseContext;
use super::ids::retry_after_in;
use super::transmit::{Inbound, Transmit};
use super::Engine;
use crate::sip::message::{
    find_head_end, reason_for, split_list, HeaderName, ParseError, SipMessage,
};

/// Whether a new request may enter the engine (the overload-control seam).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Accept new requests.
    Accept,
    /// Refuse new requests with 503 and a Retry-After drawn at random in the range (seconds),
    /// so rejected callers do not retry in lockstep. In-dialog requests, ACK, CANCEL and BYE
    /// still pass.
    Reject {
        /// Smallest Retry-After.
        retry_after_min: u32,
        /// Largest Retry-After.
        retry_after_max: u32,
    },
    /// Drop new requests without an answer: this node is handing the service address over, and
    /// the caller's retransmission (after T1) reaches the new active.
    Drop,
}

/// Methods the SBC relays or answers.
pub(super) const ALLOW: &str =
    "INVITE, ACK, BYE, CANCEL, OPTIONS, UPDATE, INFO, MESSAGE, REGISTER, SUBSCRIBE, NOTIFY, REFER, PUBLISH";

/// The headers of a request that failed strict parsing, read leniently so it can get a 400.
pub(super) struct LenientRequest {
    pub(super) ctx: ResponseContext,
}

impl LenientRequest {
    pub(super) fn scan(data: &[u8]) -> Option<Self> {
        let head_end = find_head_end(data).unwrap_or(data.len());
        let head = String::from_utf8_lossy(&data[..head_end]);
        let mut lines = head.lines();
        let start = lines.next()?;
        let mut words = start.split_whitespace();
        let method = words.next()?;
        if method.starts_with("SIP/") || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return None; // a response, or not a request line at all
        }
        let (mut vias, mut from, mut to, mut call_id, mut cseq) =
            (Vec::new(), None, None, None, None);
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim().to_owned();
            if value.is_empty() || value.len() > 1024 {
                continue;
            }
            match HeaderName::parse(name) {
                HeaderName::Via => vias.extend(split_list(&value).map(str::to_owned)),
                HeaderName::From => from = Some(value),
                HeaderName::To => to = Some(value),
                HeaderName::CallId => call_id = Some(value),
                HeaderName::CSeq => cseq = Some(value),
                _ => {}
            }
        }
        if vias.is_empty() {
            return None;
        }
        Some(Self {
            ctx: ResponseContext {
                vias,
                from: from?,
                to: to?,
                call_id: call_id?,
                cseq: cseq?,
            },
        })
    }
}

/// Answers a new request refused before it reached an engine (a full worker queue, or one that
/// waited too long in it) with `503 Service Unavailable` and `Retry-After`, statelessly from
/// the raw bytes: no parse and no transaction, so refusing costs far less than serving. `None`
/// when the bytes are not a request with the headers a response needs (or are an ACK, which is
/// never answered).
/// The tag and the Retry-After (drawn in `retry_after`, either order) come from `rng`.
pub fn stateless_503(
    inbound: &Inbound,
    retry_after: (u32, u32),
    rng: &mut impl RngCore,
) -> Option<Transmit> {
    if inbound.data.starts_with(b"ACK ") {
        return None;
    }
    let req = LenientRequest::scan(&inbound.data)?;
    let tag = format!("{:016x}", rng.next_u64());
    let mut w = req.ctx.write(503, reason_for(503), Some(&tag));
    let retry_after = retry_after_in(rng, retry_after.0, retry_after.1);
    w.header("Retry-After", retry_after.to_string());
    Some(Engine::reply_to(inbound).transmit(w.finish(b"")))
}

impl Engine {
    pub(super) fn refuse_unparsable(&mut self, inbound: &Inbound, err: &ParseError) {
        // Answer 400 when the bytes look like a request with the five headers a response needs.
        let lenient = LenientRequest::scan(&inbound.data);
        match lenient {
            Some(req) => {
                let (code, reason) = match err {
                    ParseError::TooLarge { .. } => (513, reason_for(513)),
                    _ => (400, reason_for(400)),
                };
                let mut w = req.ctx.write(code, reason, None);
                w.header(
                    "Warning",
                    format_args!("399 sbc \"{}\"", err.to_string().replace('"', "'")),
                );
                self.stats.malformed_answered += 1;
                self.trace_note_with(|| format!("refused {code}: {err}"));
                debug!(source = %inbound.source, error = %err, "malformed request answered");
                self.out
                    .push_back(Self::reply_to(inbound).transmit(w.finish(b"")));
            }
            None => {
                self.stats.malformed_dropped += 1;
                self.trace_note_with(|| format!("dropped: {err}"));
                debug!(source = %inbound.source, error = %err, "malformed message dropped");
            }
        }
    }

    /// Answers a request statelessly (errors before any transaction exists).
    /// Answers `msg` with `code` and a `Warning: 399 sbc "<why>"` saying why.
    pub(super) fn answer_warning(
        &mut self,
        inbound: &Inbound,
        msg: &SipMessage,
        code: u16,
        why: &str,
    ) {
        self.answer(
            inbound,
            msg,
            code,
            Some(("Warning", format!("399 sbc \"{why}\""))),
        );
    }

    pub(super) fn answer(
        &mut self,
        inbound: &Inbound,
        msg: &SipMessage,
        code: u16,
        extra: Option<(&str, String)>,
    ) {
        let ctx = ResponseContext::of(msg, inbound.source);
        let tag = (code > 100 && msg.to_tag().is_none()).then(|| self.ids.tag());
        let mut w = ctx.write(code, reason_for(code), tag.as_deref());
        if let Some((name, value)) = extra {
            w.header(name, value);
        }
        self.out
            .push_back(Self::reply_to(inbound).transmit(w.finish(b"")));
    }
}
