//! RFC 3261 section 17 transaction state machines (with the RFC 6026 `Accepted` state), sans-IO.
//!
//! Each machine holds only its state and its timers; it never sends anything itself. Input
//! methods return what the transaction user (the B2BUA engine) must do: pass a response up,
//! re-send the last message, send an ACK, or report a timeout. Time is always passed in, so the
//! timers are tested on a virtual clock.
//!
//! | timer | machine            | meaning                                   | value (unreliable / reliable) |
//! |-------|--------------------|-------------------------------------------|-------------------------------|
//! | A     | client INVITE      | INVITE retransmission                     | T1, doubling / none           |
//! | B     | client INVITE      | no response at all                        | 64·T1                         |
//! | D     | client INVITE      | absorb final response retransmissions     | 32 s / 0                      |
//! | M     | client INVITE      | absorb 2xx retransmissions (RFC 6026)     | 64·T1                         |
//! | E     | client non-INVITE  | request retransmission                    | T1 doubling to T2 / none      |
//! | F     | client non-INVITE  | no final response                         | 64·T1                         |
//! | K     | client non-INVITE  | absorb response retransmissions           | T4 / 0                        |
//! | G     | server INVITE      | final response retransmission             | T1 doubling to T2 / none      |
//! | H     | server INVITE      | no ACK for a non-2xx final                | 64·T1                         |
//! | I     | server INVITE      | absorb ACK retransmissions                | T4 / 0                        |
//! | L     | server INVITE      | absorb INVITE retransmissions after 2xx   | 64·T1                         |
//! | J     | server non-INVITE  | absorb request retransmissions            | 64·T1 / 0                     |

use std::time::{Duration, Instant};

/// The RFC 3261 base timer values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timers {
    /// RTT estimate (default 500 ms).
    pub t1: Duration,
    /// Maximum retransmission interval for non-INVITE requests and INVITE responses (4 s).
    pub t2: Duration,
    /// Maximum time a message stays in the network (5 s).
    pub t4: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Self {
            t1: Duration::from_millis(500),
            t2: Duration::from_secs(4),
            t4: Duration::from_secs(5),
        }
    }
}

impl Timers {
    /// 64·T1: timers B, F, H, J, L and M.
    pub fn t64(&self) -> Duration {
        self.t1 * 64
    }
}

/// A retransmission timer: when it fires next and its current interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retransmit {
    at: Instant,
    interval: Duration,
}

fn min_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn due(t: Option<Instant>, now: Instant) -> bool {
    t.is_some_and(|t| t <= now)
}

/// What a client transaction asks of its user after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum ClientResponse {
    /// Hand the response to the transaction user.
    PassUp,
    /// Hand the final non-2xx response up and send an ACK for it (INVITE only).
    PassUpAndAck,
    /// A retransmitted non-2xx final: re-send the ACK, do not pass it up.
    ResendAck,
    /// Absorb silently.
    Absorb,
}

/// What a transaction asks of its user when a timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum TimerAction {
    /// Nothing is due.
    None,
    /// Re-send the request (client) or the last final response (server).
    Retransmit,
    /// The transaction timed out (timers B, F, H): tell the user, the transaction is over.
    TimedOut,
    /// The transaction ended normally (timers D, I, J, K, L, M).
    Terminated,
}

/// Client INVITE transaction states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientInviteState {
    /// INVITE sent, nothing heard.
    Calling,
    /// A provisional response was received.
    Proceeding,
    /// A 2xx was received (RFC 6026).
    Accepted,
    /// A non-2xx final was received and ACKed.
    Completed,
    /// Over.
    Terminated,
}

/// RFC 3261 17.1.1 client INVITE transaction.
#[derive(Debug, Clone)]
pub struct ClientInvite {
    state: ClientInviteState,
    timers: Timers,
    reliable: bool,
    timer_a: Option<Retransmit>,
    timer_b: Option<Instant>,
    timer_d: Option<Instant>,
    timer_m: Option<Instant>,
}

