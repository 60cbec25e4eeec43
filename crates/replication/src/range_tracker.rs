//! One scan page's fan-out: which replicas are asked for their page, when
//! enough have answered, and top-ups when one fails or is slow.
//!
//! A point read saves bandwidth with digests; a scan page cannot (replicas'
//! pages end at different rows, so their digests would rarely match), so
//! every replica counted toward the level is asked for its rows. The
//! tracker is built from the piece's [`ReadPlan`]: its contacted replicas
//! ([`RangeReadTracker::requests`]) are asked at once, its spares held in
//! reserve. The node feeds it every answer and does what the returned
//! [`RangeReadAction`] says:
//!
//! - `Done(pages)` once the pages received meet the level (per quota): the
//!   node merges them ([`merge_pages`](crate::merge_pages)).
//! - `Contact(hosts)` when a replica failed (or the node's round timer
//!   fired, which marks every outstanding replica slow; a late page still
//!   counts): spares are asked so that the pages received and expected can
//!   still meet the level. The node restarts its round timer.
//! - `Failed` when too few replicas are left that could answer, or a
//!   timeout finds nobody new to ask ([`ReadFailure`], as point reads).
//!
//! # Invariants
//! - `Done` carries exactly the pages received, which meet the requirement.
//! - A host is asked at most once; its first answer counts, later ones and
//!   answers from hosts never asked are ignored, as is everything after the
//!   tracker finished.

use std::collections::VecDeque;

use ringstore_placement::{Datacenter, HostId};

use crate::consistency::ConsistencyLevel;
use crate::plan::ReadPlan;
use crate::range_page::ReplicaPage;
use crate::read_tracker::ReadFailure;
use crate::requirement::Requirement;

/// What the node must do after feeding the tracker an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeReadAction {
    /// Nothing; wait for more answers or the timer.
    Wait,
    /// Ask these replicas too, and restart the round timer.
    Contact(Vec<HostId>),
    /// Enough pages: merge these.
    Done(Vec<(HostId, ReplicaPage)>),
    /// The page could not be read at the level.
    Failed(ReadFailure),
}

#[derive(Clone, Debug)]
enum Answer {
    Waiting { slow: bool },
    Page(ReplicaPage),
    Failed,
}

#[derive(Clone, Debug)]
struct Asked {
    host: HostId,
    dc: Datacenter,
    answer: Answer,
}

/// The state of one scan page's fan-out. Built from the piece's [`ReadPlan`].
#[derive(Clone, Debug)]
pub struct RangeReadTracker {
    level: ConsistencyLevel,
    requirement: Requirement,
    asked: Vec<Asked>,
    spares: VecDeque<(HostId, Datacenter)>,
    finished: bool,
}

impl RangeReadTracker {
    /// A tracker for `plan`: every contacted replica of the plan is asked
    /// for its page ([`requests`](Self::requests)), spares kept in reserve.
    pub fn new(plan: &ReadPlan) -> RangeReadTracker {
        let asked = plan
            .requests()
            .into_iter()
            .map(|(host, _)| Asked {
                host,
                dc: plan.dc_of(host).clone(),
                answer: Answer::Waiting { slow: false },
            })
            .collect();
        let spares = plan
            .spares()
            .iter()
            .map(|&host| (host, plan.dc_of(host).clone()))
            .collect();
        RangeReadTracker {
            level: plan.level(),
            requirement: plan.requirement().clone(),
            asked,
            spares,
            finished: false,
        }
    }

    /// The replicas to ask first.
    pub fn requests(&self) -> Vec<HostId> {
        self.asked.iter().map(|a| a.host).collect()
    }

    /// `host` answered with its page (already checked by the node).
    pub fn on_page(&mut self, host: HostId, page: ReplicaPage) -> RangeReadAction {
        match self.waiting(host) {
            Some(asked) => asked.answer = Answer::Page(page),
            None => return RangeReadAction::Wait,
        }
        self.advance(false)
    }

    /// `host` failed, or its page did not check.
    pub fn on_failure(&mut self, host: HostId) -> RangeReadAction {
        match self.waiting(host) {
            Some(asked) => asked.answer = Answer::Failed,
            None => return RangeReadAction::Wait,
        }
        self.advance(false)
    }

    /// The node's round timer fired: outstanding replicas are slow, spares
    /// replace them; with nobody new to ask, the page fails.
    pub fn on_timeout(&mut self) -> RangeReadAction {
        if self.finished {
            return RangeReadAction::Wait;
        }
        for asked in &mut self.asked {
            if let Answer::Waiting { slow } = &mut asked.answer {
                *slow = true;
            }
        }
        self.advance(true)
    }

