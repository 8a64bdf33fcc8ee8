//! sbc-e2e: harness for end-to-end tests (being written).
