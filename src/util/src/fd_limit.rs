//! The process's open-file limit, raised at start to what a node needs: a
//! descriptor per client connection it serves, plus its RPC mesh, its
//! metadata store and the block files it has open.

/// What stops a node from getting the descriptors it needs.
#[derive(Debug, thiserror::Error)]
pub enum FdLimitError {
    #[error("cannot read the open-file limit: {0}")]
    Read(std::io::Error),
    #[error("cannot raise the open-file limit to {want}: {source}")]
    Raise { want: u64, source: std::io::Error },
    #[error("the open-file limit (hard) is {hard}, below the {need} descriptors needed")]
    TooLow { hard: u64, need: u64 },
}

/// The (soft, hard) open-file limits.
pub fn current() -> Result<(u64, u64), FdLimitError> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(FdLimitError::Read(std::io::Error::last_os_error()));
    }
    Ok((r.rlim_cur, r.rlim_max))
}

/// Raises the soft open-file limit to the hard one (at most 2^20) when it is below
/// `need`; returns the soft limit now in force. Fails when even the hard
/// limit is below `need`.
pub fn raise_to(need: u64) -> Result<u64, FdLimitError> {
    let (soft, hard) = current()?;
    if soft >= need {
        return Ok(soft);
    }
    if hard < need {
        return Err(FdLimitError::TooLow { hard, need });
    }
    // An unlimited hard limit is still bounded by the kernel's `nr_open`
    // (1 048 576 by default).
    let want = hard.min(1 << 20).max(need);
    let r = libc::rlimit {
        rlim_cur: want,
        rlim_max: hard,
    };
    // SAFETY: `r` is a valid rlimit; raising the soft limit up to the hard
    // one needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(FdLimitError::Raise {
            want,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_need_within_the_limit_changes_nothing_and_one_past_the_hard_limit_fails() {
        let (soft, hard) = current().unwrap();
        assert_eq!(raise_to(1).unwrap(), soft);
        if hard < u64::MAX / 2 {
            match raise_to(hard + 1) {
                Err(FdLimitError::TooLow { hard: h, need }) => {
                    assert_eq!((h, need), (hard, hard + 1));
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
