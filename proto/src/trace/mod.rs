//! SIP trace and capture, sans-IO: the wire formats that traced messages leave the box in.
//!
//! [`hep`] encodes and decodes HEPv3 (the Homer Encapsulation Protocol), the format Homer and
//! sngrep receive captured SIP and RTCP in. Sending it (socket, queue, drops) is the shell's job.

pub mod hep;
