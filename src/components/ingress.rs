//! The ingress: a switch's accounting of what came in over one link, and the
//! receiver's side of link-level flow control.
//!
//! Models:
//! - PFC (IEEE 802.1Qbb) on the data class: the switch counts the data bytes that came
//!   in over this link and are still in its buffer; at or above Xoff it sends PAUSE
//!   upstream, refreshed halfway through the quanta while the count stays above Xon,
//!   and RESUME once the count falls to Xon. A frame takes effect one 64-byte
//!   serialization, one cable and the sender's reaction time after it is sent. With a
//!   dynamic Xoff (as Broadcom-based switches and HPCC's ns-3 set it, `SwitchMmu::
//!   GetPfcThreshold`: the free shared buffer shifted right by `pfc_a_shift`), Xoff is
//!   alpha x (the shared buffer less what the switch holds), recomputed at every
//!   admission, and RESUME comes once the count plus a resume offset is at or below it
//!   (ns-3 `CheckShouldResume`); the headroom stays reserved per port.
//! - InfiniBand credits (IBTA vol. 1 7.9.4): data bytes that leave the buffer give their
//!   64-byte credits back to the sender: a flow control packet crosses the link back
//!   after the update delay. A packet a host or an aggregating switch consumes gives its
//!   credits back at once; a lost one too (IB resynchronises credits with absolute
//!   counters, so a lost packet does not leak them).
//!
//! The ingress is sans-IO: `handle_admitted`, `handle_released` and `handle_refresh`
//! return the frames and credit updates to schedule. Leaves out: per-priority PFC on more
//! than the data class, PFC storms and watchdogs, credit loss.

use super::credit_blocks;
use crate::topology::LinkParams;
use crate::units::{serialization_delay, SimDuration, SimTime};

/// Link-level flow control: how a link keeps its receiver's buffer from overflowing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FlowControl {
    /// None: a full buffer drops (tail drop).
    Lossy,
    /// IEEE 802.1Qbb on the data class: PAUSE above `xoff` bytes from one ingress port,
    /// RESUME at or below `xon`.
    Pfc {
        xoff: u64,
        xon: u64,
        reaction_time: SimDuration,
        quanta: u32,
        /// A dynamic Xoff instead of the static `xoff`/`xon`.
        dynamic: Option<DynamicXoff>,
    },
    /// InfiniBand credits on the data lane: `vl_buffer` bytes per link, in 64-byte blocks.
    IbCredit {
        vl_buffer: u64,
        update_delay: SimDuration,
    },
}

/// PFC's dynamic threshold: Xoff = `alpha` x (`shared_bytes` - bytes the switch holds);
/// RESUME once an ingress's bytes plus `resume_offset` are at or below it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DynamicXoff {
    pub alpha: f64,
    /// The buffer less every ingress port's reserved headroom.
    pub shared_bytes: u64,
    pub resume_offset: u64,
}

impl DynamicXoff {
    /// Xoff with `held` bytes in the switch.
    pub fn xoff(&self, held: u64) -> u64 {
        (self.alpha * self.shared_bytes.saturating_sub(held) as f64) as u64
    }
}

impl FlowControl {
    pub fn lossless(&self) -> bool {
        !matches!(self, FlowControl::Lossy)
    }

    /// `lossy`, `pfc` or `ib_credit`, as the scenario spells it.
    pub fn name(&self) -> &'static str {
        match self {
            FlowControl::Lossy => "lossy",
            FlowControl::Pfc { .. } => "pfc",
            FlowControl::IbCredit { .. } => "ib_credit",
        }
    }
}

/// Bytes that can still arrive at an ingress after it decides to pause: what is on the
/// wire both ways plus what the sender puts out while the PAUSE crosses and takes effect,
/// plus a packet in progress at each end (the mlx5 headroom formula has the same terms:
/// (301 + 2.16 x cable_m) x speed_Gbps + 2.72 x MTU).
pub fn pfc_headroom(link: &LinkParams, reaction: SimDuration, mtu_wire: u64) -> u64 {
    let ps = 2 * link.latency.0 + reaction.0 + serialization_delay(64, link.rate).0;
    let bytes = (ps as u128 * link.rate.0 as u128).div_ceil(8 * 1_000_000_000_000) as u64;
    bytes + 2 * mtu_wire
}

