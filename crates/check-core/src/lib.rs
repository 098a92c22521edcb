//! check core
