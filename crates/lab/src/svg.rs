//! Minimal, dependency-free SVG line charts for experiment results. Output is a pure
//! function of the data, so plots are byte-identical across reruns.

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (x, y) points in x order.
    pub points: Vec<(f64, f64)>,
    /// Half-widths of the points' intervals, drawn as error bars (empty, or a
    /// non-finite or zero entry: none).
    pub errors: Vec<f64>,
}

impl Series {
    /// The half-width of point `i`'s interval (0 where none is drawn).
    fn err(&self, i: usize) -> f64 {
        self.errors
            .get(i)
            .copied()
            .filter(|e| e.is_finite())
            .unwrap_or(0.0)
    }

    /// The lowest and highest y each point reaches with its error bar.
    fn extent(&self) -> impl Iterator<Item = f64> + '_ {
        self.points
            .iter()
            .enumerate()
            .flat_map(move |(i, p)| [p.1 - self.err(i), p.1 + self.err(i)])
    }

    /// A series from `(x, (mean, interval half-width))` pairs, as statistics over seeds
    /// give them (one seed's NaN interval is not drawn).
    pub fn with_intervals(label: String, xs: &[(f64, (f64, f64))]) -> Series {
        Series {
            label,
            points: xs.iter().map(|&(x, (mean, _))| (x, mean)).collect(),
            errors: xs.iter().map(|&(_, (_, h))| h).collect(),
        }
    }
}

/// How a [`line_chart`] maps and labels x values.
#[derive(Debug, Clone, Copy)]
pub enum XAxis<'a> {
    /// Categories at x = 0, 1, 2, …, labelled in order.
    Categories(&'a [String]),
    /// Sizes in KiB on a log2 scale, ticked at the data's sizes (or at powers of two
    /// when there are many) and labelled in KB or MB.
    Kib,
    /// Plain numbers on a linear scale, ticked at round values.
    Linear,
}

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(hi > lo) {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    // each tick a whole multiple of the step (no drift from adding steps), and a zero
    // tick positive (ceil(-0.5) is -0, which would be labelled "-0")
    let first = (lo / step).ceil();
    (0..)
        .map(|i| (first + i as f64) * step + 0.0)
        .take_while(|t| *t <= hi + step * 1e-9)
        .collect()
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{v:.2e}")
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The start of an SVG document of `w` × `h` with a white background and `title`
/// centred at (x, y) in the given font size.
fn open_svg((w, h): (f64, f64), font: u32, (x, y, size): (f64, f64, u32), title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="{font}">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{x}" y="{y}" font-size="{size}" text-anchor="middle">{}</text>"#,
        esc(title)
    );
    s
}

/// The plot area's frame and the x-axis label centred below it at height `y`.
fn frame_and_x_label(s: &mut String, (ml, mt, pw, ph): (f64, f64, f64, f64), y: f64, label: &str) {
    let _ = writeln!(
        s,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{y:.1}" text-anchor="middle">{}</text>"#,
        ml + pw / 2.0,
        esc(label)
    );
}

/// A size in KiB as an axis label: `64 B`, `48 KB`, `1.5 MB`, `16 MB`.
fn kib_label(kib: f64) -> String {
    if kib >= 1024.0 {
        format!("{} MB", fmt_num(kib / 1024.0))
    } else if kib >= 1.0 {
        format!("{} KB", fmt_num(kib))
    } else {
        format!("{} B", fmt_num(kib * 1024.0))
    }
}

/// Horizontal grid lines and labels at nice ticks of [`y0`, `y1`], mapped by `sy`, across
/// a plot `pw` wide from `ml`.
fn y_grid(s: &mut String, (ml, pw): (f64, f64), (y0, y1): (f64, f64), sy: &dyn Fn(f64) -> f64) {
    for t in nice_ticks(y0, y1, 6) {
        let y = sy(t);
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            ml + pw
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            ml - 6.0,
            y + 4.0,
            fmt_num(t)
        );
    }
}