impl ClientInvite {
    /// Starts the transaction as the INVITE is sent at `now`.
    pub fn new(now: Instant, timers: Timers, reliable: bool) -> Self {
        Self {
            state: ClientInviteState::Calling,
            timers,
            reliable,
            timer_a: (!reliable).then(|| Retransmit {
                at: now + timers.t1,
                interval: timers.t1,
            }),
            timer_b: Some(now + timers.t64()),
            timer_d: None,
            timer_m: None,
        }
    }

    /// Current state.
    pub fn state(&self) -> ClientInviteState {
        self.state
    }

    /// A response with status `code` arrived.
    pub fn handle_response(&mut self, now: Instant, code: u16) -> ClientResponse {
        use ClientInviteState::*;
        match (self.state, code) {
            (Calling | Proceeding, 100..=199) => {
                self.state = Proceeding;
                self.timer_a = None;
                self.timer_b = None;
                ClientResponse::PassUp
            }
            (Calling | Proceeding, 200..=299) => {
                self.enter_accepted(now);
                ClientResponse::PassUp
            }
            (Calling | Proceeding, _) => {
                self.state = Completed;
                self.timer_a = None;
                self.timer_b = None;
                self.timer_d = Some(if self.reliable {
                    now
                } else {
                    now + Duration::from_secs(32).max(self.timers.t64() / 2)
                });
                ClientResponse::PassUpAndAck
            }
            (Accepted, 200..=299) => ClientResponse::PassUp,
            (Completed, 300..) => ClientResponse::ResendAck,
            _ => ClientResponse::Absorb,
        }
    }

    fn enter_accepted(&mut self, now: Instant) {
        self.state = ClientInviteState::Accepted;
        self.timer_a = None;
        self.timer_b = None;
        self.timer_m = Some(now + self.timers.t64());
    }

    /// Ends the transaction at once (the user gave up on it, e.g. after a CANCEL timed out).
    pub fn terminate(&mut self) {
        self.state = ClientInviteState::Terminated;
        self.timer_a = None;
        self.timer_b = None;
        self.timer_d = None;
        self.timer_m = None;
    }

    /// Fires the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> TimerAction {
        use ClientInviteState::*;
        match self.state {
            Calling => {
                if due(self.timer_b, now) {
                    self.terminate();
                    return TimerAction::TimedOut;
                }
                if let Some(a) = self.timer_a.filter(|a| a.at <= now) {
                    let interval = a.interval * 2;
                    self.timer_a = Some(Retransmit {
                        at: now + interval,
                        interval,
                    });
                    return TimerAction::Retransmit;
                }
                TimerAction::None
            }
            Completed if due(self.timer_d, now) => {
                self.terminate();
                TimerAction::Terminated
            }
            Accepted if due(self.timer_m, now) => {
                self.terminate();
                TimerAction::Terminated
            }
            _ => TimerAction::None,
        }
    }

    /// When the next timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = min_opt(self.timer_a.map(|a| a.at), self.timer_b);
        min_opt(t, min_opt(self.timer_d, self.timer_m))
    }
}

/// Client non-INVITE transaction states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientNonInviteState {
    /// Request sent.
    Trying,
    /// Provisional received.
    Proceeding,
    /// Final received.
    Completed,
    /// Over.
    Terminated,
}

/// RFC 3261 17.1.2 client non-INVITE transaction.
#[derive(Debug, Clone)]
pub struct ClientNonInvite {
    state: ClientNonInviteState,
    timers: Timers,
    reliable: bool,
    timer_e: Option<Retransmit>,
    timer_f: Option<Instant>,
    timer_k: Option<Instant>,
}

impl ClientNonInvite {
    /// Starts the transaction as the request is sent at `now`.
    pub fn new(now: Instant, timers: Timers, reliable: bool) -> Self {
        Self {
            state: ClientNonInviteState::Trying,
            timers,
            reliable,
            timer_e: (!reliable).then(|| Retransmit {
                at: now + timers.t1,
                interval: timers.t1,
            }),
            timer_f: Some(now + timers.t64()),
            timer_k: None,
        }
    }

