//! Curves drawn from a run's or a sweep's result files (plotters), as PNG and SVG.
//!
//! What is drawn depends on what the folder holds:
//! - `sweep.csv`: P99 and P99.9 FCT, P99 slowdown, aggregate goodput and (with
//!   collectives) busbw against the first swept field, one series per combination of the other swept
//!   fields, each point the mean over repeats with a band from the lowest to the highest;
//! - `collective.csv`: bus bandwidth against size (log x), one series per item and set;
//! - `flows.csv`: the FCT CDF (log x);
//! - `timeseries.csv`: queue depth per port and DCQCN rate per flow over time;
//! - `window.csv`: throughput against window, with the analytic bound;
//! - `training.csv`: each training step as a stacked bar (compute, pipeline bubble,
//!   exposed communication), one per set, job and step.
//!
//! Text uses DejaVu Sans, bundled in `assets/fonts` (its licence beside it), so a machine
//! with no fonts configured draws readable labels. Images are 1000 x 640 pixels.

use crate::outdir::{drawing_path, publish};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Width and height of every image, pixels.
pub const SIZE: (u32, u32) = (1000, 640);

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
        // Registering a valid bundled font cannot fail; if it did, text would be missing,
        // not the plot.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes);
    });
}

/// One line on a chart: points, and optionally a (low, high) band per point.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub band: Vec<(f64, f64, f64)>,
    pub dashed: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub series: Vec<Series>,
}

type DrawResult = Result<(), String>;