/// A vertical bar at `x` from screen height `lo` to `hi` with caps `half` wide each
/// side, drawn in `color` `width` pixels wide: an error bar or a published range.
fn capped_bar(
    s: &mut String,
    (x, half): (f64, f64),
    (lo, hi): (f64, f64),
    (color, width): (&str, u32),
) {
    let _ = writeln!(
        s,
        r#"<path d="M{:.1},{hi:.1}H{:.1}M{x:.1},{hi:.1}V{lo:.1}M{:.1},{lo:.1}H{:.1}" stroke="{color}" stroke-width="{width}" fill="none"/>"#,
        x - half,
        x + half,
        x - half,
        x + half
    );
}

/// A legend entry's label beside its symbol at (`lx`, `ly`).
fn legend_text(s: &mut String, (lx, ly): (f64, f64), label: &str) {
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}">{}</text>"#,
        lx + 26.0,
        ly + 4.0,
        esc(label)
    );
}

/// The y axis's label, rotated, centred at height `y`.
fn y_label_text(s: &mut String, y: f64, label: &str) {
    let _ = writeln!(
        s,
        r#"<text x="18" y="{y:.1}" text-anchor="middle" transform="rotate(-90 18 {y:.1})">{}</text>"#,
        esc(label)
    );
}

/// Renders a line chart with x values mapped and labelled as `x_axis` says, error bars
/// where a series has them and, if given, a shaded horizontal band `(lo, hi, label)`
/// across the plot (a published range, marked in the legend).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_axis: XAxis<'_>,
    band: Option<(f64, f64, &str)>,
) -> String {
    let (w, h) = (720.0, 440.0);
    let (ml, mr, mt, mb) = (80.0, 180.0, 40.0, 60.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    // where an x value sits on the axis
    let fx = |x: f64| match x_axis {
        XAxis::Kib => x.max(f64::MIN_POSITIVE).log2(),
        XAxis::Categories(_) | XAxis::Linear => x,
    };
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(Series::extent)
        .chain(band.iter().flat_map(|b| [b.0, b.1]))
        .filter(|y| y.is_finite())
        .collect();
    let (mut x0, mut x1) = (
        xs.iter().copied().map(fx).fold(f64::MAX, f64::min),
        xs.iter().copied().map(fx).fold(f64::MIN, f64::max),
    );
    let (mut y0, mut y1) = (
        ys.iter().copied().fold(f64::MAX, f64::min).min(0.0),
        ys.iter().copied().fold(f64::MIN, f64::max),
    );
    if xs.is_empty() {
        (x0, x1) = (0.0, 1.0);
    }
    if ys.is_empty() {
        (y0, y1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x0 -= 0.5;
        x1 += 0.5;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    y1 += (y1 - y0) * 0.05;
    let sx = |x: f64| ml + (fx(x) - x0) / (x1 - x0) * pw;
    let sy = |y: f64| mt + ph - (y - y0) / (y1 - y0) * ph;
    let mut s = open_svg((w, h), 12, (ml + pw / 2.0, 22.0, 15), title);
    y_grid(&mut s, (ml, pw), (y0, y1), &sy);
    let mut data_x: Vec<f64> = xs.clone();
    data_x.sort_by(|a, b| a.total_cmp(b));
    data_x.dedup();
    let xticks: Vec<(f64, String)> = match x_axis {
        XAxis::Categories(l) => l
            .iter()
            .enumerate()
            .map(|(i, s)| (i as f64, s.clone()))
            .collect(),
        XAxis::Kib => {
            if data_x.len() > 10 {
                data_x = (x0.ceil() as i32..=x1.floor() as i32)
                    .map(|e| 2f64.powi(e))
                    .collect();
                if data_x.len() > 12 {
                    let step = data_x.len().div_ceil(12);
                    data_x = data_x.into_iter().step_by(step).collect();
                }
            }
            data_x.into_iter().map(|x| (x, kib_label(x))).collect()
        }
        XAxis::Linear => nice_ticks(x0, x1, 6)
            .into_iter()
            .map(|x| (x, crate::stats::plain(x)))
            .collect(),
    };
    for (x, label) in xticks {
        let px = sx(x);
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" y1="{}" x2="{px:.1}" y2="{:.1}" stroke="#333"/>"##,
            mt + ph,
            mt + ph + 5.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            mt + ph + 18.0,
            esc(&label)
        );
    }
    frame_and_x_label(&mut s, (ml, mt, pw, ph), h - 15.0, x_label);
    y_label_text(&mut s, mt + ph / 2.0, y_label);
    if let Some((lo, hi, label)) = band {
        let (top, bottom) = (sy(lo.max(hi)), sy(lo.min(hi)));
        let _ = writeln!(
            s,
            r##"<rect x="{ml}" y="{top:.1}" width="{pw:.1}" height="{:.1}" fill="#999" fill-opacity="0.2"/>"##,
            bottom - top
        );
        let ly = mt + 10.0 + series.len() as f64 * 18.0;
        let lx = ml + pw + 12.0;
        let _ = writeln!(
            s,
            r##"<rect x="{lx}" y="{:.1}" width="20" height="10" fill="#999" fill-opacity="0.4"/>"##,
            ly - 5.0
        );
        legend_text(&mut s, (lx, ly), label);
    }
    for (i, ser) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = ser
            .points
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        for p in &pts {
            let (x, y) = p.split_once(',').expect("formatted pair");
            let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{c}"/>"#);
        }
        for (i, &(x, y)) in ser.points.iter().enumerate() {
            let e = ser.err(i);
            if e <= 0.0 || !y.is_finite() {
                continue;
            }
            capped_bar(&mut s, (sx(x), 4.0), (sy(y - e), sy(y + e)), (c, 1));
        }
        let ly = mt + 10.0 + i as f64 * 18.0;
        let lx = ml + pw + 12.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"/>"#,
            lx + 20.0
        );
        legend_text(&mut s, (lx, ly), &ser.label);
    }
    s += "</svg>\n";
    s
}