    /// Current state.
    pub fn state(&self) -> ClientNonInviteState {
        self.state
    }

    /// A response with status `code` arrived.
    pub fn handle_response(&mut self, now: Instant, code: u16) -> ClientResponse {
        use ClientNonInviteState::*;
        match (self.state, code) {
            (Trying | Proceeding, 100..=199) => {
                self.state = Proceeding;
                ClientResponse::PassUp
            }
            (Trying | Proceeding, _) => {
                self.state = Completed;
                self.timer_e = None;
                self.timer_f = None;
                self.timer_k = Some(if self.reliable {
                    now
                } else {
                    now + self.timers.t4
                });
                ClientResponse::PassUp
            }
            _ => ClientResponse::Absorb,
        }
    }

    /// Fires the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> TimerAction {
        use ClientNonInviteState::*;
        match self.state {
            Trying | Proceeding => {
                if due(self.timer_f, now) {
                    self.state = Terminated;
                    self.timer_e = None;
                    self.timer_f = None;
                    return TimerAction::TimedOut;
                }
                if let Some(e) = self.timer_e.filter(|e| e.at <= now) {
                    let interval = if self.state == Trying {
                        (e.interval * 2).min(self.timers.t2)
                    } else {
                        self.timers.t2
                    };
                    self.timer_e = Some(Retransmit {
                        at: now + interval,
                        interval,
                    });
                    return TimerAction::Retransmit;
                }
                TimerAction::None
            }
            Completed if due(self.timer_k, now) => {
                self.state = Terminated;
                self.timer_k = None;
                TimerAction::Terminated
            }
            _ => TimerAction::None,
        }
    }

    /// When the next timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        min_opt(
            min_opt(self.timer_e.map(|e| e.at), self.timer_f),
            self.timer_k,
        )
    }
}

/// What a server transaction asks of its user when a request arrives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum ServerRequest {
    /// A retransmission: re-send the last response sent (if any).
    ResendLastResponse,
    /// An ACK for a 2xx: hand it to the user (it belongs to the dialog).
    PassUpAck,
    /// Absorb silently (ACK for a non-2xx, or a retransmission with nothing to re-send).
    Absorb,
}

/// Server INVITE transaction states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerInviteState {
    /// INVITE received; provisional responses may be sent.
    Proceeding,
    /// A 2xx was sent (RFC 6026).
    Accepted,
    /// A non-2xx final was sent; waiting for the ACK.
    Completed,
    /// The ACK arrived; absorbing its retransmissions.
    Confirmed,
    /// Over.
    Terminated,
}

/// RFC 3261 17.2.1 server INVITE transaction.
#[derive(Debug, Clone)]
pub struct ServerInvite {
    state: ServerInviteState,
    timers: Timers,
    reliable: bool,
    timer_g: Option<Retransmit>,
    /// Timer G retransmissions left (RFC 3261: until timer H; fewer for a final response the
    /// node made itself, see [`Self::cap_retransmissions`]).
    retransmissions_left: u32,
    timer_h: Option<Instant>,
    timer_i: Option<Instant>,
    timer_l: Option<Instant>,
    acked: bool,
}

impl ServerInvite {
    /// Starts the transaction as the INVITE arrives.
    pub fn new(timers: Timers, reliable: bool) -> Self {
        Self {
            state: ServerInviteState::Proceeding,
            timers,
            reliable,
            timer_g: None,
            retransmissions_left: u32::MAX,
            timer_h: None,
            timer_i: None,
            timer_l: None,
            acked: false,
        }
    }