/// What the ingress sends back to the link's sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// A PFC frame takes effect at the sender at `at`: PAUSE (`pause`) or RESUME.
    Pfc { at: SimTime, pause: bool },
    /// The ingress must check at `at` whether to refresh its PAUSE.
    Refresh { at: SimTime },
    /// `blocks` credits reach the sender at `at`.
    Credit { at: SimTime, blocks: u32 },
}

/// Up to two frames to schedule, in order.
pub type Frames = [Option<Upstream>; 2];

/// A switch's view of one incoming link.
#[derive(Debug)]
#[repr(align(64))]
pub struct Ingress {
    link: LinkParams,
    fc: FlowControl,
    /// Data bytes that came in over this link and are still in the switch's buffer.
    pub bytes: u64,
    /// PFC: a PAUSE is in force against the sender (refreshed until RESUME).
    pause_sent: bool,
    refresh_at: SimTime,
    /// PFC frames sent to the sender: PAUSE frames that started a pause, refreshes of
    /// one in force, RESUMEs.
    pub pauses: u64,
    pub refreshes: u64,
    pub resumes: u64,
}

impl Ingress {
    pub fn new(link: LinkParams, fc: FlowControl) -> Ingress {
        Ingress {
            link,
            fc,
            bytes: 0,
            pause_sent: false,
            refresh_at: SimTime::ZERO,
            pauses: 0,
            refreshes: 0,
            resumes: 0,
        }
    }

    /// PFC frames sent to the sender (PAUSE, refreshes and RESUME).
    pub fn pause_frames(&self) -> u64 {
        self.pauses + self.refreshes + self.resumes
    }

    /// When a PFC frame sent now takes effect at the sender: one 64-byte frame's
    /// serialization and the cable back, plus the sender's reaction time.
    fn frame_arrival(&self, now: SimTime) -> SimTime {
        let FlowControl::Pfc { reaction_time, .. } = self.fc else {
            return now;
        };
        now + serialization_delay(64, self.link.rate) + self.link.latency + reaction_time
    }

    /// How long a PAUSE holds the sender: quanta x 512 bit times.
    fn pause_duration(&self) -> SimDuration {
        let FlowControl::Pfc { quanta, .. } = self.fc else {
            return SimDuration::ZERO;
        };
        serialization_delay(quanta as u64 * 64, self.link.rate)
    }

    #[inline(always)]
    fn send_pause(&mut self, now: SimTime, refresh: bool) -> Frames {
        let at = self.frame_arrival(now);
        let dur = self.pause_duration();
        if refresh {
            self.refreshes += 1;
        } else {
            self.pauses += 1;
        }
        // Refresh halfway through the quanta while still above Xon.
        self.refresh_at = now + SimDuration(dur.0 / 2).max(SimDuration(1));
        [
            Some(Upstream::Pfc { at, pause: true }),
            Some(Upstream::Refresh {
                at: self.refresh_at,
            }),
        ]
    }

    /// `bytes` of data came in and were admitted to the buffer, which now holds `held`
    /// bytes: PFC pauses the sender at Xoff.
    #[inline(always)]
    pub fn handle_admitted(&mut self, now: SimTime, bytes: u64, held: u64) -> Frames {
        self.bytes += bytes;
        if let FlowControl::Pfc { xoff, dynamic, .. } = self.fc {
            let xoff = dynamic.map_or(xoff, |d| d.xoff(held));
            if !self.pause_sent && self.bytes >= xoff {
                self.pause_sent = true;
                return self.send_pause(now, false);
            }
        }
        [None, None]
    }

