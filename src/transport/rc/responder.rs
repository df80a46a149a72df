//! The responder half of an RC queue pair (IBTA vol. 1 §9.7.5.1): sequence checking,
//! duplicates, ACK/NAK generation, receive WQEs and RNR NAKs, READ execution, and with
//! out-of-order RC the placement of packets ahead of ePSN, in-order completion and the
//! hole timer's selective NAKs (see [`super::OutOfOrder`]).

use super::{
    psn_add, psn_diff, AckInfo, AckKind, Op, Placed, RcParams, ReorderBuffer, TxRequest,
    MAX_NAKS_PER_ROUND, PSN_MASK,
};
use crate::units::SimTime;
use std::collections::VecDeque;

/// What the responder does with an arriving request packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ResponderAction {
    /// Payload bytes to place in memory (new data only).
    pub deliver: u32,
    /// The packet completed a message (the last byte of a WRITE or SEND arrived).
    pub message_done: bool,
    /// The packet was a duplicate (already received).
    pub duplicate: bool,
    /// Send this ACK or NAK.
    pub reply: Option<AckInfo>,
    /// Start streaming READ responses: (first PSN, packets).
    pub read: Option<(u32, u32)>,
}

/// Counters a responder keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderStats {
    pub duplicates: u64,
    pub out_of_sequence: u64,
    pub seq_naks_sent: u64,
    pub rnr_naks_sent: u64,
    pub acks_sent: u64,
}

/// The responder half of an RC queue pair.
#[derive(Clone, Debug)]
pub struct Responder {
    p: RcParams,
    /// Expected PSN (ePSN, IBTA 9.7.5.1.1).
    epsn: u32,
    /// A NAK-sequence-error was sent and the expected PSN has not arrived since: further
    /// out-of-sequence packets are dropped silently (9.7.5.1.2).
    nak_outstanding: bool,
    /// Packets received since the last ACK.
    unacked: u32,
    /// Posted, unconsumed receive WQEs.
    recv_wqes: u32,
    /// Out-of-order RC: the packets placed ahead of ePSN (its `next` is ePSN counted
    /// from the first PSN, so it never wraps).
    reorder: Option<ReorderBuffer>,
    /// Out-of-order RC: messages completed (in order), by work request, for the caller.
    done: VecDeque<u64>,
    /// Out-of-order RC: selective NAKs to send.
    naks: VecDeque<AckInfo>,
    pub stats: ResponderStats,
}

impl Responder {
    pub fn new(p: RcParams, recv_wqes: u32) -> Responder {
        Responder {
            epsn: p.initial_psn,
            p,
            nak_outstanding: false,
            unacked: 0,
            recv_wqes,
            reorder: p.out_of_order.map(|_| ReorderBuffer::new(0)),
            done: VecDeque::new(),
            naks: VecDeque::new(),
            stats: ResponderStats::default(),
        }
    }

    /// The application posts `n` receive WQEs (ibv_post_recv).
    pub fn post_recv(&mut self, n: u32) {
        self.recv_wqes += n;
    }

    pub fn recv_wqes(&self) -> u32 {
        self.recv_wqes
    }

    pub fn expected_psn(&self) -> u32 {
        self.epsn
    }

    /// Out-of-order RC: the next message completed, in order (its work request).
    pub fn pop_done(&mut self) -> Option<u64> {
        self.done.pop_front()
    }

    /// Out-of-order RC: the next selective NAK to send.
    pub fn pop_nak(&mut self) -> Option<AckInfo> {
        self.naks.pop_front()
    }

    fn ack(&mut self, kind: AckKind, psn: u32) -> Option<AckInfo> {
        match kind {
            AckKind::Ack => self.stats.acks_sent += 1,
            AckKind::NakSeq | AckKind::NakSelective => self.stats.seq_naks_sent += 1,
            AckKind::NakRnr => self.stats.rnr_naks_sent += 1,
        }
        self.unacked = 0;
        Some(AckInfo {
            kind,
            psn,
            credits: self.recv_wqes,
            rnr_code: self.p.min_rnr_timer,
            count: 0,
        })
    }

    /// Queues a selective NAK for `count` sequence numbers from `seq`.
    fn selective_nak(&mut self, seq: u64, count: u64) {
        let Some(b) = self.reorder.as_ref() else {
            return;
        };
        let psn = psn_add(self.epsn, seq - b.next());
        self.stats.seq_naks_sent += 1;
        self.naks.push_back(AckInfo {
            kind: AckKind::NakSelective,
            psn,
            credits: 0,
            rnr_code: self.p.min_rnr_timer,
            count: count.min(u32::MAX as u64) as u32,
        });
    }

    /// When the hole timer of out-of-order RC next needs `handle_timeout`.
    pub fn next_timeout(&self) -> Option<SimTime> {
        self.reorder
            .as_ref()?
            .deadline(self.p.out_of_order?.reorder_timeout)
    }

