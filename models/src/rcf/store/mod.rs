//! Where the forest's points live: the shared point store the trees index
//! into, and the time-decayed reservoir that decides which points a tree
//! keeps.

pub(in crate::rcf) mod point_store;
pub(in crate::rcf) mod sampler;
