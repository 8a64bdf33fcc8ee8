//! Malformed-message corpus sent to the access interface (UDP, and a few over TCP).
//!
//! Rule under test (DESIGN.md section 3, "Parsing"): a request that fails to parse gets
//! `400 Bad Request` when it still has enough to answer: a request line (`METHOD URI SIP/2.0`
//! shape) and Via, Call-ID, CSeq, From and To headers; anything else is dropped silently. The
//! server never panics. Each case below is named and carries its expectation:
//!
//! - `Bad400`: exactly one response, `400`, with the case's Call-ID;
//! - `Silent`: no SIP response at all (a bare CRLF keep-alive pong on TCP is not a response);
//! - `Either`: genuinely ambiguous input (see each case's note): no response or one `400`,
//!   nothing else (no 1xx, no 2xx, no other code);
//! - `TooLarge`: over `max-message-size`: no response or one `513 Message Too Large`
//!   (RFC 3261 21.5.11), nothing else;
//! - `Unsupported416`: exactly one `416 Unsupported URI Scheme` (RFC 3261 8.2.2.1).
//!
//! The strict reading (an edge device reads every request one way, exactly): a second `To`
//! (tagged, after an untagged one), `Call-ID` or `CSeq`, a Request-URI that does not parse, a
//! Via sent-by that is not a host, a header line beyond `max-header-size` (1024 here) get 400;
//! a non-SIP scheme gets 416.
//!
//! For every case: nothing is relayed to the core side (a raw UDP socket on the session-agent's
//! address records everything), and the SBC process is still alive afterwards. After the whole
//! corpus a normal SIPp call (`-m 5`) still succeeds. `max-message-size` is set to 4096 so that
//! an over-size datagram can be sent over UDP. The corpus runs twice: on IPv4 and on `::1`
//! (IPv6 references everywhere, and cases of RFC 5118's invalid references).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use sbc_e2e::raw::{RawTcp, RawUdp, SipMsg};
use sbc_e2e::{ports, run_pair, SbcConfig, SbcNode, Sipp};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Bad400,
    Silent,
    Either,
    TooLarge,
    Unsupported416,
}
use Expect::{Bad400, Either, Silent, TooLarge, Unsupported416};

struct Case {
    name: &'static str,
    expect: Expect,
    bytes: Vec<u8>,
}

/// Builds requests from a header list that each case edits.
struct Builder {
    local: SocketAddr,
    target: SocketAddr,
    transport: &'static str,
}

impl Builder {
    fn start_line(&self) -> String {
        format!("INVITE sip:service@{} SIP/2.0", self.target)
    }

    /// The five headers needed to answer plus Max-Forwards and Contact, Call-ID = `name`.
    fn headers(&self, name: &str) -> Vec<String> {
        let (local, target, t) = (self.local, self.target, self.transport);
        vec![
            format!("Via: SIP/2.0/{t} {local};branch=z9hG4bK-{name};rport"),
            "Max-Forwards: 70".to_owned(),
            format!("From: <sip:e2e@{local}>;tag=f-{name}"),
            format!("To: <sip:service@{target}>"),
            format!("Call-ID: {name}"),
            "CSeq: 1 INVITE".to_owned(),
            format!("Contact: <sip:e2e@{local}>"),
        ]
    }