    /// The hole timer fired: every hole (up to [`MAX_NAKS_PER_ROUND`]) is asked for
    /// with a selective NAK, and the timer starts again.
    pub fn handle_timeout(&mut self, now: SimTime) {
        if !self.next_timeout().is_some_and(|t| t <= now) {
            return;
        }
        let b = self.reorder.as_mut().expect("a deadline needs the buffer");
        b.restart_gap_timer(now);
        let next = b.next();
        for (seq, count) in b.holes(MAX_NAKS_PER_ROUND) {
            // The expected PSN drew an RNR NAK: the requester resends it after its
            // back-off; asking for it again would only draw more RNR NAKs.
            if seq == next && self.nak_outstanding {
                continue;
            }
            self.selective_nak(seq, count);
        }
    }

    /// A request packet arrived at `now` (IBTA 9.7.5.1).
    pub fn handle_request(&mut self, now: SimTime, req: &TxRequest) -> ResponderAction {
        let mut a = ResponderAction::default();
        let d = psn_diff(req.psn, self.epsn);
        if d < 0 {
            // Duplicate (9.7.5.1.2): never delivered again; re-acknowledged with the
            // latest ACK, and a duplicate READ is answered again from its PSN.
            self.stats.duplicates += 1;
            a.duplicate = true;
            if req.op == Op::Read {
                a.read = Some((req.psn, req.read_packets));
            } else {
                a.reply = self.ack(AckKind::Ack, psn_add(self.epsn, PSN_MASK as u64));
            }
            return a;
        }
        if d > 0 {
            if self.reorder.is_some() {
                return self.place_ahead(now, req, d as u64);
            }
            // A gap: one NAK per sequence error, then silence until ePSN arrives.
            self.stats.out_of_sequence += 1;
            if !self.nak_outstanding {
                self.nak_outstanding = true;
                a.reply = self.ack(AckKind::NakSeq, self.epsn);
            }
            return a;
        }
        self.nak_outstanding = false;
        let taken = match req.op {
            Op::Read => {
                // The READ's PSNs are its responses'; the next request follows them.
                a.read = Some((req.psn, req.read_packets));
                req.read_packets as u64
            }
            Op::Send if req.first && self.recv_wqes == 0 => {
                // 9.7.5.1.4: no receive WQE, RNR NAK; ePSN does not advance. The rest
                // of the message, already in flight, is out of sequence now and is
                // dropped silently, as after a sequence NAK: the requester will resend
                // it after the RNR timer.
                self.nak_outstanding = true;
                a.reply = self.ack(AckKind::NakRnr, req.psn);
                return a;
            }
            op => {
                if op == Op::Send && req.first {
                    self.recv_wqes -= 1;
                }
                a.deliver = req.payload;
                self.unacked += 1;
                1
            }
        };
        self.epsn = psn_add(self.epsn, taken);
        let Some(b) = self.reorder.as_mut() else {
            if req.op != Op::Read {
                a.message_done = req.last;
                if req.last || self.unacked >= self.p.ack_every {
                    a.reply = self.ack(AckKind::Ack, req.psn);
                }
            }
            return a;
        };
        // Out-of-order RC: past every packet placed behind this one; its message and
        // theirs complete in order.
        if req.last && req.op != Op::Read {
            self.done.push_back(req.wr_id);
        }
        let passed = b.advance(now, taken, &mut self.done);
        self.epsn = psn_add(self.epsn, passed);
        if req.op != Op::Read && (req.last || passed > 0 || self.unacked >= self.p.ack_every) {
            a.reply = self.ack(AckKind::Ack, psn_add(self.epsn, PSN_MASK as u64));
        }
        a
    }

    /// Out-of-order RC: a packet `d` PSNs ahead of ePSN is placed (or, if it cannot run
    /// ahead of the packets before it, counted missing).
    fn place_ahead(&mut self, now: SimTime, req: &TxRequest, d: u64) -> ResponderAction {
        let mut a = ResponderAction::default();
        let b = self.reorder.as_mut().expect("out-of-order RC");
        let seq = b.next() + d;
        self.stats.out_of_sequence += 1;
        if req.op == Op::Read || (req.op == Op::Send && req.first) {
            // A READ runs, and a SEND takes its receive WQE, in order only.
            if !b.is_placed(seq) {
                b.mark_missing(now, seq);
            }
            return a;
        }
        match b.place(now, seq, req.last.then_some(req.wr_id)) {
            Placed::Duplicate => {
                self.stats.duplicates += 1;
                a.duplicate = true;
            }
            Placed::Ahead { new_hole } => {
                a.deliver = req.payload;
                let selective = self.p.out_of_order.is_some_and(|o| o.selective_nak);
                if let Some((first, count)) = new_hole.filter(|_| selective) {
                    self.selective_nak(first, count);
                }
            }
        }
        a
    }
}
