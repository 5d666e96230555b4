//! Byte budgets: how much outside files one probe, and one discovery round
//! across all its threads, may read.
//!
//! A process names the folder its API reports (vLLM's `root`), and the
//! monitor reads the headers found there. Without a budget four processes
//! naming a folder of 1,024 large headers had a root `serve` read and parse
//! gigabytes every probe. A reader takes the bytes from every budget it
//! answers to before it reads them; when one is spent the read is not
//! made and the caller says so in a note.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes still to spend, shared by the threads that read under it.
#[derive(Debug)]
pub struct ByteBudget {
    /// What the budget is of, for notes: "this probe", "this round".
    pub name: &'static str,
    pub limit: u64,
    left: AtomicU64,
}

impl ByteBudget {
    pub fn new(name: &'static str, limit: u64) -> ByteBudget {
        ByteBudget {
            name,
            limit,
            left: AtomicU64::new(limit),
        }
    }

    /// Takes `n` bytes, or none when fewer are left.
    fn take(&self, n: u64) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(n))
            .is_ok()
    }

    fn give_back(&self, n: u64) {
        self.left.fetch_add(n, Ordering::AcqRel);
    }

    pub fn left(&self) -> u64 {
        self.left.load(Ordering::Acquire)
    }
}

/// Takes `n` bytes from every one of `budgets`, or from none: the first
/// that cannot pay is named in the error, for a note.
pub fn take_all(budgets: &[&ByteBudget], n: u64) -> Result<(), String> {
    for (i, budget) in budgets.iter().enumerate() {
        if !budget.take(n) {
            for paid in &budgets[..i] {
                paid.give_back(n);
            }
            return Err(format!(
                "the {} MiB read budget of {} is spent ({} bytes more were needed)",
                budget.limit >> 20,
                budget.name,
                n
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_read_is_paid_by_every_budget_or_by_none() {
        let probe = ByteBudget::new("this probe", 3 << 20);
        let round = ByteBudget::new("this round", 4 << 20);
        assert_eq!(take_all(&[&probe, &round], 2 << 20), Ok(()));
        assert_eq!((probe.left(), round.left()), (1 << 20, 2 << 20));
        // The probe cannot pay 2 MiB: the round keeps its bytes.
        assert_eq!(
            take_all(&[&probe, &round], 2 << 20).unwrap_err(),
            "the 3 MiB read budget of this probe is spent (2097152 bytes more were needed)"
        );
        assert_eq!((probe.left(), round.left()), (1 << 20, 2 << 20));
        // A second probe in the same round: its own budget pays, the
        // round's runs out and the probe's payment is given back.
        let other = ByteBudget::new("this probe", 3 << 20);
        assert_eq!(take_all(&[&other, &round], 2 << 20), Ok(()));
        let e = take_all(&[&other, &round], 1).unwrap_err();
        assert!(e.starts_with("the 4 MiB read budget of this round is spent"), "{e}");
        assert_eq!((other.left(), round.left()), (1 << 20, 0));
        assert_eq!(take_all(&[&other, &round], 0), Ok(()));
    }

    #[test]
    fn threads_together_never_take_more_than_the_limit() {
        let round = Arc::new(ByteBudget::new("this round", 1000));
        let taken: u64 = (0..8)
            .map(|_| {
                let round = Arc::clone(&round);
                std::thread::spawn(move || (0..1000).filter(|_| take_all(&[&round], 7).is_ok()).count() as u64 * 7)
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(taken, 994);
        assert_eq!(round.left(), 6);
    }
}