    /// Retransmits the final response at most `n` more times (timer G), then waits quietly for
    /// the ACK until timer H. For final responses the node generates itself (408, 503, ...):
    /// a request with a forged source then makes the node send its victim the provisional, the
    /// final and `n` copies, not a copy every T2 for 32 s (no amplification).
    pub fn cap_retransmissions(&mut self, n: u32) {
        self.retransmissions_left = self.retransmissions_left.min(n);
    }

    /// Current state.
    pub fn state(&self) -> ServerInviteState {
        self.state
    }

    /// Whether an ACK for the 2xx has been seen (Accepted state).
    pub fn acked(&self) -> bool {
        self.acked
    }

    /// Whether a final response has been sent.
    pub fn is_final(&self) -> bool {
        self.state != ServerInviteState::Proceeding
    }

    /// The user sends a response with status `code` at `now`.
    pub fn send_response(&mut self, now: Instant, code: u16) {
        use ServerInviteState::*;
        if self.state != Proceeding {
            return;
        }
        match code {
            100..=199 => {}
            200..=299 => {
                self.state = Accepted;
                self.timer_l = Some(now + self.timers.t64());
            }
            _ => {
                self.state = Completed;
                self.timer_g = (!self.reliable).then(|| Retransmit {
                    at: now + self.timers.t1,
                    interval: self.timers.t1,
                });
                self.timer_h = Some(now + self.timers.t64());
            }
        }
    }

    /// A retransmission of the INVITE arrived.
    pub fn handle_invite(&mut self) -> ServerRequest {
        match self.state {
            ServerInviteState::Proceeding
            | ServerInviteState::Completed
            | ServerInviteState::Accepted => ServerRequest::ResendLastResponse,
            _ => ServerRequest::Absorb,
        }
    }

    /// An ACK matching this transaction arrived at `now`.
    pub fn handle_ack(&mut self, now: Instant) -> ServerRequest {
        use ServerInviteState::*;
        match self.state {
            Completed => {
                self.state = Confirmed;
                self.timer_g = None;
                self.timer_h = None;
                self.timer_i = Some(if self.reliable {
                    now
                } else {
                    now + self.timers.t4
                });
                ServerRequest::Absorb
            }
            Accepted => {
                let first = !self.acked;
                self.acked = true;
                if first {
                    ServerRequest::PassUpAck
                } else {
                    ServerRequest::Absorb
                }
            }
            _ => ServerRequest::Absorb,
        }
    }

    /// Fires the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> TimerAction {
        use ServerInviteState::*;
        match self.state {
            Completed => {
                if due(self.timer_h, now) {
                    self.state = Terminated;
                    self.timer_g = None;
                    self.timer_h = None;
                    return TimerAction::TimedOut;
                }
                if let Some(g) = self.timer_g.filter(|g| g.at <= now) {
                    if self.retransmissions_left == 0 {
                        self.timer_g = None;
                        return TimerAction::None;
                    }
                    self.retransmissions_left -= 1;
                    let interval = (g.interval * 2).min(self.timers.t2);
                    self.timer_g = Some(Retransmit {
                        at: now + interval,
                        interval,
                    });
                    return TimerAction::Retransmit;
                }
                TimerAction::None
            }
            Confirmed if due(self.timer_i, now) => {
                self.state = Terminated;
                self.timer_i = None;
                TimerAction::Terminated
            }
            Accepted if due(self.timer_l, now) => {
                self.state = Terminated;
                self.timer_l = None;
                TimerAction::Terminated
            }
            _ => TimerAction::None,
        }
    }

    /// When the next timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        min_opt(
            min_opt(self.timer_g.map(|g| g.at), self.timer_h),
            min_opt(self.timer_i, self.timer_l),
        )
    }
}

/// Server non-INVITE transaction states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerNonInviteState {
    /// Request received, no response yet.
    Trying,
    /// A provisional response was sent.
    Proceeding,
    /// A final response was sent.
    Completed,
    /// Over.
    Terminated,
}

