//! Changes to how problems are handled, per e2fsck problem code, as
//! e2fsck.conf's `[problems]` section makes them: preen may fix a problem
//! it would stop on, a declined problem may leave the file system valid,
//! a problem may always be declined. Set once, before any check.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::problem::{Code, Severity};

/// One problem code's changes (each `None` leaves the built-in rule).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Override {
    /// `preen_ok`: preen fixes it instead of stopping.
    pub preen_ok: Option<bool>,
    /// `no_ok`: leaving it unfixed leaves the file system valid.
    pub no_ok: Option<bool>,
    /// `no_default`: the default answer is no (preen declines it).
    pub no_default: Option<bool>,
    /// `force_no`: always declined, even with -y.
    pub force_no: Option<bool>,
    /// `no_nomsg`: not printed when declined by -n or `force_no`.
    pub no_nomsg: Option<bool>,
    /// `preen_nomessage`: not printed when preening.
    pub preen_nomessage: Option<bool>,
    /// `max_count`: how many are printed before the rest are suppressed.
    pub max_count: Option<i64>,
}

static OVERRIDES: OnceLock<BTreeMap<u32, Override>> = OnceLock::new();

/// Installs the changes, keyed by e2fsck problem code (once per process;
/// later calls are ignored).
pub fn install(table: BTreeMap<u32, Override>) {
    let _ = OVERRIDES.set(table);
}

/// Whether any code is always declined.
pub fn any_force_no() -> bool {
    OVERRIDES
        .get()
        .is_some_and(|t| t.values().any(|o| o.force_no == Some(true)))
}

/// Whether any code's default answer is no.
pub fn any_no_default() -> bool {
    OVERRIDES
        .get()
        .is_some_and(|t| t.values().any(|o| o.no_default == Some(true)))
}

impl Code {
    /// This code's changes, if any.
    pub fn overridden(self) -> Option<&'static Override> {
        let c = self.e2fsck_code();
        if c == 0 {
            return None;
        }
        OVERRIDES.get()?.get(&c)
    }

    /// Whether preen fixes it without stopping.
    pub fn preen_ok(self) -> bool {
        self.overridden()
            .and_then(|o| o.preen_ok)
            .unwrap_or(self.policy().preen)
    }

    /// Whether leaving it unfixed makes the file system invalid (exit 4).
    pub fn counts_as_error(self) -> bool {
        self.severity() == Severity::Error && self.overridden().and_then(|o| o.no_ok) != Some(true)
    }

    /// Whether it is always declined.
    pub fn force_no(self) -> bool {
        self.overridden().and_then(|o| o.force_no) == Some(true)
    }

    /// Whether it is not printed when left unfixed by -n or `force_no`.
    pub fn no_nomsg(self) -> bool {
        self.overridden().and_then(|o| o.no_nomsg) == Some(true)
    }

    /// Its own limit on how many are printed, if it has one.
    pub fn max_count(self) -> Option<i64> {
        self.overridden().and_then(|o| o.max_count)
    }

    /// Whether preen prints nothing about it: e2fsck.conf's word, else
    /// e2fsck's own (its PR_PREEN_NOMSG: pass 5's bitmap differences and
    /// counts, the superblock's free counts, the journal reset).
    pub fn preen_nomessage(self) -> bool {
        self.overridden()
            .and_then(|o| o.preen_nomessage)
            .unwrap_or_else(|| {
                let code = self.e2fsck_code();
                code != 0 && PREEN_NOMSG.contains(&code)
            })
    }

    /// Whether the default answer is no.
    pub fn no_default(self) -> bool {
        self.overridden().and_then(|o| o.no_default) == Some(true)
    }
}

/// The e2fsck problem codes its table marks PR_PREEN_NOMSG (those a
/// finding of ext4chk's can carry).
const PREEN_NOMSG: &[u32] = &[
    0x000019, 0x00003f, 0x000040, 0x050003, 0x050004, 0x050005, 0x050006, 0x050007, 0x050008,
    0x050009, 0x05000a, 0x05000b, 0x05000c, 0x05000d, 0x05000e, 0x05000f, 0x050014, 0x050015,
    0x050016, 0x050017, 0x06000d,
];
