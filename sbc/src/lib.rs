//! sbc: the SIP engine (being written).
