//! `gputaskman plot FILE -o mem.svg`: measured memory over time, lines per
//! device (used memory, and its total for scale) and per process and device
//! (VRAM, and spill where measured), each in a colour of its own, as a
//! self-contained SVG that any browser opens.
//!
//! Axes are in binary units with power-of-two steps; times are UTC clock
//! times. A process or value that is not listed or unknown leaves a gap,
//! never a drop to 0. Only the processes with the highest peaks are drawn
//! (`--top`); the rest are counted in the title. `--rss` adds resident
//! memory (for runtimes on the CPU).

use super::index::RecordingIndex;
use super::summary::{device_key, device_label, DeviceKey, ProcessKey};
use crate::units::unix_seconds;
use std::collections::HashMap;
use std::fmt::Write as _;

/// The narrowest chart; a long legend widens it.
const MIN_WIDTH: f64 = 1200.0;
/// About the width of a character of the legend (12 px sans-serif).
const CHAR_W: f64 = 7.0;
const HEIGHT: f64 = 600.0;
const LEFT: f64 = 90.0;
const TOP: f64 = 50.0;
const PLOT_W: f64 = 760.0;
const PLOT_H: f64 = 470.0;
const LEGEND_X: f64 = LEFT + PLOT_W + 30.0;
const PALETTE: [&str; 12] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
    "#393b79", "#637939",
];

pub struct Options {
    /// Draw this many processes at most (by peak).
    pub top: usize,
    /// Draw resident memory (RSS) too.
    pub rss: bool,
}

/// What a line is, which sets how it is drawn.
#[derive(Clone, Copy, PartialEq)]
enum Line {
    /// A device's memory size: thin and dotted, the ceiling of its used.
    DeviceTotal,
    /// A device's used memory: thick and dashed.
    DeviceUsed,
    /// A process's figure: thin and solid.
    Process,
}

/// One line on the chart: `(seconds since the first snapshot, bytes)`
/// points, `None` where there is a gap.
struct Series {
    label: String,
    line: Line,
    points: Vec<Option<(f64, u64)>>,
    peak: u64,
}

impl Series {
    fn new(label: String, line: Line, n: usize) -> Series {
        Series {
            label,
            line,
            points: vec![None; n],
            peak: 0,
        }
    }

    fn set(&mut self, at: usize, t: f64, v: Option<u64>) {
        if let Some(v) = v {
            self.points[at] = Some((t, v));
            self.peak = self.peak.max(v);
        }
    }

    fn known(&self) -> bool {
        self.points.iter().any(|p| p.is_some())
    }
}

/// Per process: its name, per-device vram/spill series, and rss.
type ProcSeries = (String, Vec<(DeviceKey, Series, Series)>, Series);

/// Per device: its used and total series.
type DeviceSeries = (DeviceKey, Series, Series);

/// The series of every device, and of every process by its key.
type Gathered = (Vec<DeviceSeries>, Vec<(ProcessKey, ProcSeries)>);

/// The plot's scale: seconds and bytes to SVG coordinates.
struct Scale {
    t_max: f64,
    y_top: u64,
    y_step: u64,
}

impl Scale {
    fn x(&self, t: f64) -> f64 {
        LEFT + t / self.t_max * PLOT_W
    }

    fn y(&self, v: u64) -> f64 {
        TOP + PLOT_H - (v as f64 / self.y_top as f64) * PLOT_H
    }
}

/// Draws the recording; returns the SVG text and a one-line account of
/// what was drawn.
pub fn plot(rec: &RecordingIndex, title: &str, options: &Options) -> anyhow::Result<(String, String)> {
    if rec.is_empty() {
        anyhow::bail!("no snapshot to plot");
    }
    let n = rec.len();
    let times: Vec<Option<f64>> = (0..n).map(|i| rec.taken_at(i).and_then(unix_seconds)).collect();
    let t0 = times.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    if !t0.is_finite() {
        anyhow::bail!("no snapshot has a readable time (taken_at)");
    }
    let (devices, procs) = gather(rec, &times, t0);
    let (series, left_out) = choose(devices, procs, options);
    if series.is_empty() {
        anyhow::bail!(
            "nothing measured to plot: no device memory and no per-process VRAM in {}{}",
            super::index::snapshots(n as u64),
            if options.rss {
                ""
            } else {
                " (--rss draws resident memory)"
            }
        );
    }

    let t_max = times.iter().flatten().map(|t| t - t0).fold(0.0, f64::max).max(1.0);
    let y_max = series.iter().map(|s| s.peak).max().unwrap_or(0).max(1);
    let y_step = byte_step(y_max);
    let scale = Scale {
        t_max,
        y_top: y_max.div_ceil(y_step) * y_step,
        y_step,
    };
    let legend: Vec<String> = series
        .iter()
        .map(|s| format!("{} (peak {})", s.label, axis_bytes_exact(s.peak)))
        .collect();
    let mut svg = header(&legend, title, n, t0, t_max, left_out);
    draw_axes(&mut svg, &scale, t0);
    draw_series(&mut svg, &series, &legend, &scale);
    let _ = writeln!(svg, "</svg>");
    let account = format!(
        "{} series over {}{}",
        series.len(),
        super::index::snapshots(n as u64),
        if left_out > 0 {
            format!(" ({left_out} smaller processes not drawn; --top to change)")
        } else {
            String::new()
        }
    );
    Ok((svg, account))
}