/// RFC 3261 17.2.2 server non-INVITE transaction.
#[derive(Debug, Clone)]
pub struct ServerNonInvite {
    state: ServerNonInviteState,
    timers: Timers,
    reliable: bool,
    timer_j: Option<Instant>,
}

impl ServerNonInvite {
    /// Starts the transaction as the request arrives.
    pub fn new(timers: Timers, reliable: bool) -> Self {
        Self {
            state: ServerNonInviteState::Trying,
            timers,
            reliable,
            timer_j: None,
        }
    }

    /// Current state.
    pub fn state(&self) -> ServerNonInviteState {
        self.state
    }

    /// Whether a final response has been sent.
    pub fn is_final(&self) -> bool {
        matches!(
            self.state,
            ServerNonInviteState::Completed | ServerNonInviteState::Terminated
        )
    }

    /// The user sends a response with status `code` at `now`.
    pub fn send_response(&mut self, now: Instant, code: u16) {
        use ServerNonInviteState::*;
        match (self.state, code) {
            (Trying | Proceeding, 100..=199) => self.state = Proceeding,
            (Trying | Proceeding, _) => {
                self.state = Completed;
                self.timer_j = Some(if self.reliable {
                    now
                } else {
                    now + self.timers.t64()
                });
            }
            _ => {}
        }
    }

    /// A retransmission of the request arrived.
    pub fn handle_request(&mut self) -> ServerRequest {
        match self.state {
            ServerNonInviteState::Proceeding | ServerNonInviteState::Completed => {
                ServerRequest::ResendLastResponse
            }
            _ => ServerRequest::Absorb,
        }
    }

