//! A binding as the pair replicates it: one line per field, times as Unix milliseconds (the
//! nodes' clocks are synchronised, as for the dialogs' dates), so that the standby keeps the
//! expiries the active decided and not the moment the binding reached it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::cache::{Binding, Flow};
use crate::sip::dialog::LegTransport;

/// The format's first line.
const VERSION: &str = "binding/1";

/// `at` as Unix milliseconds, given that `now` is `unix_ms`.
fn unix_ms_of(at: Instant, now: Instant, unix_ms: u64) -> u64 {
    if at >= now {
        unix_ms.saturating_add(millis(at - now))
    } else {
        unix_ms.saturating_sub(millis(now - at))
    }
}

/// Unix milliseconds `ms` as an instant, given that `now` is `unix_ms`.
fn instant_of(ms: u64, now: Instant, unix_ms: u64) -> Instant {
    if ms >= unix_ms {
        now + Duration::from_millis(ms - unix_ms)
    } else {
        now.checked_sub(Duration::from_millis(unix_ms - ms))
            .unwrap_or(now)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn transport_word(t: LegTransport) -> &'static str {
    match t {
        LegTransport::Udp => "udp",
        LegTransport::Tcp => "tcp",
        LegTransport::Tls => "tls",
    }
}

impl Binding {
    /// The binding as replicated, at `now`, which is `unix_ms` on the wall clock.
    #[must_use]
    pub fn to_wire(&self, now: Instant, unix_ms: u64) -> Vec<u8> {
        let fields = [
            VERSION.to_owned(),
            self.token.to_string(),
            self.aor.clone(),
            self.phone_contact.clone(),
            self.flow.interface.to_string(),
            transport_word(self.flow.transport).to_owned(),
            self.flow.source.to_string(),
            self.call_id.clone(),
            self.cseq.to_string(),
            unix_ms_of(self.phone_expires_at, now, unix_ms).to_string(),
            self.phone_expires.to_string(),
            unix_ms_of(self.registrar_expires_at, now, unix_ms).to_string(),
            self.registrar_expires.to_string(),
            unix_ms_of(self.refreshed_at, now, unix_ms).to_string(),
        ];
        fields.join("\n").into_bytes()
    }

    /// The binding [`Binding::to_wire`] wrote, at `now` (`unix_ms`); `None` for anything
    /// else (a field missing, not a number, a line with a control character).
    #[must_use]
    pub fn from_wire(bytes: &[u8], now: Instant, unix_ms: u64) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.split('\n');
        if lines.next()? != VERSION {
            return None;
        }
        let mut next = || {
            lines
                .next()
                .filter(|l| !l.bytes().any(|b| b < 0x20 && b != b'\t'))
        };
        let token: u64 = next()?.parse().ok()?;
        let aor = next()?.to_owned();
        let phone_contact = next()?.to_owned();
        let interface: usize = next()?.parse().ok()?;
        let transport = match next()? {
            "udp" => LegTransport::Udp,
            "tcp" => LegTransport::Tcp,
            "tls" => LegTransport::Tls,
            _ => return None,
        };
        let source: SocketAddr = next()?.parse().ok()?;
        let call_id = next()?.to_owned();
        let cseq: u32 = next()?.parse().ok()?;
        let phone_at: u64 = next()?.parse().ok()?;
        let phone_expires: u32 = next()?.parse().ok()?;
        let registrar_at: u64 = next()?.parse().ok()?;
        let registrar_expires: u32 = next()?.parse().ok()?;
        let refreshed: u64 = next()?.parse().ok()?;
        if next().is_some() || token == 0 || aor.is_empty() || phone_contact.is_empty() {
            return None;
        }
        Some(Self {
            token,
            aor,
            phone_contact,
            flow: Flow {
                interface,
                transport,
                source,
                connection: None,
            },
            call_id,
            cseq,
            phone_expires_at: instant_of(phone_at, now, unix_ms),
            phone_expires,
            registrar_expires_at: instant_of(registrar_at, now, unix_ms),
            registrar_expires,
            refreshed_at: instant_of(refreshed, now, unix_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(now: Instant) -> Binding {
        Binding {
            token: 0xdead_beef,
            aor: "sip:alice@example.test".into(),
            phone_contact: "sip:alice@127.0.0.50:5070;transport=udp".into(),
            flow: Flow {
                interface: 1,
                transport: LegTransport::Tcp,
                source: "[::1]:40000".parse().expect("an address"),
                connection: None,
            },
            call_id: "abc@127.0.0.50".into(),
            cseq: 7,
            phone_expires_at: now + Duration::from_secs(30),
            phone_expires: 30,
            registrar_expires_at: now + Duration::from_secs(3600),
            registrar_expires: 3600,
            refreshed_at: now,
        }
    }

    #[test]
    fn a_binding_comes_back_as_it_was_on_the_other_node_clock() {
        let now = Instant::now();
        let b = binding(now);
        let wire = b.to_wire(now, 1_000_000);
        // The standby reads it 5 s later on its own monotonic clock: the expiries are the
        // same wall-clock moments, so 5 s nearer.
        let later = now + Duration::from_secs(100);
        let back = Binding::from_wire(&wire, later, 1_005_000).expect("reads back");
        assert_eq!(back.phone_expires_at, later + Duration::from_secs(25));
        assert_eq!(back.registrar_expires_at, later + Duration::from_secs(3595));
        assert_eq!(
            Binding {
                phone_expires_at: b.phone_expires_at,
                registrar_expires_at: b.registrar_expires_at,
                refreshed_at: b.refreshed_at,
                ..back.clone()
            },
            b
        );
    }

    #[test]
    fn anything_else_is_refused() {
        let now = Instant::now();
        let good = String::from_utf8(binding(now).to_wire(now, 1_000)).expect("UTF-8");
        for bad in [
            String::new(),
            good.replace("binding/1", "binding/2"),
            good.replace("\nudp\n", "\nsctp\n")
                .replace("\ntcp\n", "\nsctp\n"),
            format!("{good}\nextra"),
            good.replace("abc@127.0.0.50", "abc\r@x"),
            good.lines().take(5).collect::<Vec<_>>().join("\n"),
        ] {
            assert!(
                Binding::from_wire(bad.as_bytes(), now, 1_000).is_none(),
                "{bad:?}"
            );
        }
    }
}