    /// `bytes` of data that came in over this link left the switch, which now holds
    /// `held` bytes: PFC resumes the sender at Xon; IB credits go back.
    #[inline]
    pub fn handle_released(&mut self, now: SimTime, bytes: u64, held: u64) -> Option<Upstream> {
        self.bytes -= bytes;
        match self.fc {
            FlowControl::Pfc { xon, dynamic, .. } => {
                let resume = match dynamic {
                    None => self.bytes <= xon,
                    Some(d) => self.bytes == 0 || self.bytes + d.resume_offset <= d.xoff(held),
                };
                if self.pause_sent && resume {
                    self.pause_sent = false;
                    self.resumes += 1;
                    let at = self.frame_arrival(now);
                    return Some(Upstream::Pfc { at, pause: false });
                }
                None
            }
            FlowControl::IbCredit { .. } => Some(self.credit_return(now, bytes)),
            FlowControl::Lossy => None,
        }
    }

    /// The refresh check scheduled by a PAUSE: sends it again if still above Xon.
    /// `None` if it was stale (the pause ended or was refreshed since).
    pub fn handle_refresh(&mut self, now: SimTime) -> Option<Frames> {
        if !self.pause_sent || self.refresh_at != now {
            return None;
        }
        Some(self.send_pause(now, true))
    }

    /// IB: the credits of `wire` bytes that crossed this link (consumed, forwarded or
    /// lost) go back to the sender after the update delay and the cable. `None` without
    /// credit flow control.
    #[inline(always)]
    pub fn credits_back(&self, now: SimTime, wire: u64) -> Option<Upstream> {
        matches!(self.fc, FlowControl::IbCredit { .. }).then(|| self.credit_return(now, wire))
    }