/// Published values marked on a [`bar_chart`]: a legend label and (category index,
/// low, high) points, drawn over the bars of their category as a black diamond (a
/// single value) or a thick black bar from low to high (a range).
pub struct Marks {
    /// Legend label.
    pub label: String,
    /// (category index, low, high).
    pub points: Vec<(usize, f64, f64)>,
}

/// Renders a grouped bar chart: one group per category (labelled in order), one bar
/// per series (a series' point x is the category index), error bars where a series
/// has them, and `marks` (a paper's values) as diamonds over their category's group.
pub fn bar_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    categories: &[String],
    series: &[Series],
    marks: Option<&Marks>,
) -> String {
    let (w, h) = (760.0, 440.0);
    let (ml, mr, mt, mb) = (80.0, 190.0, 40.0, 60.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let ys: Vec<f64> = series
        .iter()
        .flat_map(Series::extent)
        .chain(
            marks
                .iter()
                .flat_map(|m| m.points.iter().flat_map(|p| [p.1, p.2])),
        )
        .filter(|y| y.is_finite())
        .collect();
    let mut y0 = ys.iter().copied().fold(0.0, f64::min);
    let mut y1 = ys.iter().copied().fold(0.0, f64::max);
    if y1 <= y0 {
        (y0, y1) = (y0.min(0.0), y0.min(0.0) + 1.0);
    }
    let pad = (y1 - y0) * 0.05;
    y1 += pad;
    if y0 < 0.0 {
        y0 -= pad;
    }
    let n = categories.len().max(1) as f64;
    let group = pw / n;
    let bar = group * 0.8 / series.len().max(1) as f64;
    let sy = |y: f64| mt + ph - (y - y0) / (y1 - y0) * ph;
    let mut s = open_svg((w, h), 12, (ml + pw / 2.0, 22.0, 15), title);
    y_grid(&mut s, (ml, pw), (y0, y1), &sy);
    for (i, label) in categories.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            ml + group * (i as f64 + 0.5),
            mt + ph + 18.0,
            esc(label)
        );
    }
    frame_and_x_label(&mut s, (ml, mt, pw, ph), h - 15.0, x_label);
    y_label_text(&mut s, mt + ph / 2.0, y_label);
    let zero = sy(0.0);
    for (k, ser) in series.iter().enumerate() {
        let c = COLORS[k % COLORS.len()];
        for (i, &(x, y)) in ser.points.iter().enumerate() {
            if !y.is_finite() {
                continue;
            }
            let left = ml + group * (x + 0.1) + bar * k as f64;
            let (top, bottom) = (sy(y).min(zero), sy(y).max(zero));
            let _ = writeln!(
                s,
                r#"<rect x="{left:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{c}"/>"#,
                bar * 0.9,
                (bottom - top).max(0.5)
            );
            let e = ser.err(i);
            if e > 0.0 {
                capped_bar(
                    &mut s,
                    (left + bar * 0.45, 3.0),
                    (sy(y - e), sy(y + e)),
                    ("#000", 1),
                );
            }
        }
        let ly = mt + 10.0 + k as f64 * 18.0;
        let lx = ml + pw + 12.0;
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{:.1}" width="20" height="10" fill="{c}"/>"#,
            ly - 5.0
        );
        legend_text(&mut s, (lx, ly), &ser.label);
    }
    if let Some(m) = marks {
        let diamond = |x: f64, y: f64| {
            format!(
                r##"<path d="M{x:.1},{:.1}L{:.1},{y:.1}L{x:.1},{:.1}L{:.1},{y:.1}Z" fill="#000"/>"##,
                y - 5.0,
                x + 5.0,
                y + 5.0,
                x - 5.0
            )
        };
        for &(i, lo, hi) in &m.points {
            let x = ml + group * (i as f64 + 0.5);
            if !(lo.is_finite() && hi.is_finite()) {
                continue;
            }
            if lo == hi {
                let _ = writeln!(s, "{}", diamond(x, sy(lo)));
            } else {
                capped_bar(&mut s, (x, 6.0), (sy(lo), sy(hi)), ("#000", 3));
            }
        }
        let ly = mt + 10.0 + series.len() as f64 * 18.0;
        let lx = ml + pw + 12.0;
        let _ = writeln!(s, "{}", diamond(lx + 10.0, ly));
        legend_text(&mut s, (lx, ly), &m.label);
    }
    s += "</svg>\n";
    s
}

