//! The DCQCN fluid model: N identical long flows through one bottleneck of capacity C,
//! their current rate R_C, target rate R_T and alpha, and the bottleneck's queue q, as
//! delay differential equations, integrated here with a fixed step.
//!
//! Source: Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM
//! 2015, §5, equations (5)-(9), as the paper's authors integrate them (`dcqcn2.m`,
//! functions `DCQCNModel`, `IntermediateTerms`, `CalculateP`). Quantities are in packets
//! (the marking probability is per packet); p is RED on the queue one feedback delay
//! tau* ago, and every flow term uses R_C one feedback delay ago:
//! - a = 1 - (1 - p)^(tau R_C'): at least one marked packet in a CNP interval tau;
//! - b = p / ((1 - p)^-B - 1), c = b (1 - p)^(F B): byte-counter events, past F;
//! - d = p / ((1 - p)^-(T R_C') - 1), e = d (1 - p)^(F T R_C'): timer events, past F;
//! - dR_C/dt = -R_C alpha a / (2 tau) + (R_T - R_C) R_C' (b + d) / 2;
//! - dR_T/dt = -(R_T - R_C) a / tau + R_AI R_C' (c + e);
//! - dalpha/dt = g ((1 - (1 - p)^(tau' R_C')) - alpha) / tau';
//! - dq/dt = N R_C - C, with q >= 0; neither rate exceeds the line rate.
//!
//! This is the paper's reaction point: every CNP cuts and clamps the target (the `paper`
//! preset), no hyper increase, no minimum rate, no PFC. The flows start alike and stay
//! alike, so one flow's state stands for all N.

/// The model's inputs, in the paper's units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluidParams {
    /// Flows sharing the bottleneck.
    pub flows: u32,
    /// Bottleneck capacity and each flow's line rate, bits per second.
    pub capacity_bps: f64,
    /// Bytes per packet on the wire (rates and queues are counted in packets).
    pub packet_bytes: f64,
    /// CNP interval tau, seconds.
    pub tau_s: f64,
    /// Alpha update period tau', seconds.
    pub tau_prime_s: f64,
    /// Feedback delay tau*: from a packet's marking to its sender's reaction, seconds.
    pub tau_star_s: f64,
    pub g: f64,
    /// Byte counter B, bytes.
    pub byte_counter_bytes: f64,
    /// Rate-increase timer T, seconds.
    pub timer_s: f64,
    /// Fast-recovery steps F.
    pub fast_recovery_steps: u32,
    /// Additive increase R_AI, bits per second.
    pub rate_ai_bps: f64,
    /// RED: no mark below kmin bytes, pmax at kmax, every packet above.
    pub kmin_bytes: f64,
    pub kmax_bytes: f64,
    pub pmax: f64,
}

/// The state at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FluidPoint {
    pub time_s: f64,
    /// Each flow's current rate R_C, bits per second.
    pub rate_bps: f64,
    pub target_bps: f64,
    pub alpha: f64,
    pub queue_bytes: f64,
}

impl FluidParams {
    /// The paper's parameters (Table 1 and `dcqcn2.m`: tau 50 us, tau' 55 us, g 1/256,
    /// B 10 MB, T 55 us, F 5, R_AI 40 Mb/s, RED 5 KB / 200 KB / 1%) for `flows` flows on a
    /// bottleneck of `capacity_bps`, packets of `packet_bytes` and a feedback delay of
    /// `tau_star_s`: the `paper` preset's reaction point and switch thresholds.
    pub fn paper(flows: u32, capacity_bps: f64, packet_bytes: f64, tau_star_s: f64) -> Self {
        FluidParams {
            flows,
            capacity_bps,
            packet_bytes,
            tau_s: 50e-6,
            tau_prime_s: 55e-6,
            tau_star_s,
            g: 1.0 / 256.0,
            byte_counter_bytes: 10e6,
            timer_s: 55e-6,
            fast_recovery_steps: 5,
            rate_ai_bps: 40e6,
            kmin_bytes: 5e3,
            kmax_bytes: 200e3,
            pmax: 0.01,
        }
    }

    /// RED's marking probability at a queue of `q` packets (`CalculateP`).
    fn marking(&self, q: f64) -> f64 {
        let (kmin, kmax) = (
            self.kmin_bytes / self.packet_bytes,
            self.kmax_bytes / self.packet_bytes,
        );
        if q <= kmin {
            0.0
        } else if q <= kmax {
            (q - kmin) / (kmax - kmin) * self.pmax
        } else {
            1.0
        }
    }