/// Every series of the recording: per device, and per process.
fn gather(rec: &RecordingIndex, times: &[Option<f64>], t0: f64) -> Gathered {
    let n = rec.len();
    let mut devices: Vec<DeviceSeries> = Vec::new();
    let mut procs: Vec<(ProcessKey, ProcSeries)> = Vec::new();
    let mut proc_index: HashMap<ProcessKey, usize> = HashMap::new();
    rec.for_each(|at, s| {
        let Some(t) = times[at].map(|t| t - t0) else { return };
        let mut labels: HashMap<(&str, u32), (DeviceKey, String)> = HashMap::new();
        for d in &s.devices {
            let key = device_key(d);
            labels.insert((d.backend.as_str(), d.index), (key.clone(), device_label(d)));
            let k = match devices.iter().position(|(k, ..)| *k == key) {
                Some(k) => k,
                None => {
                    let label = device_label(d);
                    devices.push((
                        key,
                        Series::new(format!("{label} used"), Line::DeviceUsed, n),
                        Series::new(format!("{label} total"), Line::DeviceTotal, n),
                    ));
                    devices.len() - 1
                }
            };
            devices[k].1.set(at, t, d.memory_used_bytes);
            devices[k].2.set(at, t, d.memory_total_bytes);
        }
        for p in &s.processes {
            let key: ProcessKey = (p.pid, p.start_time.clone());
            let name = format!("{} {}", p.pid, p.name.as_deref().unwrap_or("(not in /proc)"));
            let k = *proc_index.entry(key.clone()).or_insert_with(|| {
                procs.push((
                    key,
                    (
                        name.clone(),
                        Vec::new(),
                        Series::new(format!("{name} rss"), Line::Process, n),
                    ),
                ));
                procs.len() - 1
            });
            let (name, gpus, rss) = &mut procs[k].1;
            rss.set(at, t, p.rss_bytes);
            for g in &p.gpu {
                let (dk, label) = labels.get(&(g.source.as_str(), g.device)).cloned().unwrap_or_else(|| {
                    (
                        DeviceKey::Index(g.source.clone(), g.device),
                        format!("GPU {}", g.device),
                    )
                });
                let slot = match gpus.iter().position(|e| e.0 == dk) {
                    Some(i) => i,
                    None => {
                        let short = label.split(' ').take(2).collect::<Vec<_>>().join(" ");
                        gpus.push((
                            dk,
                            Series::new(format!("{name} vram {short}"), Line::Process, n),
                            Series::new(format!("{name} spill {short}"), Line::Process, n),
                        ));
                        gpus.len() - 1
                    }
                };
                gpus[slot].1.set(at, t, g.vram_bytes);
                gpus[slot].2.set(at, t, g.spill_bytes);
            }
        }
    });

    (devices, procs)
}