    #[inline(always)]
    fn credit_return(&self, now: SimTime, wire: u64) -> Upstream {
        let FlowControl::IbCredit { update_delay, .. } = self.fc else {
            unreachable!("credits under IB credit flow control only")
        };
        Upstream::Credit {
            at: now + update_delay + self.link.latency,
            blocks: credit_blocks(wire) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::BitsPerSec;

    fn link() -> LinkParams {
        LinkParams {
            rate: BitsPerSec(100_000_000_000),
            latency: SimDuration::from_ns(1000),
        }
    }

    fn pfc() -> Ingress {
        Ingress::new(
            link(),
            FlowControl::Pfc {
                xoff: 10_000,
                xon: 5_000,
                reaction_time: SimDuration::from_ns(500),
                quanta: 65535,
                dynamic: None,
            },
        )
    }

    /// A dynamic Xoff of 1/8 of the free shared buffer (HPCC's ns-3 `pfc_a_shift` 3):
    /// 80,000 B shared, so with the switch empty but for this port's 8,000 B the
    /// threshold is (80,000 - 8,000) / 8 = 9,000 B; at 9,000 B held it pauses. RESUME
    /// needs the bytes plus the 2,000 B offset at or below the threshold, which grows as
    /// the switch empties.
    #[test]
    fn a_dynamic_xoff_follows_the_free_shared_buffer() {
        let mut i = Ingress::new(
            link(),
            FlowControl::Pfc {
                xoff: 0,
                xon: 0,
                reaction_time: SimDuration::from_ns(500),
                quanta: 65535,
                dynamic: Some(DynamicXoff {
                    alpha: 0.125,
                    shared_bytes: 80_000,
                    resume_offset: 2_000,
                }),
            },
        );
        assert_eq!(i.handle_admitted(SimTime(0), 8_000, 8_000), [None, None]);
        let f = i.handle_admitted(SimTime(1), 1_000, 9_000);
        assert!(
            f[0].is_some(),
            "9,000 B >= (80,000 - 9,000) / 8 = 8,875 B: PAUSE"
        );
        // Other ports hold 40,000 B more: Xoff (80,000 - 48,000) / 8 = 4,000; no resume
        // at 8,000 + 2,000.
        assert_eq!(i.handle_released(SimTime(2), 1_000, 48_000), None);
        // The switch drains to this port's 6,000 B: Xoff 9,250 >= 6,000 + 2,000.
        let r = i.handle_released(SimTime(3), 2_000, 6_000);
        assert!(
            matches!(r, Some(Upstream::Pfc { pause: false, .. })),
            "{r:?}"
        );
    }

    // A frame takes effect after 64 B at 100G (5.12 ns), the 1 us cable and 500 ns.
    const FRAME_PS: u64 = 5_120 + 1_000_000 + 500_000;

    #[test]
    fn pause_at_xoff_once_with_a_refresh_halfway_through_the_quanta() {
        let mut i = pfc();
        assert_eq!(i.handle_admitted(SimTime(0), 9_999, 0), [None, None]);
        let f = i.handle_admitted(SimTime(100), 1, 0);
        // Quanta 65535 x 512 bits at 100G = 335.5392 us; refresh after half.
        assert_eq!(
            f,
            [
                Some(Upstream::Pfc {
                    at: SimTime(100 + FRAME_PS),
                    pause: true
                }),
                Some(Upstream::Refresh {
                    at: SimTime(100 + 167_769_600)
                })
            ]
        );
        // Already paused: no second PAUSE for more bytes.
        assert_eq!(i.handle_admitted(SimTime(200), 5_000, 0), [None, None]);
        assert_eq!(i.pause_frames(), 1);
        // A stale refresh does nothing; the due one sends the PAUSE again.
        assert_eq!(i.handle_refresh(SimTime(300)), None);
        let r = i.handle_refresh(SimTime(100 + 167_769_600)).unwrap();
        assert!(matches!(r[0], Some(Upstream::Pfc { pause: true, .. })));
        assert_eq!(i.pause_frames(), 2);
        assert_eq!(
            (i.pauses, i.refreshes, i.resumes),
            (1, 1, 0),
            "a PAUSE and its refresh"
        );
    }

    #[test]
    fn resume_at_xon_not_above() {
        let mut i = pfc();
        i.handle_admitted(SimTime(0), 12_000, 0);
        assert_eq!(i.handle_released(SimTime(10), 6_999, 0), None, "5001 > xon");
        assert_eq!(
            i.handle_released(SimTime(20), 1, 0),
            Some(Upstream::Pfc {
                at: SimTime(20 + FRAME_PS),
                pause: false
            })
        );
        assert_eq!(i.pause_frames(), 2);
        // After RESUME, a pending refresh is stale.
        assert_eq!(i.handle_refresh(SimTime(167_769_600)), None);
        // Below Xoff again: no frames.
        assert_eq!(i.handle_released(SimTime(30), 1000, 0), None);
    }

    #[test]
    fn credits_go_back_after_the_update_delay_and_the_cable() {
        let mut i = Ingress::new(
            link(),
            FlowControl::IbCredit {
                vl_buffer: 65536,
                update_delay: SimDuration::from_ns(100),
            },
        );
        assert_eq!(i.handle_admitted(SimTime(0), 1000, 0), [None, None]);
        // 1000 B = 16 blocks, back at 0 + 100 ns + 1 us.
        let back = Upstream::Credit {
            at: SimTime(1_100_000),
            blocks: 16,
        };
        assert_eq!(i.handle_released(SimTime(0), 1000, 0), Some(back));
        assert_eq!(i.credits_back(SimTime(0), 1000), Some(back));
        assert_eq!(i.bytes, 0);
    }

    #[test]
    fn lossy_and_pfc_return_no_credits() {
        let mut lossy = Ingress::new(link(), FlowControl::Lossy);
        assert_eq!(lossy.handle_admitted(SimTime(0), 1 << 30, 0), [None, None]);
        assert_eq!(lossy.handle_released(SimTime(0), 1 << 30, 0), None);
        assert_eq!(lossy.credits_back(SimTime(0), 1000), None);
        assert_eq!(pfc().credits_back(SimTime(0), 1000), None);
    }

    #[test]
    fn headroom_covers_the_round_trip_reaction_and_two_packets() {
        // 100G, 1 us cable, 500 ns reaction: (2 us + 0.5 us + 5.12 ns) x 12.5 B/ns
        // = 31,314 B, plus two 1082 B packets.
        let h = pfc_headroom(&link(), SimDuration::from_ns(500), 1082);
        assert_eq!(h, 31_314 + 2 * 1082);
    }
}
