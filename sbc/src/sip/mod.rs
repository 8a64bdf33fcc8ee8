//! SIP protocol pieces with no I/O: messages, transactions, dialog data.

pub mod dialog;
pub mod message;
pub mod strict;
pub mod transaction;