    /// Start line + headers + `Content-Length: 0` (unless a header already sets it) + body.
    fn build(start: &str, headers: &[String], body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(start.as_bytes());
        out.extend_from_slice(b"\r\n");
        let has_cl = headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("content-length"));
        for h in headers {
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if !has_cl {
            out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }

    fn valid_with(&self, name: &str, extra: &[&str]) -> Vec<u8> {
        let mut h = self.headers(name);
        h.extend(extra.iter().map(|s| (*s).to_owned()));
        Self::build(&self.start_line(), &h, b"")
    }

    fn without(&self, name: &str, header: &str) -> Vec<u8> {
        let h: Vec<String> = self
            .headers(name)
            .into_iter()
            .filter(|l| !l.starts_with(&format!("{header}:")))
            .collect();
        Self::build(&self.start_line(), &h, b"")
    }

    fn with_start(&self, name: &str, start: &str) -> Vec<u8> {
        Self::build(start, &self.headers(name), b"")
    }

    fn replace(&self, name: &str, header: &str, line: &str) -> Vec<u8> {
        let h: Vec<String> = self
            .headers(name)
            .into_iter()
            .map(|l| {
                if l.starts_with(&format!("{header}:")) {
                    line.to_owned()
                } else {
                    l
                }
            })
            .collect();
        Self::build(&self.start_line(), &h, b"")
    }

    fn with_body(&self, name: &str, content_length: &str, body: &[u8]) -> Vec<u8> {
        let mut h = self.headers(name);
        h.push("Content-Type: application/sdp".to_owned());
        h.push(format!("Content-Length: {content_length}"));
        Self::build(&self.start_line(), &h, body)
    }
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
fn junk(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

fn splice(prefix: &[u8], mut rest: Vec<u8>) -> Vec<u8> {
    let mut out = prefix.to_vec();
    out.append(&mut rest);
    out
}

fn udp_cases(b: &Builder) -> Vec<Case> {
    let udp = |name: &'static str, expect: Expect, bytes: Vec<u8>| Case {
        name,
        expect,
        bytes,
    };
    let full = b.valid_with("truncated", &[]);
    let cut_at = |pat: &str| -> Vec<u8> {
        let text = String::from_utf8(full.clone()).expect("ascii");
        let i = text.find(pat).expect("pattern in request");
        text.as_bytes()[..i].to_vec()
    };
    let big_header = |len: usize| format!("X-Padding: {}", "a".repeat(len));
    let target = b.target;
    vec![
        // --- truncated messages ---
        udp(
            "truncated_in_start_line",
            Silent,
            format!("INVITE sip:service@{target}").into_bytes(),
        ),
        udp("truncated_after_via", Silent, cut_at("Max-Forwards")),
        udp("truncated_in_from", Silent, cut_at("tag=f-truncated")),
        // All five headers but no blank line ending the header section: a parser may take the
        // end of the datagram as the end of the headers (then the request is valid and would
        // be relayed: not accepted here, see below) or reject it with 400.
        udp("truncated_no_blank_line", Either, {
            let mut v = b.valid_with("truncated_no_blank_line", &[]);
            v.truncate(v.len() - 2);
            v
        }),
        // --- bad start lines ---
        // Not a request line, but every header needed to answer is there: either is fine.
        udp(
            "start_line_garbage",
            Either,
            b.with_start("start_line_garbage", "HELLO WORLD"),
        ),
        udp(
            "start_line_empty",
            Silent,
            b.with_start("start_line_empty", ""),
        ),
        // "INVITE URI" with no version: a request line in all but the version; ambiguous.
        udp(
            "start_line_no_version",
            Either,
            b.with_start(
                "start_line_no_version",
                &format!("INVITE sip:service@{target}"),
            ),
        ),
        udp(
            "start_line_leading_space",
            Either,
            b.with_start(
                "start_line_leading_space",
                &format!(" INVITE sip:service@{target} SIP/2.0"),
            ),
        ),
        udp(
            "request_uri_invalid",
            Bad400,
            b.with_start("request_uri_invalid", "INVITE not-a-uri SIP/2.0"),
        ),
        udp(
            "request_uri_missing",
            Either,
            b.with_start("request_uri_missing", "INVITE  SIP/2.0"),
        ),
        udp("request_uri_invalid_utf8", Bad400, {
            let start = format!("INVITE sip:@@@{target} SIP/2.0");
            let v = b.with_start("request_uri_invalid_utf8", &start);
            // Replace the "@@" placeholder with invalid UTF-8 bytes 0xFF 0xFE.
            let i = v.windows(2).position(|w| w == b"@@").expect("placeholder");
            let mut v = v;
            v[i] = 0xFF;
            v[i + 1] = 0xFE;
            v
        }),
        // --- missing mandatory headers: nothing to answer with ---
        udp(
            "missing_call_id",
            Silent,
            b.without("missing_call_id", "Call-ID"),
        ),
        udp("missing_cseq", Silent, b.without("missing_cseq", "CSeq")),
        udp("missing_via", Silent, b.without("missing_via", "Via")),
        udp("missing_from", Silent, b.without("missing_from", "From")),
        udp("missing_to", Silent, b.without("missing_to", "To")),
        // Via present but unusable: where would a response go? Ambiguous.
        udp(
            "via_garbage",
            Either,
            b.replace("via_garbage", "Via", "Via: garbage"),
        ),
        // CSeq present but without a number: ambiguous whether "enough to answer".
        udp(
            "cseq_not_numeric",
            Either,
            b.replace("cseq_not_numeric", "CSeq", "CSeq: abc INVITE"),
        ),
        // --- bad Content-Length ---
        udp(
            "content_length_not_numeric",
            Bad400,
            b.with_body("content_length_not_numeric", "abc", b""),
        ),
        udp(
            "content_length_negative",
            Bad400,
            b.with_body("content_length_negative", "-5", b""),
        ),
        udp(
            "content_length_overflow",
            Bad400,
            b.with_body("content_length_overflow", "184467440737095516160000", b""),
        ),
        // RFC 3261 18.3: a UDP request whose body is shorter than Content-Length SHOULD get 400.
        udp(
            "content_length_beyond_datagram",
            Bad400,
            b.with_body("content_length_beyond_datagram", "500", b"v=0\r\n"),
        ),
        // Two different Content-Length values: ambiguous which one a parser takes.
        udp("content_length_twice", Either, {
            let mut h = b.headers("content_length_twice");
            h.push("Content-Length: 0".to_owned());
            h.push("Content-Length: 10".to_owned());
            Builder::build(&b.start_line(), &h, b"")
        }),
        // --- other bad headers in an otherwise answerable request ---
        udp(
            "max_forwards_not_numeric",
            Bad400,
            b.replace(
                "max_forwards_not_numeric",
                "Max-Forwards",
                "Max-Forwards: many",
            ),
        ),
        udp(
            "header_line_without_colon",
            Bad400,
            b.valid_with("header_line_without_colon", &["ThisIsNotAHeader"]),
        ),
        udp("header_value_invalid_utf8", Bad400, {
            let v = b.valid_with("header_value_invalid_utf8", &["Subject: @@"]);
            let i = v.windows(2).position(|w| w == b"@@").expect("placeholder");
            let mut v = v;
            v[i] = 0xC3;
            v[i + 1] = 0x28;
            v
        }),
        udp("header_value_nul_byte", Bad400, {
            let v = b.valid_with("header_value_nul_byte", &["Subject: a@b"]);
            let i = v.windows(3).position(|w| w == b"a@b").expect("placeholder");
            let mut v = v;
            v[i + 1] = 0;
            v
        }),
        udp("nul_in_method", Either, {
            let mut v = b.valid_with("nul_in_method", &[]);
            v[3] = 0;
            v
        }),
        // --- size limits (max-message-size = 4096 in this test's config) ---
        udp(
            "datagram_over_max_message_size",
            TooLarge,
            b.valid_with("datagram_over_max_message_size", &[&big_header(5000)]),
        ),
        udp(
            "header_line_60k_in_datagram",
            TooLarge,
            b.valid_with("header_line_60k_in_datagram", &[&big_header(60_000)]),
        ),
        // --- not SIP at all ---
        udp("empty_datagram", Silent, Vec::new()),
        udp("only_crlf", Silent, b"\r\n".to_vec()),
        udp("only_crlfcrlf", Silent, b"\r\n\r\n".to_vec()),
        udp("only_crlfs_many", Silent, b"\r\n".repeat(500)),
        udp("only_nul_bytes", Silent, vec![0; 300]),
        udp("binary_junk_1k", Silent, junk(1024, 0x5EED_0001)),
        udp(
            "binary_junk_sip_prefix",
            Silent,
            splice(b"SIP/2.0 ", junk(600, 0x5EED_0002)),
        ),
        udp(
            "invalid_utf8_only",
            Silent,
            [0xFF, 0xFE, 0xFD, 0xC3, 0x28, 0xA0, 0xA1].repeat(40),
        ),
        // --- the strict reading ---
        udp("strict_duplicate_to_tagged", Bad400, {
            let t = b.target;
            b.valid_with(
                "strict_duplicate_to_tagged",
                &[&format!("t: <sip:service@{t}>;tag=forged")],
            )
        }),
        udp(
            "strict_duplicate_call_id",
            Bad400,
            b.valid_with("strict_duplicate_call_id", &["Call-ID: another-one"]),
        ),
        udp(
            "strict_duplicate_cseq",
            Bad400,
            b.valid_with("strict_duplicate_cseq", &["CSeq: 2 INVITE"]),
        ),
        udp(
            "strict_request_uri_unparsable",
            Bad400,
            b.with_start(
                "strict_request_uri_unparsable",
                "INVITE sip:service@bad_host!! SIP/2.0",
            ),
        ),
        udp(
            "strict_request_uri_port_zero",
            Bad400,
            b.with_start(
                "strict_request_uri_port_zero",
                "INVITE sip:service@127.0.0.1:0 SIP/2.0",
            ),
        ),
        udp(
            "strict_scheme_http",
            Unsupported416,
            b.with_start("strict_scheme_http", "INVITE http://example.com/ SIP/2.0"),
        ),
        udp(
            "strict_via_sent_by_not_a_host",
            Bad400,
            b.valid_with(
                "strict_via_sent_by_not_a_host",
                &["Via: SIP/2.0/UDP not_a_host!:5060;branch=z9hG4bK-second"],
            ),
        ),
        // --- IPv6 references (RFC 5118): brackets required, the address inside valid ---
        udp(
            "ipv6_uri_unbracketed",
            Bad400,
            b.with_start(
                "ipv6_uri_unbracketed",
                "INVITE sip:service@2001:db8::10 SIP/2.0",
            ),
        ),
        udp(
            "ipv6_uri_unclosed",
            Bad400,
            b.with_start("ipv6_uri_unclosed", "INVITE sip:service@[::1 SIP/2.0"),
        ),
        udp(
            "ipv6_uri_ipv4_in_brackets",
            Bad400,
            b.with_start(
                "ipv6_uri_ipv4_in_brackets",
                "INVITE sip:service@[127.0.0.1]:5060 SIP/2.0",
            ),
        ),
        udp(
            "ipv6_uri_not_an_address",
            Bad400,
            b.with_start(
                "ipv6_uri_not_an_address",
                "INVITE sip:service@[2001:db8::g] SIP/2.0",
            ),
        ),
        udp(
            "ipv6_via_unbracketed",
            Bad400,
            b.valid_with(
                "ipv6_via_unbracketed",
                &["Via: SIP/2.0/UDP 2001:db8::9:1;branch=z9hG4bK-second"],
            ),
        ),
        udp(
            "ipv6_via_port_out_of_range",
            Bad400,
            b.valid_with(
                "ipv6_via_port_out_of_range",
                &["Via: SIP/2.0/UDP [2001:db8::9:1]:70000;branch=z9hG4bK-second"],
            ),
        ),
        udp(
            "strict_header_beyond_max_header_size",
            Bad400,
            b.valid_with("strict_header_beyond_max_header_size", &[&big_header(2000)]),
        ),
        // --- responses with no matching transaction: absorbed, never relayed or answered ---
        udp("response_without_transaction", Silent, {
            let local = b.local;
            format!(
                "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP {target};branch=z9hG4bK-nosuchtxn\r\nFrom: <sip:a@{local}>;tag=x\r\nTo: <sip:b@{target}>;tag=y\r\nCall-ID: response_without_transaction\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
            )
            .into_bytes()
        }),
        udp("response_status_not_numeric", Silent, {
            format!(
                "SIP/2.0 abc OK\r\nVia: SIP/2.0/UDP {target};branch=z9hG4bK-x\r\nFrom: <sip:a@x>;tag=x\r\nTo: <sip:b@y>;tag=y\r\nCall-ID: response_status_not_numeric\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
            )
            .into_bytes()
        }),
    ]
}

fn tcp_cases(b: &Builder) -> Vec<Case> {
    let tcp = |name: &'static str, expect: Expect, bytes: Vec<u8>| Case {
        name,
        expect,
        bytes,
    };
    vec![
        tcp(
            "tcp_content_length_negative",
            Bad400,
            b.with_body("tcp_content_length_negative", "-5", b""),
        ),
        tcp(
            "tcp_missing_call_id",
            Silent,
            b.without("tcp_missing_call_id", "Call-ID"),
        ),
        tcp("tcp_binary_junk", Silent, junk(2048, 0x5EED_0003)),
        tcp("tcp_only_crlfcrlf_keepalive", Silent, b"\r\n\r\n".to_vec()),
        tcp(
            "tcp_header_line_100k",
            Silent,
            b.valid_with(
                "tcp_header_line_100k",
                &[&format!("X-Padding: {}", "a".repeat(100 * 1024))],
            ),
        ),
    ]
}

fn check(case: &Case, responses: &[SipMsg], failures: &mut Vec<String>) {
    let codes: Vec<String> = responses.iter().map(|m| m.start_line.clone()).collect();
    let ok = match case.expect {
        Silent => responses.is_empty(),
        Bad400 => {
            responses.len() == 1
                && responses[0].status() == Some(400)
                && responses[0].header("call-id") == Some(case.name)
        }
        Either => {
            responses.is_empty() || (responses.len() == 1 && responses[0].status() == Some(400))
        }
        TooLarge => {
            responses.is_empty() || (responses.len() == 1 && responses[0].status() == Some(513))
        }
        Unsupported416 => {
            responses.len() == 1
                && responses[0].status() == Some(416)
                && responses[0].header("call-id") == Some(case.name)
        }
    };
    if !ok {
        failures.push(format!(
            "{}: expected {:?}, got {codes:?}",
            case.name, case.expect
        ));
    }
}

#[test]
fn malformed_corpus_is_answered_400_or_dropped() {
    corpus(SbcConfig::new());
}

/// The same corpus against a node whose interfaces and agent are on `::1` (issue 26): every
/// case carries IPv6 references in its Via, From, To and Request-URI.
#[test]
fn malformed_corpus_over_ipv6_is_answered_400_or_dropped() {
    let v6 = IpAddr::V6(std::net::Ipv6Addr::LOCALHOST);
    corpus(SbcConfig::with_addresses(v6, v6, v6));
}

fn corpus(mut config: SbcConfig) {
    config.max_message_size = Some(4096);
    config.sip_lines = vec!["max-header-size = 1024".into()];
    let core = RawUdp::bind_addr(config.agent);
    let mut node = SbcNode::start_config(&config);
    let local_ip: IpAddr = config.access.ip();

    let mut failures = Vec::new();
    let mut count = 0;

    // UDP: a fresh socket (and port, named in the Via) per case, so a late response cannot be
    // blamed on the next case. The corpus is rebuilt for each socket's address.
    let udp_count = udp_cases(&Builder {
        local: SocketAddr::new(local_ip, 9),
        target: config.access,
        transport: "UDP",
    })
    .len();
    for i in 0..udp_count {
        let sock = RawUdp::bind(local_ip);
        let builder = Builder {
            local: sock.local_addr(),
            target: config.access,
            transport: "UDP",
        };
        let case = udp_cases(&builder).swap_remove(i);
        sock.send_to(&case.bytes, config.access);
        let window = if case.expect == Silent { 500 } else { 1500 };
        let responses: Vec<SipMsg> = sock
            .recv_all(Duration::from_millis(window))
            .into_iter()
            .filter_map(|(bytes, _)| SipMsg::parse(&bytes))
            .collect();
        check(&case, &responses, &mut failures);
        count += 1;
        if !node.is_alive() {
            failures.push(format!("{}: the SBC died", case.name));
            break;
        }
    }

    // TCP: a fresh connection per case.
    for case in tcp_cases(&Builder {
        local: SocketAddr::new(local_ip, 0),
        target: config.access,
        transport: "TCP",
    }) {
        let mut conn = RawTcp::connect(config.access);
        // A write error means the SBC closed the connection on us: acceptable for bad input.
        let _ = conn.send(&case.bytes);
        let window = if case.expect == Silent { 700 } else { 1500 };
        let responses = conn.recv_messages(Duration::from_millis(window));
        check(&case, &responses, &mut failures);
        count += 1;
        if !node.is_alive() {
            failures.push(format!("{}: the SBC died", case.name));
            break;
        }
    }
    assert!(count >= 30, "the corpus has only {count} cases");

    let relayed: Vec<String> = core
        .recv_all(Duration::from_millis(500))
        .into_iter()
        .map(|(b, _)| {
            String::from_utf8_lossy(&b)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    if !relayed.is_empty() {
        failures.push(format!("relayed to the core side: {relayed:?}"));
    }
    node.assert_alive();
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // The SBC still relays a normal call.
    drop(core);
    let dir = node.dir().clone();
    let uas = Sipp::new(&dir, "uas")
        .builtin("uas")
        .local(config.agent)
        .calls(5)
        .timeout(Duration::from_secs(40));
    let uac = Sipp::new(&dir, "uac")
        .builtin("uac")
        .local(SocketAddr::new(local_ip, ports::free_port()))
        .remote(config.access)
        .calls(5)
        .rate(10)
        .timeout(Duration::from_secs(20));
    let (uac, uas) = run_pair(uas, config.agent, false, uac);
    uac.assert_success(5);
    uas.assert_success(5);
    node.assert_alive();
}