    /// Fires the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> TimerAction {
        if self.state == ServerNonInviteState::Completed && due(self.timer_j, now) {
            self.state = ServerNonInviteState::Terminated;
            self.timer_j = None;
            return TimerAction::Terminated;
        }
        TimerAction::None
    }

    /// When the next timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timer_j
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Drives a machine's timers on a virtual clock until `end`, collecting (offset ms, action).
    fn drive<F, P>(t0: Instant, end: Duration, mut poll: P, mut fire: F) -> Vec<(u128, TimerAction)>
    where
        P: FnMut() -> Option<Instant>,
        F: FnMut(Instant) -> TimerAction,
    {
        let mut out = Vec::new();
        for _ in 0..1000 {
            let Some(at) = poll() else { break };
            if at > t0 + end {
                break;
            }
            let a = fire(at);
            if a != TimerAction::None {
                out.push(((at - t0).as_millis(), a));
            }
        }
        out
    }

    #[test]
    fn timer_a_doubles_and_timer_b_times_out() {
        let t0 = Instant::now();
        let mut tx = ClientInvite::new(t0, Timers::default(), false);
        let tx2 = std::cell::RefCell::new(&mut tx);
        let got = drive(
            t0,
            Duration::from_secs(40),
            || tx2.borrow().poll_timeout(),
            |now| tx2.borrow_mut().handle_timeout(now),
        );
        let retrans: Vec<u128> = got
            .iter()
            .filter(|(_, a)| *a == TimerAction::Retransmit)
            .map(|(t, _)| *t)
            .collect();
        // A fires at 0.5, 1.5, 3.5, 7.5, 15.5, 31.5 s; B at 32 s.
        assert_eq!(retrans, vec![500, 1500, 3500, 7500, 15500, 31500]);
        assert_eq!(got.last(), Some(&(32000, TimerAction::TimedOut)));
        assert_eq!(tx.state(), ClientInviteState::Terminated);
    }

    #[test]
    fn timer_g_follows_rfc_3261_unless_capped() {
        let run = |cap: Option<u32>| {
            let t0 = Instant::now();
            let mut tx = ServerInvite::new(Timers::default(), false);
            tx.send_response(t0, 408);
            if let Some(n) = cap {
                tx.cap_retransmissions(n);
            }
            let tx = std::cell::RefCell::new(tx);
            drive(
                t0,
                Duration::from_secs(40),
                || tx.borrow().poll_timeout(),
                |now| tx.borrow_mut().handle_timeout(now),
            )
        };
        let full = run(None);
        let g: Vec<u128> = full
            .iter()
            .filter(|(_, a)| *a == TimerAction::Retransmit)
            .map(|(t, _)| *t)
            .collect();
        // G at 0.5, 1.5, 3.5, 7.5 s, then every T2 (4 s) until H at 32 s.
        assert_eq!(
            g,
            vec![500, 1500, 3500, 7500, 11500, 15500, 19500, 23500, 27500, 31500]
        );
        assert_eq!(full.last(), Some(&(32000, TimerAction::TimedOut)));
        let capped = run(Some(1));
        assert_eq!(
            capped,
            vec![
                (500, TimerAction::Retransmit),
                (32000, TimerAction::TimedOut)
            ],
            "one copy, then quiet until timer H"
        );
    }

    #[test]
    fn provisional_stops_a_and_b() {
        let t0 = Instant::now();
        let mut tx = ClientInvite::new(t0, Timers::default(), false);
        assert_eq!(tx.handle_response(t0 + ms(10), 100), ClientResponse::PassUp);
        assert_eq!(tx.poll_timeout(), None);
        assert_eq!(tx.handle_timeout(t0 + ms(40_000)), TimerAction::None);
        assert_eq!(tx.state(), ClientInviteState::Proceeding);
    }

    #[test]
    fn non_2xx_final_acks_and_timer_d_absorbs() {
        let t0 = Instant::now();
        let mut tx = ClientInvite::new(t0, Timers::default(), false);
        assert_eq!(tx.handle_response(t0, 486), ClientResponse::PassUpAndAck);
        assert_eq!(
            tx.handle_response(t0 + ms(500), 486),
            ClientResponse::ResendAck
        );
        assert_eq!(tx.handle_timeout(t0 + ms(31_999)), TimerAction::None);
        assert_eq!(tx.handle_timeout(t0 + ms(32_000)), TimerAction::Terminated);
        // reliable: D = 0
        let mut tcp = ClientInvite::new(t0, Timers::default(), true);
        assert_eq!(tcp.poll_timeout(), Some(t0 + ms(32_000)), "only B on TCP");
        assert_eq!(tcp.handle_response(t0, 503), ClientResponse::PassUpAndAck);
        assert_eq!(tcp.handle_timeout(t0), TimerAction::Terminated);
    }

    #[test]
    fn accepted_passes_2xx_retransmissions_until_timer_m() {
        let t0 = Instant::now();
        let mut tx = ClientInvite::new(t0, Timers::default(), false);
        assert_eq!(tx.handle_response(t0, 200), ClientResponse::PassUp);
        assert_eq!(tx.state(), ClientInviteState::Accepted);
        assert_eq!(
            tx.handle_response(t0 + ms(500), 200),
            ClientResponse::PassUp
        );
        assert_eq!(
            tx.handle_response(t0 + ms(500), 180),
            ClientResponse::Absorb
        );
        assert_eq!(tx.handle_timeout(t0 + ms(32_000)), TimerAction::Terminated);
    }

    #[test]
    fn timer_e_caps_at_t2_and_timer_f_times_out() {
        let t0 = Instant::now();
        let mut tx = ClientNonInvite::new(t0, Timers::default(), false);
        let cell = std::cell::RefCell::new(&mut tx);
        let got = drive(
            t0,
            Duration::from_secs(40),
            || cell.borrow().poll_timeout(),
            |now| cell.borrow_mut().handle_timeout(now),
        );
        let retrans: Vec<u128> = got
            .iter()
            .filter(|(_, a)| *a == TimerAction::Retransmit)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(&retrans[..5], &[500, 1500, 3500, 7500, 11500]);
        assert_eq!(got.last(), Some(&(32000, TimerAction::TimedOut)));
    }

    #[test]
    fn timer_e_is_t2_in_proceeding_and_k_after_final() {
        let t0 = Instant::now();
        let mut tx = ClientNonInvite::new(t0, Timers::default(), false);
        assert_eq!(
            tx.handle_response(t0 + ms(100), 100),
            ClientResponse::PassUp
        );
        assert_eq!(tx.handle_timeout(t0 + ms(500)), TimerAction::Retransmit);
        assert_eq!(tx.poll_timeout(), Some(t0 + ms(4500)));
        assert_eq!(
            tx.handle_response(t0 + ms(600), 200),
            ClientResponse::PassUp
        );
        assert_eq!(
            tx.handle_response(t0 + ms(700), 200),
            ClientResponse::Absorb
        );
        assert_eq!(tx.poll_timeout(), Some(t0 + ms(5600)), "K = T4");
        assert_eq!(tx.handle_timeout(t0 + ms(5600)), TimerAction::Terminated);
    }

    #[test]
    fn timer_g_h_for_non_2xx_and_i_after_ack() {
        let t0 = Instant::now();
        let mut tx = ServerInvite::new(Timers::default(), false);
        assert_eq!(tx.handle_invite(), ServerRequest::ResendLastResponse);
        tx.send_response(t0, 486);
        let cell = std::cell::RefCell::new(&mut tx);
        let got = drive(
            t0,
            Duration::from_secs(40),
            || cell.borrow().poll_timeout(),
            |now| cell.borrow_mut().handle_timeout(now),
        );
        let g: Vec<u128> = got
            .iter()
            .filter(|(_, a)| *a == TimerAction::Retransmit)
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(&g[..5], &[500, 1500, 3500, 7500, 11500]);
        assert_eq!(got.last(), Some(&(32000, TimerAction::TimedOut)), "H");

        let mut tx = ServerInvite::new(Timers::default(), false);
        tx.send_response(t0, 487);
        assert_eq!(tx.handle_ack(t0 + ms(100)), ServerRequest::Absorb);
        assert_eq!(tx.state(), ServerInviteState::Confirmed);
        assert_eq!(tx.handle_ack(t0 + ms(200)), ServerRequest::Absorb);
        assert_eq!(tx.poll_timeout(), Some(t0 + ms(5100)), "I = T4");
        assert_eq!(tx.handle_timeout(t0 + ms(5100)), TimerAction::Terminated);
    }

    #[test]
    fn accepted_passes_first_ack_and_timer_l_ends_it() {
        let t0 = Instant::now();
        let mut tx = ServerInvite::new(Timers::default(), false);
        tx.send_response(t0, 180);
        assert_eq!(tx.state(), ServerInviteState::Proceeding);
        tx.send_response(t0, 200);
        assert_eq!(tx.handle_invite(), ServerRequest::ResendLastResponse);
        assert_eq!(tx.handle_ack(t0), ServerRequest::PassUpAck);
        assert_eq!(tx.handle_ack(t0), ServerRequest::Absorb);
        assert!(tx.acked());
        assert_eq!(tx.handle_timeout(t0 + ms(32_000)), TimerAction::Terminated);
    }

    #[test]
    fn timer_j_absorbs_then_ends() {
        let t0 = Instant::now();
        let mut tx = ServerNonInvite::new(Timers::default(), false);
        assert_eq!(
            tx.handle_request(),
            ServerRequest::Absorb,
            "nothing sent yet"
        );
        tx.send_response(t0, 200);
        assert_eq!(tx.handle_request(), ServerRequest::ResendLastResponse);
        assert_eq!(tx.handle_timeout(t0 + ms(31_999)), TimerAction::None);
        assert_eq!(tx.handle_timeout(t0 + ms(32_000)), TimerAction::Terminated);
        let mut tcp = ServerNonInvite::new(Timers::default(), true);
        tcp.send_response(t0, 200);
        assert_eq!(
            tcp.handle_timeout(t0),
            TimerAction::Terminated,
            "J = 0 on TCP"
        );
    }
}