/// A tick label in the axis's unit, for a reader: sizes as B, KiB, MiB, GiB (binary
/// when the value is a whole number of them, else kB, MB, GB); times given in us as us,
/// ms or s; other values in k and M; never `10000000.0`.
fn tick(v: f64, axis: &str) -> String {
    let short = |x: f64| {
        let t = format!("{:.2}", x);
        let t = t.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    };
    let a = axis.to_ascii_lowercase();
    let m = v.abs();
    if a.contains("bytes") {
        for (unit, bin, dec) in [
            ("G", 1u64 << 30, 1e9),
            ("M", 1 << 20, 1e6),
            ("K", 1 << 10, 1e3),
        ] {
            if m >= bin as f64 && (m / bin as f64).fract() == 0.0 {
                return format!("{} {unit}iB", short(v / bin as f64));
            }
            if m >= dec {
                return format!(
                    "{} {}B",
                    short(v / dec),
                    if unit == "K" { "k" } else { unit }
                );
            }
        }
        return format!("{} B", short(v));
    }
    if a.contains("(us") {
        return if m >= 1e6 {
            format!("{} s", short(v / 1e6))
        } else if m >= 1e3 {
            format!("{} ms", short(v / 1e3))
        } else {
            format!("{} us", short(v))
        };
    }
    if m >= 1e6 {
        format!("{}M", short(v / 1e6))
    } else if m >= 1e4 {
        format!("{}k", short(v / 1e3))
    } else {
        short(v)
    }
}

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    c: &Chart,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let e = |x: &dyn std::fmt::Display| x.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let pts = c
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .copied()
                .chain(s.band.iter().flat_map(|b| [(b.0, b.1), (b.0, b.2)]))
        })
        .filter(|p| p.0.is_finite() && p.1.is_finite() && (!c.log_x || p.0 > 0.0));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for (x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y1) = if c.log_x {
            (1.0, 10.0, 1.0)
        } else {
            (0.0, 1.0, 1.0)
        };
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    y1 *= 1.05;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&c.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(52)
        .y_label_area_size(80);
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(c.x_label.as_str())
                .y_desc(c.y_label.as_str())
                .x_label_formatter(&|v| tick(*v, &c.x_label))
                .y_label_formatter(&|v| tick(*v, &c.y_label))
                .label_style(("sans-serif", 15))
                .axis_desc_style(("sans-serif", 17))
                .draw()
                .map_err(|x| e(&x))?;
            for (i, s) in c.series.iter().enumerate() {
                let col = colors[i % colors.len()];
                if !s.band.is_empty() {
                    let mut poly: Vec<(f64, f64)> = s.band.iter().map(|b| (b.0, b.2)).collect();
                    poly.extend(s.band.iter().rev().map(|b| (b.0, b.1)));
                    chart
                        .draw_series(std::iter::once(Polygon::new(poly, col.mix(0.18).filled())))
                        .map_err(|x| e(&x))?;
                }
                let style = col.stroke_width(if s.dashed { 1 } else { 2 });
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), style))
                    .map_err(|x| e(&x))?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2))
                    });
                chart
                    .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, col.filled())))
                    .map_err(|x| e(&x))?;
            }
            chart
                .configure_series_labels()
                .label_font(("sans-serif", 15))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|x| e(&x))?;
        }};
    }
    if c.log_x {
        body!(builder
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
            .map_err(|x| e(&x))?);
    } else {
        body!(builder
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|x| e(&x))?);
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Writes `<stem>.png` and `<stem>.svg`.
pub fn draw(c: &Chart, stem: &Path) -> Result<Vec<PathBuf>, String> {
    register_font();
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    // Drawn under a temporary name and renamed when whole (see `outdir`).
    let (png_tmp, svg_tmp) = (drawing_path(&png), drawing_path(&svg));
    draw_on(BitMapBackend::new(&png_tmp, SIZE).into_drawing_area(), c)?;
    draw_on(SVGBackend::new(&svg_tmp, SIZE).into_drawing_area(), c)?;
    for p in [&png, &svg] {
        publish(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(vec![png, svg])
}

/// Stacked bars: one bar per label, each split into the named parts.
pub struct Bars {
    pub title: String,
    pub y_label: String,
    pub labels: Vec<String>,
    pub parts: Vec<(String, Vec<f64>)>,
}

fn draw_bars_on<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    b: &Bars,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let e = |x: &dyn std::fmt::Display| x.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let n = b.labels.len();
    let top = (0..n)
        .map(|i| b.parts.iter().map(|p| p.1[i].max(0.0)).sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(&b.title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(52)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0.0..top)
        .map_err(|x| e(&x))?;
    let labels = b.labels.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(1))
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc(b.y_label.as_str())
        .y_label_formatter(&|v| tick(*v, ""))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(|x| e(&x))?;
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
    ];
    let mut base = vec![0.0f64; n];
    for (k, (name, values)) in b.parts.iter().enumerate() {
        let col = colors[k % colors.len()];
        let bars: Vec<Rectangle<(f64, f64)>> = (0..n)
            .map(|i| {
                let (lo, hi) = (base[i], base[i] + values[i].max(0.0));
                base[i] = hi;
                Rectangle::new([(i as f64 - 0.3, lo), (i as f64 + 0.3, hi)], col.filled())
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], col.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Writes `<stem>.png` and `<stem>.svg` of stacked bars.
pub fn draw_bars(b: &Bars, stem: &Path) -> Result<Vec<PathBuf>, String> {
    register_font();
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    let (png_tmp, svg_tmp) = (drawing_path(&png), drawing_path(&svg));
    draw_bars_on(BitMapBackend::new(&png_tmp, SIZE).into_drawing_area(), b)?;
    draw_bars_on(SVGBackend::new(&svg_tmp, SIZE).into_drawing_area(), b)?;
    for p in [&png, &svg] {
        publish(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(vec![png, svg])
}

/// One plain line per named group of points.
fn lines(groups: BTreeMap<String, Vec<(f64, f64)>>) -> Vec<Series> {
    groups
        .into_iter()
        .map(|(name, points)| Series {
            name,
            points,
            ..Series::default()
        })
        .collect()
}

/// One numeric column of a CSV file, read line by line: a `flows.csv` of a million rows
/// (`run --flows` on a large collective) costs eight bytes a row, not the whole text.
/// Fields before the column must not hold quoted commas (true of `flows.csv`).
fn read_column(path: &Path, name: &str) -> Option<Vec<f64>> {
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(std::fs::File::open(path).ok()?).lines();
    let header = lines.next()?.ok()?;
    let c = header.split(',').position(|h| h == name)?;
    Some(
        lines
            .map_while(Result::ok)
            .filter_map(|l| l.split(',').nth(c).and_then(num))
            .collect(),
    )
}

/// An FCT CDF chart (log time axis) of `series`.
fn fct_cdf_chart(title: &str, series: Vec<Series>) -> Chart {
    Chart {
        title: title.into(),
        x_label: "FCT (us, log)".into(),
        y_label: "fraction of flows".into(),
        log_x: true,
        series,
    }
}

/// A CDF of the positive values in `v`: at most 400 points, evenly spaced in rank, and
/// the last, so that files stay small whatever the count.
fn cdf_points(mut v: Vec<f64>) -> Vec<(f64, f64)> {
    v.retain(|x| *x > 0.0);
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(400).max(1);
    let mut points: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (v[i], (i + 1) as f64 / n as f64))
        .collect();
    if (n - 1) % step != 0 {
        points.push((v[n - 1], 1.0));
    }
    points
}

/// A CSV file as a header and rows of fields (quoted fields may hold commas).
fn read_csv(path: &Path) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let split = |line: &str| -> Vec<String> {
        let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    cur.push('"');
                    chars.next();
                }
                ('"', _) => quoted = !quoted,
                (',', false) => out.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            }
        }
        out.push(cur);
        out
    };
    let mut lines = text.lines();
    let header = split(lines.next()?);
    let rows = lines.filter(|l| !l.is_empty()).map(split).collect();
    Some((header, rows))
}

