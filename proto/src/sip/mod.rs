//! SIP with no I/O: messages and their strict reading, the receive path's line scan, the TCP
//! framer, transactions, dialog data.

pub mod classify;
pub mod dialog;
pub mod dialog_info;
pub mod framer;
pub mod message;
#[cfg(test)]
mod rfc5118;
pub mod strict;
pub mod transaction;
pub mod uri;