/// One row of a [`range_chart`]: a label and the values at the low and high end of a
/// parameter's range (NaN where missing).
pub struct RangeRow {
    /// Row label (the parameter).
    pub label: String,
    /// Value with the parameter at the low end.
    pub low: f64,
    /// Value with the parameter at the high end.
    pub high: f64,
}

/// Renders a sensitivity ("tornado") chart: one horizontal row per parameter, a bar
/// from its low-end to its high-end value (markers coloured by end), a vertical line at
/// the unperturbed value `base` and, if given, a shaded band `(lo, hi, label)` for a
/// published range.
pub fn range_chart(
    title: &str,
    x_label: &str,
    rows: &[RangeRow],
    base: f64,
    band: Option<(f64, f64, &str)>,
) -> String {
    let row_h = 16.0;
    let (ml, mr, mt, mb) = (250.0, 30.0, 60.0, 50.0);
    let w = 760.0;
    let ph = row_h * rows.len().max(1) as f64;
    let h = mt + ph + mb;
    let pw = w - ml - mr;
    let mut vals: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.low, r.high])
        .chain([base])
        .filter(|v| v.is_finite())
        .collect();
    if let Some((lo, hi, _)) = band {
        vals.extend([lo, hi]);
    }
    let mut x0 = vals.iter().copied().fold(f64::MAX, f64::min).min(0.0);
    let mut x1 = vals.iter().copied().fold(f64::MIN, f64::max).max(0.0);
    if vals.is_empty() || x1 <= x0 {
        (x0, x1) = (x0.min(0.0) - 1.0, x1.max(0.0) + 1.0);
    }
    let pad = (x1 - x0) * 0.04;
    (x0, x1) = (x0 - pad, x1 + pad);
    let sx = |x: f64| ml + (x - x0) / (x1 - x0) * pw;
    let mut s = open_svg((w, h), 11, (w / 2.0, 20.0, 14), title);
    if let Some((lo, hi, label)) = band {
        let (a, b) = (sx(lo.min(hi)), sx(lo.max(hi)));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{mt}" width="{:.1}" height="{ph}" fill="#fde0c5"/>"##,
            b - a
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (a + b) / 2.0,
            mt - 6.0,
            esc(label)
        );
    }
    for t in nice_ticks(x0, x1, 8) {
        let x = sx(t);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{mt}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            mt + ph
        );
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            mt + ph + 16.0,
            fmt_num(t)
        );
    }
    let (lc, hc) = (COLORS[0], COLORS[1]);
    for (i, r) in rows.iter().enumerate() {
        let y = mt + row_h * (i as f64 + 0.5);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            ml - 6.0,
            y + 4.0,
            esc(&r.label)
        );
        if r.low.is_finite() && r.high.is_finite() {
            let _ = writeln!(
                s,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#999" stroke-width="5"/>"##,
                sx(r.low),
                sx(r.high)
            );
        }
        for (v, c) in [(r.low, lc), (r.high, hc)] {
            if v.is_finite() {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{y:.1}" r="4" fill="{c}"/>"#,
                    sx(v)
                );
            }
        }
    }
    let bx = sx(base);
    let _ = writeln!(
        s,
        r##"<line x1="{bx:.1}" y1="{mt}" x2="{bx:.1}" y2="{:.1}" stroke="#333" stroke-dasharray="4,3"/>"##,
        mt + ph
    );
    frame_and_x_label(&mut s, (ml, mt, pw, ph), h - 12.0, x_label);
    // legend
    let ly = 40.0;
    for (i, (c, label)) in [
        (lc, "parameter at the low end"),
        (hc, "parameter at the high end"),
    ]
    .iter()
    .enumerate()
    {
        let lx = ml + i as f64 * 200.0;
        let _ = writeln!(s, r#"<circle cx="{lx}" cy="{ly}" r="4" fill="{c}"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{label}</text>"#,
            lx + 8.0,
            ly + 4.0
        );
    }
    let lx = ml + 400.0;
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="#333" stroke-dasharray="4,3"/>"##,
        lx + 20.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}">unperturbed</text>"#,
        lx + 26.0,
        ly + 4.0
    );
    s += "</svg>\n";
    s
}

