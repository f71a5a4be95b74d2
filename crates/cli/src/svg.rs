//! Minimal, dependency-free SVG line charts for experiment results. Output is a pure
//! function of the data, so plots are byte-identical across reruns.

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// (x, y) points in x order.
    pub points: Vec<(f64, f64)>,
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
    let mut t = (lo / step).ceil() * step;
    let mut v = Vec::new();
    while t <= hi + step * 1e-9 {
        v.push(t);
        t += step;
    }
    v
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

/// Renders a line chart. `x_labels`, if given, replaces numeric x tick labels (for
/// categorical axes: x = 0, 1, 2, …).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    x_labels: Option<&[String]>,
) -> String {
    let (w, h) = (720.0, 440.0);
    let (ml, mr, mt, mb) = (80.0, 180.0, 40.0, 60.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .collect();
    let (mut x0, mut x1) = (
        xs.iter().copied().fold(f64::MAX, f64::min),
        xs.iter().copied().fold(f64::MIN, f64::max),
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
    let sx = |x: f64| ml + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| mt + ph - (y - y0) / (y1 - y0) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        ml + pw / 2.0,
        esc(title)
    );
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
    let xticks: Vec<(f64, String)> = match x_labels {
        Some(l) => l
            .iter()
            .enumerate()
            .map(|(i, s)| (i as f64, s.clone()))
            .collect(),
        None => {
            let mut v: Vec<f64> = xs.clone();
            v.sort_by(|a, b| a.total_cmp(b));
            v.dedup();
            if v.len() > 10 {
                v = nice_ticks(x0, x1, 8);
            }
            v.into_iter().map(|x| (x, fmt_num(x))).collect()
        }
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
    let _ = writeln!(
        s,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        ml + pw / 2.0,
        h - 15.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">{}</text>"#,
        mt + ph / 2.0,
        mt + ph / 2.0,
        esc(y_label)
    );
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
        let ly = mt + 10.0 + i as f64 * 18.0;
        let lx = ml + pw + 12.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"/>"#,
            lx + 20.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}">{}</text>"#,
            lx + 26.0,
            ly + 4.0,
            esc(&ser.label)
        );
    }
    s += "</svg>\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_and_ticks() {
        let s = line_chart(
            "t <1>",
            "x",
            "y",
            &[Series {
                label: "a".into(),
                points: vec![(48.0, 0.5), (96.0, 0.25), (768.0, 0.1)],
            }],
            None,
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("t &lt;1&gt;"));
        assert_eq!(s.matches("<circle").count(), 3);
        assert!(s.contains(">768<"));
        assert_eq!(
            nice_ticks(0.0, 1.0, 5),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
    }
}