/// The device series and those of the processes with the highest peaks
/// (`--top`), and how many processes were left out.
fn choose(devices: Vec<DeviceSeries>, procs: Vec<(ProcessKey, ProcSeries)>, options: &Options) -> (Vec<Series>, usize) {
    let peak = |p: &ProcSeries| -> u64 {
        let gpu = p.1.iter().map(|g| g.1.peak.max(g.2.peak)).max().unwrap_or(0);
        if options.rss {
            gpu.max(p.2.peak)
        } else {
            gpu
        }
    };
    let mut ranked: Vec<ProcSeries> = procs.into_iter().map(|(_, p)| p).collect();
    ranked.retain(|p| p.1.iter().any(|g| g.1.known() || g.2.known()) || (options.rss && p.2.known()));
    ranked.sort_by_key(|p| std::cmp::Reverse(peak(p)));
    let left_out = ranked.len().saturating_sub(options.top);
    ranked.truncate(options.top);

    let mut series: Vec<Series> = devices
        .into_iter()
        .flat_map(|(_, used, total)| [used, total])
        .filter(|s| s.known())
        .collect();
    for (_, gpus, rss) in ranked {
        for (_, vram, spill) in gpus {
            if vram.known() {
                series.push(vram);
            }
            if spill.known() && spill.peak > 0 {
                series.push(spill);
            }
        }
        if options.rss && rss.known() {
            series.push(rss);
        }
    }
    (series, left_out)
}

/// The SVG's opening, title and subtitle; the width fits the longest
/// legend line.
fn header(legend: &[String], title: &str, n: usize, t0: f64, t_max: f64, left_out: usize) -> String {
    let longest = legend.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let width = MIN_WIDTH.max((LEGEND_X + 30.0 + longest as f64 * CHAR_W + 20.0).ceil());
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" viewBox="0 0 {width} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let start = clock_time(t0, true);
    let more = if left_out > 0 {
        format!("; {left_out} smaller processes not drawn")
    } else {
        String::new()
    };
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        xml(&format!("Memory over time (measured): {title}"))
    );
    let _ = writeln!(
        svg,
        r##"<text x="{LEFT}" y="40" fill="#555">{}</text>"##,
        xml(&format!(
            "{} from {start} UTC over {}; gaps: not listed or n/a{more}",
            super::index::snapshots(n as u64),
            crate::units::duration(t_max)
        ))
    );

    svg
}

/// Axes and grid.
fn draw_axes(svg: &mut String, scale: &Scale, t0: f64) {
    let (t_max, y_top, y_step) = (scale.t_max, scale.y_top, scale.y_step);
    let (x, y) = (|t| scale.x(t), |v| scale.y(v));
    let mut v = 0;
    while v <= y_top {
        let yy = y(v);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + PLOT_W,
            LEFT - 6.0,
            yy + 4.0,
            xml(&axis_bytes(v))
        );
        v += y_step;
    }
    let t_step = time_step(t_max);
    let mut t = 0.0;
    while t <= t_max + 1e-9 {
        let xx = x(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{xx:.1}" y1="{TOP}" x2="{xx:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + PLOT_H,
            TOP + PLOT_H + 18.0,
            clock_time(t0 + t, false)
        );
        t += t_step;
    }
    let _ = writeln!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">time (UTC)</text>"#,
        LEFT + PLOT_W / 2.0,
        TOP + PLOT_H + 40.0
    );
}