/// One row of a [`heatmap`].
pub struct HeatRow {
    /// Row label (left of the row).
    pub label: String,
    /// Cell values, one per column (0 is white).
    pub cells: Vec<f64>,
    /// A category drawn as a coloured bar left of the row (e.g. the ground truth), if
    /// any.
    pub category: Option<usize>,
}

/// A heat map: one row per item, one column per position, grey level = value (white 0,
/// black at `max`), a coloured bar per row for its category (legend `categories`), and
/// a ruled line before each row index in `breaks` (e.g. where a cluster begins).
pub fn heatmap(
    title: &str,
    x_label: &str,
    y_label: &str,
    rows: &[HeatRow],
    max: f64,
    categories: &[String],
    breaks: &[usize],
) -> String {
    let cols = rows.iter().map(|r| r.cells.len()).max().unwrap_or(0).max(1);
    let cell_h = (360.0 / rows.len().max(1) as f64).clamp(4.0, 18.0);
    let cell_w = (640.0 / cols as f64).clamp(1.0, 12.0);
    let (ml, mr, mt, mb) = (110.0, 190.0, 40.0, 60.0);
    let pw = cell_w * cols as f64;
    let ph = cell_h * rows.len() as f64;
    let (w, h) = (ml + pw + mr, mt + ph + mb);
    let mut s = open_svg((w, h), 11, (w / 2.0, 22.0, 14), title);
    let max = if max > 0.0 { max } else { 1.0 };
    for (i, r) in rows.iter().enumerate() {
        let y = mt + i as f64 * cell_h;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="{}">{}</text>"#,
            ml - 14.0,
            y + cell_h * 0.8,
            (cell_h * 0.8).clamp(4.0, 11.0) as u32,
            esc(&r.label)
        );
        if let Some(c) = r.category {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{y:.1}" width="8" height="{cell_h:.1}" fill="{}"/>"#,
                ml - 10.0,
                COLORS[c % COLORS.len()]
            );
        }
        for (j, &v) in r.cells.iter().enumerate() {
            if v <= 0.0 {
                continue;
            }
            let g = (255.0 * (1.0 - (v / max).clamp(0.0, 1.0))).round() as u32;
            let _ = writeln!(
                s,
                r##"<rect x="{:.2}" y="{y:.1}" width="{cell_w:.2}" height="{cell_h:.1}" fill="#{g:02x}{g:02x}{g:02x}" stroke="none"/>"##,
                ml + j as f64 * cell_w
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<rect x="{ml}" y="{mt}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="black"/>"#
    );
    for &b in breaks {
        let y = mt + b as f64 * cell_h;
        let _ = writeln!(
            s,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#d62728" stroke-width="1.5"/>"##,
            ml - 12.0,
            ml + pw
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        ml + pw / 2.0,
        mt + ph + 36.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">{}</text>"#,
        mt + ph / 2.0,
        mt + ph / 2.0,
        esc(y_label)
    );
    // legend: the categories, then the grey scale
    let lx = ml + pw + 20.0;
    for (i, c) in categories.iter().enumerate() {
        let y = mt + 10.0 + i as f64 * 18.0;
        let _ = writeln!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            y - 10.0,
            COLORS[i % COLORS.len()],
            lx + 18.0,
            y,
            esc(c)
        );
    }
    let ly = mt + 20.0 + categories.len() as f64 * 18.0;
    for (k, frac) in [0.0f64, 0.25, 0.5, 0.75, 1.0].iter().enumerate() {
        let g = (255.0 * (1.0 - frac)).round() as u32;
        let y = ly + k as f64 * 16.0;
        let _ = writeln!(
            s,
            r##"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="#{g:02x}{g:02x}{g:02x}" stroke="black" stroke-width="0.5"/><text x="{:.1}" y="{y:.1}">{}</text>"##,
            y - 10.0,
            lx + 18.0,
            fmt_num(frac * max)
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#d62728" stroke-width="1.5"/><text x="{:.1}" y="{:.1}">cluster boundary</text>"##,
        ly + 5.0 * 16.0 - 4.0,
        lx + 12.0,
        ly + 5.0 * 16.0 - 4.0,
        lx + 18.0,
        ly + 5.0 * 16.0
    );
    s.push_str("</svg>\n");
    s
}

/// The line of a report that names its plots: "Plots: `a.svg`, `b.svg`." and a newline.
pub fn plots_line<S: AsRef<str>>(files: &[S]) -> String {
    let names: Vec<String> = files.iter().map(|f| format!("`{}`", f.as_ref())).collect();
    format!("Plots: {}.\n", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_chart_draws_one_row_per_parameter() {
        let rows = vec![
            RangeRow {
                label: "a <size>".into(),
                low: -3.0,
                high: 2.0,
            },
            RangeRow {
                label: "b".into(),
                low: f64::NAN,
                high: 1.0,
            },
        ];
        let s = range_chart("t", "Δ (%)", &rows, -1.0, Some((-46.0, -15.0, "paper")));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("a &lt;size&gt;"));
        // three finite markers plus the two legend markers
        assert_eq!(s.matches("<circle").count(), 5);
        assert!(s.contains(">paper<"));
        assert!(s.contains(">-40<"), "the band is inside the axis");
    }

    #[test]
    fn renders_series_and_ticks() {
        let s = line_chart(
            "t <1>",
            "x",
            "y",
            &[Series {
                label: "a".into(),
                points: vec![(0.0, 0.5), (1.0, 0.25), (2.0, 0.1)],
                errors: vec![0.05, f64::NAN, 0.02],
            }],
            XAxis::Categories(&["x".into(), "y".into(), "z".into()]),
            None,
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("t &lt;1&gt;"));
        assert_eq!(s.matches("<circle").count(), 3);
        assert!(s.contains(">z<"));
        assert_eq!(s.matches("<path").count(), 2, "two error bars");
        // cache sizes on a log axis: 48 and 96 KB as far apart as 768 KB and 1.5 MB
        let k = line_chart(
            "t",
            "size",
            "y",
            &[Series {
                label: "a".into(),
                points: vec![(48.0, 0.5), (96.0, 0.3), (768.0, 0.1), (1536.0, 0.05)],
                errors: Vec::new(),
            }],
            XAxis::Kib,
            Some((-0.4, -0.2, "paper")),
        );
        for l in [">48 KB<", ">96 KB<", ">768 KB<", ">1.5 MB<"] {
            assert!(k.contains(l), "{l}");
        }
        // the published band is drawn, in the legend, and inside the y axis
        assert!(k.contains(">paper<") && k.matches("fill=\"#999\"").count() == 2);
        assert!(k.contains(">-0.4<"), "the axis reaches the band");
        let cx: Vec<f64> = k
            .match_indices("<circle cx=\"")
            .map(|(i, m)| {
                let rest = &k[i + m.len()..];
                rest[..rest.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert!(((cx[1] - cx[0]) - (cx[3] - cx[2])).abs() < 0.2, "{cx:?}");
        assert_eq!(
            nice_ticks(0.0, 1.0, 5),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        // an axis from just below zero (its first tick ceil(-0.7) · 1) labels zero "0",
        // not "-0"
        let labels: Vec<String> = nice_ticks(-0.7, 2.4, 6).into_iter().map(fmt_num).collect();
        assert_eq!(labels, ["0", "1", "2"]);
    }

    #[test]
    fn heatmap_draws_every_non_zero_cell_the_rows_bars_and_breaks() {
        let rows: Vec<HeatRow> = (0..4)
            .map(|t| HeatRow {
                label: format!("thread {t}"),
                cells: vec![
                    if t < 2 { 255.0 } else { 0.0 },
                    0.0,
                    if t >= 2 { 100.0 } else { 0.0 },
                ],
                category: Some(t / 2),
            })
            .collect();
        let cats = vec!["group 0".to_string(), "group 1".to_string()];
        let svg = heatmap("t", "slot", "thread", &rows, 255.0, &cats, &[2]);
        // 4 non-zero cells: two black, two grey
        assert_eq!(
            svg.matches("fill=\"#000000\"").count() - 1,
            2,
            "legend adds one black"
        );
        assert_eq!(svg.matches("fill=\"#9b9b9b\"").count(), 2);
        for t in 0..4 {
            assert!(svg.contains(&format!(">thread {t}<")));
        }
        assert!(svg.contains(">group 1<") && svg.contains(">cluster boundary<"));
        // one cluster rule plus the legend's
        assert_eq!(svg.matches("stroke=\"#d62728\"").count(), 2);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }
}
