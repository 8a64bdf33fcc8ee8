//! sbc-config: the configuration model (placeholder, being written).