    /// Integrates from every flow at line rate, R_T at line rate, alpha 1 and an empty
    /// queue (the paper's start) for `duration_s` with steps of `step_s` (forward Euler;
    /// the delayed terms read the state tau* ago from a ring of past steps). Returns the
    /// state every `every` steps, starting with the first.
    pub fn integrate(&self, duration_s: f64, step_s: f64, every: usize) -> Vec<FluidPoint> {
        let pkt_bits = self.packet_bytes * 8.0;
        let c = self.capacity_bps / pkt_bits;
        let n = self.flows as f64;
        let b_pkts = self.byte_counter_bytes / self.packet_bytes;
        let f = self.fast_recovery_steps as f64;
        let rai = self.rate_ai_bps / pkt_bits;
        let lag = ((self.tau_star_s / step_s).round() as usize).max(1);
        // Past (R_C, q), one slot per step; before t = 0 the flows were at line rate and
        // the queue empty.
        let mut past = vec![(c, 0.0f64); lag];
        let (mut rc, mut rt, mut alpha, mut q) = (c, c, 1.0f64, 0.0f64);
        let steps = (duration_s / step_s).round() as usize;
        let mut out = Vec::with_capacity(steps / every.max(1) + 1);
        for k in 0..=steps {
            if k % every.max(1) == 0 {
                out.push(FluidPoint {
                    time_s: k as f64 * step_s,
                    rate_bps: rc * pkt_bits,
                    target_bps: rt * pkt_bits,
                    alpha,
                    queue_bytes: q * self.packet_bytes,
                });
            }
            let (rc_lag, q_lag) = past[k % lag];
            past[k % lag] = (rc, q);
            let p = self.marking(q_lag);
            // (1 - p)^x for x >= 0, and (1 - p)^-x - 1, without losing precision.
            let ln1p = (-p).ln_1p();
            let pow = |x: f64| (x * ln1p).exp();
            let (a, bb, cc, d, e) = if p <= 0.0 {
                let d = if rc_lag > 0.0 {
                    1.0 / (self.timer_s * rc_lag)
                } else {
                    0.0
                };
                (0.0, 1.0 / b_pkts, 1.0 / b_pkts, d, d)
            } else if p >= 1.0 {
                (1.0, 0.0, 0.0, 0.0, 0.0)
            } else {
                let a = 1.0 - pow(self.tau_s * rc_lag);
                let bb = p / (-b_pkts * ln1p).exp_m1();
                let cc = bb * pow(f * b_pkts);
                let tr = self.timer_s * rc_lag;
                let d = if tr > 0.0 {
                    p / (-tr * ln1p).exp_m1()
                } else {
                    0.0
                };
                let e = d * pow(f * tr);
                (a, bb, cc, d, e)
            };
            let mut drc =
                -rc * alpha * a / (2.0 * self.tau_s) + (rt - rc) * rc_lag * (bb + d) / 2.0;
            let mut drt = -(rt - rc) * a / self.tau_s + rai * rc_lag * (cc + e);
            let dalpha =
                self.g * ((1.0 - pow(self.tau_prime_s * rc_lag)) - alpha) / self.tau_prime_s;
            if rc >= c && drc > 0.0 {
                drc = 0.0;
            }
            if rt >= c && drt > 0.0 {
                drt = 0.0;
            }
            let dq = n * rc - c;
            rc = (rc + drc * step_s).clamp(0.0, c);
            rt = (rt + drt * step_s).clamp(0.0, c);
            alpha = (alpha + dalpha * step_s).clamp(0.0, 1.0);
            q = (q + dq * step_s).max(0.0);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's parameters at 40 Gb/s, 1000 B packets, 4 us feedback delay.
    fn paper(flows: u32) -> FluidParams {
        FluidParams::paper(flows, 40e9, 1000.0, 4e-6)
    }

    #[test]
    fn red_marks_nothing_below_kmin_pmax_at_kmax_and_everything_above() {
        let p = paper(2);
        assert_eq!(p.marking(4.9), 0.0);
        assert!((p.marking(200.0) - 0.01).abs() < 1e-12);
        assert!((p.marking(102.5) - 0.005).abs() < 1e-12);
        assert_eq!(p.marking(200.1), 1.0);
    }

    /// With no marking (a bottleneck wider than the flows), nothing cuts: the flows stay
    /// at line rate, alpha decays as (1 - g) per tau' (dalpha/dt = -g alpha / tau'), and
    /// no queue forms.
    #[test]
    fn without_congestion_the_flows_keep_line_rate_and_alpha_decays() {
        let p = FluidParams {
            capacity_bps: 40e9,
            flows: 1,
            ..paper(1)
        };
        let out = p.integrate(1e-3, 1e-7, 10_000);
        let last = out.last().unwrap();
        assert_eq!(last.rate_bps, 40e9);
        assert_eq!(last.queue_bytes, 0.0);
        let want = (-p.g * 1e-3 / p.tau_prime_s).exp();
        assert!(
            (last.alpha / want - 1.0).abs() < 1e-3,
            "{} vs {want}",
            last.alpha
        );
    }

    /// At the fixed point the queue holds the marking that balances cuts and increases;
    /// the flows share the link: N R_C = C once the start-up has passed.
    #[test]
    fn flows_converge_to_their_share_and_the_queue_settles_between_the_thresholds() {
        for n in [2u32, 8] {
            let p = paper(n);
            let out = p.integrate(0.1, 1e-6, 1000);
            let tail = &out[out.len() - 20..];
            let rate: f64 = tail.iter().map(|x| x.rate_bps).sum::<f64>() / 20.0;
            let q: f64 = tail.iter().map(|x| x.queue_bytes).sum::<f64>() / 20.0;
            assert!(
                (n as f64 * rate / 40e9 - 1.0).abs() < 0.02,
                "N {n}: {rate} b/s each"
            );
            assert!((5e3..200e3).contains(&q), "N {n}: queue {q} B");
        }
    }
}
