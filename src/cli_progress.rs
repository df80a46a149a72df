//! The command line's progress line for a long `run`: simulated time, events per second
//! and (with a `duration`) an ETA, on stderr when it is a terminal; it only watches.

static PROGRESS_BAR: std::sync::OnceLock<indicatif::ProgressBar> = std::sync::OnceLock::new();

/// On a terminal, and unless `quiet`, a progress line for long runs: simulated time (of
/// the `duration`, with an ETA, when there is one) and events per second, cleared when
/// the run ends. It only watches (stderr, every 2^20 events).
pub fn show_progress(quiet: bool) {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return;
    }
    let bar = PROGRESS_BAR.get_or_init(|| indicatif::ProgressBar::new(1_000_000));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {msg}, {elapsed} elapsed")
            .expect("template"),
    );
    // Events per second since the last report (a new run, a compare set or a repeat,
    // starts its count again).
    let last = std::sync::Mutex::new((std::time::Instant::now(), 0u64));
    doorbell::sim::set_progress(Box::new(move |now, end, events| {
        let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
        let since = l.0.elapsed().as_secs_f64().max(1e-9);
        let rate = events.saturating_sub(l.1) as f64 / since;
        *l = (std::time::Instant::now(), events);
        let eta = end.map_or(String::new(), |e| {
            bar.set_position((now.0 as f64 / e.0.max(1) as f64 * 1e6) as u64);
            let left = e.0.saturating_sub(now.0) as f64 * 1e-12;
            format!(" of {:.1} us, ETA {}", e.as_us_f64(), {
                let done = now.0 as f64 * 1e-12;
                let secs = bar.elapsed().as_secs_f64() * left / done.max(1e-12);
                indicatif::HumanDuration(std::time::Duration::from_secs_f64(secs.min(1e9)))
            })
        });
        bar.set_message(format!(
            "{:.1} us simulated{eta}, {:.1} M events/s",
            now.as_us_f64(),
            rate / 1e6
        ));
    }));
}

/// Clears the progress line (before the report is printed).
pub fn clear_progress() {
    if let Some(b) = PROGRESS_BAR.get() {
        b.finish_and_clear();
    }
}
