//! sbc-lab: benchmarks and experiments (being written).
