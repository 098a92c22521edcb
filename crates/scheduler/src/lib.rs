//! Moving workers between pipeline stages by the weighted pending work of
//! each. The allocation policy and the CPU budget sampler arrive with the
//! parallel engine; today the checker runs each pass on a fixed pool.
