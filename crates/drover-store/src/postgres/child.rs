//! An items child as the rotation and the tally both name it: its checked
//! name and window of ids. Shared by `rotate` and `tally` from here, so
//! neither imports the other's types back (the tally is below the rotation).

use uuid::Uuid;

use drover_core::error::{Error, Result};

/// A child's name as the catalog gave it, checked before it is spliced
/// into a statement (the migration's functions check it again).
pub(super) fn checked_child(name: &str) -> Result<&str> {
    let ok = name == "items_legacy"
        || name
            .strip_prefix("items_c")
            .is_some_and(|h| h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit()));
    if ok {
        Ok(name)
    } else {
        Err(Error::invalid(
            "child",
            format!("not an items child: {name}"),
        ))
    }
}

/// One due child: its name and window of ids.
pub(super) struct Child {
    pub(super) name: String,
    pub(super) lo: Uuid,
    pub(super) hi: Uuid,
}