fn col(header: &[String], name: &str) -> Option<usize> {
    header.iter().position(|h| h == name)
}

fn num(s: &str) -> Option<f64> {
    // A plain number, or a swept value with a unit: sizes in bytes, durations in us,
    // rates in Gb/s.
    let t = s.trim();
    if let Ok(x) = t.parse::<f64>() {
        return Some(x);
    }
    if let Ok(b) = crate::units::parse_bytes(t) {
        return Some(b.0 as f64);
    }
    if let Ok(d) = crate::units::parse_duration(t) {
        return Some(d.as_us_f64());
    }
    crate::units::parse_rate(t).ok().map(|r| r.0 as f64 / 1e9)
}

/// Draws every chart the folder's files allow (and, for a compare run, each set's
/// folder's); returns the files written.
pub fn plot_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    if dir.join("compare.csv").exists() {
        let mut subs: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("summary.json").exists())
            .collect();
        // In the compare table's order (its first column), else by name.
        let order: Vec<String> = read_csv(&dir.join("compare.csv"))
            .map(|(_, rows)| rows.iter().filter_map(|r| r.first().cloned()).collect())
            .unwrap_or_default();
        subs.sort_by_key(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().to_string());
            let i = name
                .as_ref()
                .and_then(|n| order.iter().position(|o| o == n))
                .unwrap_or(usize::MAX);
            (i, name)
        });
        // Every set's FCT CDF on one chart (the compare table's percentiles, whole).
        let mut series = Vec::new();
        for sub in &subs {
            out.extend(plot_dir(sub)?);
            if let Some(v) = read_column(&sub.join("flows.csv"), "fct_us") {
                let points = cdf_points(v);
                if !points.is_empty() {
                    series.push(Series {
                        name: sub
                            .file_name()
                            .map_or(String::new(), |n| n.to_string_lossy().to_string()),
                        points,
                        ..Series::default()
                    });
                }
            }
        }
        if !series.is_empty() {
            let chart = fct_cdf_chart("flow completion time CDF by set", series);
            out.extend(draw(&chart, &dir.join("compare-fct-cdf"))?);
        }
    }
    if let Some((h, rows)) = read_csv(&dir.join("sweep.csv")) {
        let swept: Vec<usize> = (0..h.len()).filter(|&i| h[i].starts_with("set.")).collect();
        if let Some(&xcol) = swept.first() {
            for (metric, label, file) in [
                ("fct_us.p99", "P99 FCT (us)", "sweep-fct-p99"),
                ("fct_us.p999", "P99.9 FCT (us)", "sweep-fct-p999"),
                ("slowdown.p99", "P99 slowdown (x)", "sweep-slowdown-p99"),
                (
                    "collectives.0.avg_busbw_gbs",
                    "bus bandwidth (GB/s, mean over sizes)",
                    "sweep-busbw",
                ),
                (
                    "goodput_gbps.aggregate",
                    "aggregate goodput (Gb/s)",
                    "sweep-goodput",
                ),
            ] {
                let Some(m) = col(&h, metric) else { continue };
                // Series: the other swept values; points: x -> values over repeats.
                let mut groups: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
                for r in &rows {
                    let key: Vec<String> = swept[1..]
                        .iter()
                        .filter_map(|&i| {
                            let v = r.get(i).filter(|v| !v.is_empty())?;
                            Some(format!("{}={v}", &h[i][4..]))
                        })
                        .collect();
                    if let (Some(x), Some(y)) = (r.get(xcol), r.get(m).and_then(|v| num(v))) {
                        groups
                            .entry(key.join(", "))
                            .or_default()
                            .entry(x.clone())
                            .or_default()
                            .push(y);
                    }
                }
                let series = groups
                    .into_iter()
                    .map(|(name, pts)| {
                        let mut v: Vec<(f64, f64, f64, f64)> = pts
                            .into_iter()
                            .filter_map(|(x, ys)| {
                                let x = num(&x)?;
                                let mean = ys.iter().sum::<f64>() / ys.len() as f64;
                                let lo = ys.iter().copied().fold(f64::MAX, f64::min);
                                let hi = ys.iter().copied().fold(f64::MIN, f64::max);
                                Some((x, mean, lo, hi))
                            })
                            .collect();
                        v.sort_by(|a, b| a.0.total_cmp(&b.0));
                        Series {
                            name: if name.is_empty() {
                                metric.to_string()
                            } else {
                                name
                            },
                            points: v.iter().map(|p| (p.0, p.1)).collect(),
                            band: v.iter().map(|p| (p.0, p.2, p.3)).collect(),
                            dashed: false,
                        }
                    })
                    .collect();
                let chart = Chart {
                    title: format!("{label} vs {}", &h[xcol][4..]),
                    x_label: h[xcol][4..].to_string(),
                    y_label: label.to_string(),
                    log_x: false,
                    series,
                };
                out.extend(draw(&chart, &dir.join(file))?);
            }
        }
    }
    if let Some((h, rows)) = read_csv(&dir.join("training.csv")) {
        // A bar per set, job and step: compute, pipeline bubble, exposed communication.
        let (set, job, step) = (col(&h, "set"), col(&h, "job"), col(&h, "step"));
        let steps = step.map_or(0, |i| {
            rows.iter()
                .filter(|r| r.get(i).map(|v| v.as_str()) != Some("0"))
                .count()
        });
        let jobs: std::collections::BTreeSet<&str> = job
            .map(|i| {
                rows.iter()
                    .filter_map(|r| r.get(i).map(|v| v.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        let mut labels = Vec::new();
        let mut parts: Vec<(String, Vec<f64>)> =
            ["compute", "pipeline bubble", "exposed communication"]
                .iter()
                .map(|n| (n.to_string(), Vec::new()))
                .collect();
        for r in &rows {
            let mut l: Vec<String> = Vec::new();
            if let Some(i) = set {
                l.extend(r.get(i).cloned());
            }
            if jobs.len() > 1 || set.is_none() {
                l.extend(job.and_then(|i| r.get(i).cloned()));
            }
            if steps > 0 {
                l.extend(step.and_then(|i| r.get(i)).map(|v| format!("step {v}")));
            }
            labels.push(l.join(" "));
            for (k, name) in ["compute_ms", "bubble_ms", "exposed_comm_ms"]
                .iter()
                .enumerate()
            {
                let v = col(&h, name)
                    .and_then(|i| r.get(i))
                    .and_then(|v| num(v))
                    .unwrap_or(0.0);
                parts[k].1.push(v);
            }
        }
        if !labels.is_empty() && labels.len() <= 40 {
            let bars = Bars {
                title: "training step: compute, pipeline bubble, exposed communication".into(),
                y_label: "time (ms)".into(),
                labels,
                parts,
            };
            out.extend(draw_bars(&bars, &dir.join("training-step"))?);
        }
    }
    if let Some((h, rows)) = read_csv(&dir.join("collective.csv")) {
        if let (Some(size), Some(busbw)) = (col(&h, "size"), col(&h, "busbw_gbs")) {
            let key_cols: Vec<usize> = ["set", "workload", "op", "algorithm"]
                .iter()
                .filter_map(|k| col(&h, k))
                .collect();
            let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for r in &rows {
                let key: Vec<&str> = key_cols
                    .iter()
                    .filter_map(|&i| r.get(i).map(|s| s.as_str()))
                    .collect();
                if let (Some(x), Some(y)) = (
                    r.get(size).and_then(|v| num(v)),
                    r.get(busbw).and_then(|v| num(v)),
                ) {
                    groups.entry(key.join(" ")).or_default().push((x, y));
                }
            }
            let chart = Chart {
                title: "bus bandwidth vs message size".into(),
                x_label: "size (bytes, log)".into(),
                y_label: "busbw (GB/s)".into(),
                log_x: true,
                series: lines(groups),
            };
            out.extend(draw(&chart, &dir.join("busbw"))?);
        }
    }
    if let Some(v) = read_column(&dir.join("flows.csv"), "fct_us") {
        let n = v.iter().filter(|x| **x > 0.0).count();
        let points = cdf_points(v);
        if !points.is_empty() {
            let chart = fct_cdf_chart(
                "flow completion time CDF",
                vec![Series {
                    name: format!("{n} flows"),
                    points,
                    ..Series::default()
                }],
            );
            out.extend(draw(&chart, &dir.join("fct-cdf"))?);
        }
    }
    if let Some((h, rows)) = read_csv(&dir.join("timeseries.csv")) {
        if let (Some(t), Some(o), Some(m), Some(v)) = (
            col(&h, "time_us"),
            col(&h, "object"),
            col(&h, "metric"),
            col(&h, "value"),
        ) {
            for (metric, label, file) in [
                ("queue_bytes", "queue (bytes)", "timeseries-queue"),
                ("rate_gbps", "allowed rate (Gb/s)", "timeseries-rate"),
            ] {
                let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
                for r in rows
                    .iter()
                    .filter(|r| r.get(m).is_some_and(|x| x == metric))
                {
                    if let (Some(x), Some(y)) =
                        (r.get(t).and_then(|s| num(s)), r.get(v).and_then(|s| num(s)))
                    {
                        groups.entry(r[o].clone()).or_default().push((x, y));
                    }
                }
                if groups.is_empty() {
                    continue;
                }
                let chart = Chart {
                    title: format!("{label} over time"),
                    x_label: "time (us)".into(),
                    y_label: label.into(),
                    log_x: false,
                    series: lines(groups),
                };
                out.extend(draw(&chart, &dir.join(file))?);
            }
        }
    }
    if let Some((h, rows)) = read_csv(&dir.join("window.csv")) {
        if let (Some(w), Some(meas), Some(an)) = (
            col(&h, "window_packets"),
            col(&h, "measured_gbps"),
            col(&h, "analytic_gbps"),
        ) {
            // One pair of lines (simulated, analytic) per path length.
            let hops = col(&h, "switch_hops");
            let mut by_hops: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
            for r in &rows {
                let key = hops
                    .and_then(|c| r.get(c))
                    .map_or(String::new(), |x| format!(", {x} switch hop(s)"));
                if let (Some(x), Some(m), Some(a)) = (
                    r.get(w).and_then(|v| num(v)),
                    r.get(meas).and_then(|v| num(v)),
                    r.get(an).and_then(|v| num(v)),
                ) {
                    by_hops.entry(key).or_default().push((x, m, a));
                }
            }
            if !by_hops.is_empty() {
                let mut series = Vec::new();
                for (key, mut pts) in by_hops {
                    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                    series.push(Series {
                        name: format!("simulated{key}"),
                        points: pts.iter().map(|p| (p.0, p.1)).collect(),
                        ..Series::default()
                    });
                    series.push(Series {
                        name: format!("min(line, W x MTU / RTT){key}"),
                        points: pts.iter().map(|p| (p.0, p.2)).collect(),
                        dashed: true,
                        ..Series::default()
                    });
                }
                let chart = Chart {
                    title: "throughput vs window".into(),
                    x_label: "window (packets)".into(),
                    y_label: "throughput (Gb/s)".into(),
                    log_x: false,
                    series,
                };
                out.extend(draw(&chart, &dir.join("window"))?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tick_tests {
    use super::tick;

    #[test]
    fn ticks_read_as_a_person_writes_them() {
        assert_eq!(tick(10_000_000.0, "size (bytes, log)"), "10 MB");
        assert_eq!(tick(16_777_216.0, "size (bytes, log)"), "16 MiB");
        assert_eq!(tick(4096.0, "queue (bytes)"), "4 KiB");
        assert_eq!(tick(512.0, "queue (bytes)"), "512 B");
        assert_eq!(tick(10_000.0, "FCT (us, log)"), "10 ms");
        assert_eq!(tick(1_000_000.0, "FCT (us, log)"), "1 s");
        assert_eq!(tick(2.5, "FCT (us, log)"), "2.5 us");
        assert_eq!(tick(0.25, "fraction of flows"), "0.25");
        assert_eq!(tick(120_000.0, "aggregate goodput (Gb/s)"), "120k");
        assert_eq!(tick(0.0, "fraction of flows"), "0");
    }
}
