//! The health mark on a GPU's line: `ok`, `throttled: power cap 38%`,
//! `hot: 86 °C, slowdown at 87 °C`,
//! `errors: XID 79 (...)`, `LOST since ...`, from `snapshot::health`'s
//! `Mark`. None where the source reads no health (nothing is claimed).

use super::theme::Theme;
use crate::snapshot::health::Mark;
use crate::snapshot::Device;
use crate::view::safe_text::escape;
use ratatui::text::Span;

pub(super) fn mark(d: &Device, theme: Theme) -> Option<Span<'static>> {
    let health = d.health.as_ref()?;
    Some(match health.mark(d.temperature_c) {
        Mark::Ok => Span::styled("  ok", theme.dim()),
        Mark::Hot(hot) => Span::styled(theme.text(format!("  ! hot: {hot}")), theme.warn()),
        Mark::Throttled(reasons) => {
            Span::styled(escape(format!("  ! throttled: {}", reasons.join(", "))), theme.warn())
        }
        Mark::Errors(errors) => Span::styled(escape(format!("  ! errors: {}", errors.join(", "))), theme.warn()),
        Mark::Lost => Span::styled(
            escape(format!(
                "  ! LOST since {}",
                health.lost_since.as_deref().unwrap_or("?")
            )),
            theme.warn(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::super::tests::{app_with, screen};
    use crate::snapshot::health::{reason_names, Health, TemperatureLimits, Violation};

    #[test]
    fn a_power_capped_gpu_says_so_with_its_share_and_a_healthy_one_says_ok() {
        let mut snap = fixture::desktop();
        let plain = screen(&mut app_with(snap.clone()), 160, 40);
        assert!(
            !plain.contains("throttled") && !plain.contains("  ok"),
            "no health read, none claimed:\n{plain}"
        );
        snap.devices[0].health = Some(Health {
            throttle_reasons: Some(reason_names(0x4)),
            violations: vec![Violation {
                policy: "power".into(),
                seconds: 3.0,
                share: Some(0.38),
            }],
            ..Health::default()
        });
        let shown = screen(&mut app_with(snap.clone()), 160, 40);
        assert!(shown.contains("! throttled: power cap 38%"), "{shown}");
        snap.devices[0].health = Some(Health {
            lost_since: Some("2026-12-02T04:00:00Z".into()),
            ..Health::default()
        });
        let lost = screen(&mut app_with(snap.clone()), 160, 40);
        assert!(lost.contains("! LOST since 2026-12-02T04:00:00Z"), "{lost}");
        snap.devices[0].health = Some(Health::default());
        let ok = screen(&mut app_with(snap.clone()), 160, 40);
        assert!(ok.contains("  ok"), "{ok}");

        // Near its slowdown temperature: hot, in ASCII under --ascii.
        snap.devices[0].temperature_c = Some(84);
        snap.devices[0].health = Some(Health {
            temperature_limits: Some(TemperatureLimits {
                slowdown_c: Some(88),
                ..TemperatureLimits::default()
            }),
            ..Health::default()
        });
        let hot = screen(&mut app_with(snap.clone()), 160, 40);
        assert!(hot.contains("! hot: 84 °C, slowdown at 88 °C"), "{hot}");
        let mut app = app_with(snap);
        app.ascii = true;
        let ascii = screen(&mut app, 160, 40);
        assert!(ascii.contains("! hot: 84 C, slowdown at 88 C"), "{ascii}");
    }
}