    /// Whether the tracker returned `Done` or `Failed`.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn waiting(&mut self, host: HostId) -> Option<&mut Asked> {
        if self.finished {
            return None;
        }
        self.asked
            .iter_mut()
            .find(|a| a.host == host && matches!(a.answer, Answer::Waiting { .. }))
    }

    fn answered_dcs(&self) -> impl Iterator<Item = &Datacenter> {
        self.asked
            .iter()
            .filter(|a| matches!(a.answer, Answer::Page(_)))
            .map(|a| &a.dc)
    }

    fn advance(&mut self, timed_out: bool) -> RangeReadAction {
        if self.requirement.is_met_by(self.answered_dcs()) {
            self.finished = true;
            let pages = self
                .asked
                .iter()
                .filter_map(|a| match &a.answer {
                    Answer::Page(page) => Some((a.host, page.clone())),
                    _ => None,
                })
                .collect();
            return RangeReadAction::Done(pages);
        }
        let contacts = self.top_up();
        let could_answer = self
            .asked
            .iter()
            .filter(|a| !matches!(a.answer, Answer::Failed))
            .map(|a| &a.dc);
        if !self.requirement.is_met_by(could_answer) || (timed_out && contacts.is_empty()) {
            self.finished = true;
            return RangeReadAction::Failed(ReadFailure {
                level: self.level,
                required: self.requirement.total(),
                received: self.requirement.credited(self.answered_dcs()),
                timed_out,
                damaged: 0,
            });
        }
        if contacts.is_empty() {
            RangeReadAction::Wait
        } else {
            RangeReadAction::Contact(contacts)
        }
    }

    /// Asks spares until the pages received and expected (not slow) meet
    /// every quota.
    fn top_up(&mut self) -> Vec<HostId> {
        let expected = self
            .asked
            .iter()
            .filter(|a| matches!(a.answer, Answer::Page(_) | Answer::Waiting { slow: false }));
        let mut tally = self.requirement.tally(expected.map(|a| &a.dc));
        let quotas: Vec<u32> = self.requirement.quotas().iter().map(|&(_, n)| n).collect();
        let mut contacts = Vec::new();
        let mut index = 0;
        while index < self.spares.len() {
            match self.requirement.quota_of(&self.spares[index].1) {
                Some(q) if tally[q] < quotas[q] => {
                    tally[q] += 1;
                    let (host, dc) = self.spares.remove(index).expect("index is in bounds");
                    self.asked.push(Asked {
                        host,
                        dc,
                        answer: Answer::Waiting { slow: false },
                    });
                    contacts.push(host);
                }
                _ => index += 1,
            }
        }
        contacts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan_read;
    use crate::testkit::{dc, host, nts_3_2, nts_replicas, simple_3, simple_replicas};
    use ConsistencyLevel::*;

    fn page() -> ReplicaPage {
        ReplicaPage {
            rows: Vec::new(),
            complete: true,
        }
    }

    fn tracker(level: ConsistencyLevel, dead: &[u128]) -> RangeReadTracker {
        let plan = plan_read(level, &simple_3(), &dc("dc1"), &simple_replicas(dead)).unwrap();
        RangeReadTracker::new(&plan)
    }

    #[test]
    fn quorum_asks_two_replicas_and_is_done_with_both_pages() {
        let mut t = tracker(Quorum, &[]);
        assert_eq!(t.requests(), vec![host(1), host(2)]);
        assert_eq!(t.on_page(host(2), page()), RangeReadAction::Wait);
        assert_eq!(
            t.on_page(host(1), page()),
            RangeReadAction::Done(vec![(host(1), page()), (host(2), page())])
        );
        assert!(t.is_finished());
        assert_eq!(t.on_page(host(3), page()), RangeReadAction::Wait);
    }

    #[test]
    fn a_failed_replica_is_replaced_by_a_spare() {
        let mut t = tracker(Quorum, &[]);
        assert_eq!(
            t.on_failure(host(1)),
            RangeReadAction::Contact(vec![host(3)])
        );
        assert_eq!(t.on_page(host(2), page()), RangeReadAction::Wait);
        assert!(matches!(
            t.on_page(host(3), page()),
            RangeReadAction::Done(pages) if pages.len() == 2
        ));
    }

    #[test]
    fn failures_beyond_the_spares_fail_the_page() {
        let mut t = tracker(Quorum, &[3]);
        assert_eq!(t.requests(), vec![host(1), host(2)]);
        match t.on_failure(host(2)) {
            RangeReadAction::Failed(failure) => {
                assert_eq!((failure.required, failure.received), (2, 0));
                assert!(!failure.timed_out);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(t.on_page(host(1), page()), RangeReadAction::Wait);
    }

    #[test]
    fn a_timeout_asks_spares_and_a_late_page_still_counts() {
        let mut t = tracker(Quorum, &[]);
        assert_eq!(t.on_page(host(1), page()), RangeReadAction::Wait);
        assert_eq!(t.on_timeout(), RangeReadAction::Contact(vec![host(3)]));
        // The slow replica answers first after all.
        assert!(matches!(
            t.on_page(host(2), page()),
            RangeReadAction::Done(pages) if pages.len() == 2
        ));
    }

    #[test]
    fn a_timeout_with_nobody_left_to_ask_fails_as_timed_out() {
        let mut t = tracker(All, &[]);
        assert_eq!(t.on_page(host(1), page()), RangeReadAction::Wait);
        match t.on_timeout() {
            RangeReadAction::Failed(failure) => {
                assert!(failure.timed_out);
                assert_eq!((failure.required, failure.received), (3, 1));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_quorum_needs_pages_from_every_dc() {
        let plan = plan_read(EachQuorum, &nts_3_2(), &dc("dc1"), &nts_replicas(&[])).unwrap();
        let mut t = RangeReadTracker::new(&plan);
        let asked = t.requests();
        assert_eq!(asked.len(), 4, "2 of dc1's 3 and 2 of dc2's 2");
        let dc1: Vec<_> = asked
            .iter()
            .filter(|h| [1, 2, 3].map(host).contains(h))
            .collect();
        for &&h in &dc1 {
            assert_eq!(t.on_page(h, page()), RangeReadAction::Wait);
        }
        // A dc2 replica fails: dc2 has no spare, so the page cannot succeed.
        let dc2 = asked.iter().find(|h| !dc1.contains(h)).copied().unwrap();
        assert!(matches!(t.on_failure(dc2), RangeReadAction::Failed(_)));
    }
}