/// The lines, then the legend.
fn draw_series(svg: &mut String, series: &[Series], legend: &[String], scale: &Scale) {
    let (x, y) = (|t| scale.x(t), |v| scale.y(v));
    for (i, s) in series.iter().enumerate() {
        let color = colour(i);
        let style = match s.line {
            Line::DeviceTotal => r#" stroke-width="1" stroke-dasharray="2 3""#,
            Line::DeviceUsed => r#" stroke-width="2.5" stroke-dasharray="8 4""#,
            Line::Process => r#" stroke-width="1.5""#,
        };
        let _ = writeln!(
            svg,
            r#"<g fill="none" stroke="{color}"{style}><title>{}</title>"#,
            xml(&s.label)
        );
        for run in runs(&s.points) {
            let pts: Vec<String> = thin(&run, PLOT_W as usize)
                .iter()
                .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
                .collect();
            if pts.len() == 1 {
                let (cx, cy) = pts[0].split_once(',').expect("x,y");
                let _ = writeln!(svg, r#"<circle cx="{cx}" cy="{cy}" r="2" fill="{color}"/>"#);
            } else {
                let _ = writeln!(svg, r#"<polyline points="{}"/>"#, pts.join(" "));
            }
        }
        let _ = writeln!(svg, "</g>");
        let ly = TOP + 8.0 + i as f64 * 18.0;
        if ly < HEIGHT - 10.0 {
            let _ = writeln!(
                svg,
                r#"<line x1="{LEGEND_X}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}"{style}/><text x="{:.1}" y="{:.1}">{}</text>"#,
                LEGEND_X + 24.0,
                LEGEND_X + 30.0,
                ly + 4.0,
                xml(&legend[i])
            );
        }
    }
}

/// The colour of the `i`th series, none shared: the palette, then hues a
/// golden angle apart (each new one far from those just before it), in
/// three lightnesses.
fn colour(i: usize) -> String {
    match PALETTE.get(i) {
        Some(c) => (*c).to_string(),
        None => {
            let k = i - PALETTE.len();
            let hue = (k as f64 * 137.507_764) % 360.0;
            format!("hsl({hue:.1},70%,{}%)", 30 + (k % 3) * 12)
        }
    }
}

/// Contiguous runs of known points.
fn runs(points: &[Option<(f64, u64)>]) -> Vec<Vec<(f64, u64)>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for p in points {
        match p {
            Some(p) => cur.push(*p),
            None if !cur.is_empty() => out.push(std::mem::take(&mut cur)),
            None => {}
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// At most about two points per pixel column: each column keeps its first
/// point, its minimum and its maximum (in time order), so peaks survive.
fn thin(run: &[(f64, u64)], columns: usize) -> Vec<(f64, u64)> {
    if run.len() <= columns * 2 {
        return run.to_vec();
    }
    let (t0, t1) = (run[0].0, run[run.len() - 1].0);
    let span = (t1 - t0).max(1e-9);
    let mut out: Vec<(f64, u64)> = Vec::new();
    let mut i = 0;
    while i < run.len() {
        let col = ((run[i].0 - t0) / span * columns as f64) as usize;
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < run.len() && ((run[j].0 - t0) / span * columns as f64) as usize == col {
            if run[j].1 < run[lo].1 {
                lo = j;
            }
            if run[j].1 > run[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let mut keep = vec![i, lo, hi, j - 1];
        keep.sort_unstable();
        keep.dedup();
        out.extend(keep.into_iter().map(|k| run[k]));
        i = j;
    }
    out
}

/// A power-of-two step that gives 3 to 6 grid lines.
fn byte_step(max: u64) -> u64 {
    let raw = (max / 5).max(1);
    raw.next_power_of_two()
}

/// A grid label: `512 MiB`, `1.5 GiB`, `0`.
fn axis_bytes(v: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if v == 0 {
        return "0".into();
    }
    let mut unit = 0;
    let mut scaled = v as f64;
    while scaled >= 1024.0 && unit < UNITS.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    if scaled.fract() == 0.0 {
        format!("{scaled:.0} {}", UNITS[unit])
    } else {
        let s = format!("{scaled:.2}");
        format!("{} {}", s.trim_end_matches('0').trim_end_matches('.'), UNITS[unit])
    }
}

fn axis_bytes_exact(v: u64) -> String {
    crate::units::bytes(Some(v))
}

/// A time step that gives 4 to 10 labels.
fn time_step(span: f64) -> f64 {
    const STEPS: [f64; 20] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0,
        43200.0, 86400.0, 172800.0, 604800.0,
    ];
    STEPS.iter().copied().find(|s| span / s <= 8.0).unwrap_or(span / 8.0)
}

/// `17:05:00` (or `2026-11-30 17:05:00` with `date`), UTC.
fn clock_time(unix: f64, date: bool) -> String {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp(unix.floor() as i64) else {
        return format!("{unix:.0}");
    };
    let clock = format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second());
    if date {
        format!("{}-{:02}-{:02} {clock}", t.year(), u8::from(t.month()), t.day())
    } else {
        clock
    }
}

fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels_are_binary_and_steps_are_powers_of_two() {
        assert_eq!(axis_bytes(0), "0");
        assert_eq!(axis_bytes(512 << 20), "512 MiB");
        assert_eq!(axis_bytes(3 << 29), "1.5 GiB");
        assert_eq!(byte_step(10 << 30), 2 << 30);
        assert_eq!(byte_step(100 << 20), 32 << 20);
        assert_eq!(time_step(3600.0), 600.0);
        assert_eq!(time_step(5.0), 1.0);
    }

    #[test]
    fn thinning_keeps_the_peak() {
        let run: Vec<(f64, u64)> = (0..10_000)
            .map(|i| (i as f64, if i == 4321 { 999 } else { 1 }))
            .collect();
        let thin = thin(&run, 100);
        assert!(thin.len() <= 400, "{}", thin.len());
        assert!(thin.contains(&(4321.0, 999)));
        assert_eq!(thin.first(), Some(&(0.0, 1)));
        assert_eq!(thin.last(), Some(&(9999.0, 1)));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(xml("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
