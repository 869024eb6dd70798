//! `timeline.svg`: nemesis intervals on top, then every produce as a dot at (invoke time,
//! latency on a log scale), green when acknowledged, red when failed, and the unavailability
//! threshold; open it in a browser (hover a bar for the fault's name).

use std::fmt::Write;

use crate::history::{Event, Outcome};

const W: f64 = 1400.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 20.0;
const ROW: f64 = 14.0;
const PLOT_H: f64 = 360.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn render(events: &[Event]) -> String {
    let end = events
        .iter()
        .filter_map(|e| match e {
            Event::Produce { t, latency, .. } => Some(t + latency),
            Event::Nemesis { t, .. } => Some(*t),
            _ => None,
        })
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x = |t: u64| LEFT + (t as f64 / end) * (W - LEFT - 10.0);
    // Nemesis intervals, one row each.
    let mut open: Vec<(u64, String)> = Vec::new();
    let mut bars: Vec<(u64, u64, String)> = Vec::new();
    for e in events {
        if let Event::Nemesis { t, phase, fault } = e {
            if phase == "start" {
                open.push((*t, fault.clone()));
            } else if let Some(i) = open.iter().position(|(_, f)| f == fault) {
                let (s, f) = open.remove(i);
                bars.push((s, *t, f));
            }
        }
    }
    bars.extend(open.into_iter().map(|(s, f)| (s, end as u64, f)));
    let rows = 1.0;
    let plot_top = TOP + rows * ROW + 20.0;
    let height = plot_top + PLOT_H + 40.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="monospace" font-size="10">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (s, e, f) in &bars {
        let _ = writeln!(
            svg,
            r##"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{ROW}" fill="#f4a261" opacity="0.8"><title>{}</title></rect><rect x="{:.1}" y="{plot_top}" width="{:.1}" height="{PLOT_H}" fill="#f4a261" opacity="0.12"/>"##,
            x(*s),
            (x(*e) - x(*s)).max(1.0),
            escape(f),
            x(*s),
            (x(*e) - x(*s)).max(1.0),
        );
    }
    let _ = writeln!(svg, r#"<text x="2" y="{}">nemesis</text>"#, TOP + 10.0);
    // Latency axis: 1 ms .. 60 s, log scale.
    let y = |ms: u64| {
        let v = (ms.max(1) as f64).log10().min(4.8) / 4.8;
        plot_top + PLOT_H - v * PLOT_H
    };
    for (ms, label) in [
        (1, "1ms"),
        (10, "10ms"),
        (100, "100ms"),
        (1000, "1s"),
        (10_000, "10s"),
    ] {
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" x2="{W}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="4" y="{:.1}">{label}</text>"##,
            y(ms),
            y(ms),
            y(ms) + 3.0
        );
    }
    // At most ~20,000 acknowledged dots (every k-th); every failure is drawn.
    let oks = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Produce {
                    outcome: Outcome::Ok { .. },
                    ..
                }
            )
        })
        .count();
    let every = (oks / 20_000).max(1);
    let mut nth = 0usize;
    for e in events {
        if let Event::Produce {
            t,
            latency,
            outcome,
            ..
        } = e
        {
            let color = match outcome {
                Outcome::Ok { .. } => {
                    nth += 1;
                    if !nth.is_multiple_of(every) {
                        continue;
                    }
                    "#2a9d8f"
                }
                Outcome::Fail { .. } => "#e63946",
            };
            let _ = writeln!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="1.2" fill="{color}"/>"#,
                x(*t),
                y(*latency)
            );
        }
    }
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="{:.1}">time 0 .. {:.1} s; dots: produce latency (green ok, red failed)</text>"#,
        height - 10.0,
        end / 1000.0
    );
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nemesis_bars_and_operations() {
        let events = vec![
            Event::Nemesis {
                t: 10,
                phase: "start".into(),
                fault: "kill -9 node <1>".into(),
            },
            Event::Produce {
                t: 20,
                latency: 5,
                producer: "p0".into(),
                partition: 0,
                value: "p0-0".into(),
                outcome: Outcome::Ok { offset: 0 },
            },
            Event::Nemesis {
                t: 30,
                phase: "stop".into(),
                fault: "kill -9 node <1>".into(),
            },
        ];
        let svg = render(&events);
        assert!(svg.contains("kill -9 node &lt;1&gt;"));
        assert_eq!(svg.matches("<circle").count(), 1);
    }
}
