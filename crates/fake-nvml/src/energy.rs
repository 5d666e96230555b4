//! nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver
//! loaded (nvml.h: "Retrieves total energy consumption for this GPU in
//! millijoules (mJ) since the driver was last reloaded"), advancing with
//! the wall clock at the scenario's power, and starting again from 0 at a
//! driver reload. Stateless: the value is a function of the time, so every
//! process reading the scenario sees the same counter.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Energy {
    /// The counter at `at_unix_ms`, in mJ.
    #[serde(default)]
    pub start_mj: u64,
    /// When the counter read `start_mj` (Unix ms; 0 by default).
    #[serde(default)]
    pub at_unix_ms: u64,
    /// The draw the counter advances with, in mW.
    pub power_mw: u64,
    /// A driver reload at this Unix ms: from then the counter counts from 0.
    pub reset_at_unix_ms: Option<u64>,
}

impl Energy {
    /// The counter at `now_ms` (Unix ms): mW × ms / 1000 = mJ.
    pub fn counter_mj(&self, now_ms: u64) -> u64 {
        let advanced = |from: u64| self.power_mw.saturating_mul(now_ms.saturating_sub(from)) / 1000;
        match self.reset_at_unix_ms {
            Some(reset) if now_ms >= reset => advanced(reset),
            _ => self.start_mj.saturating_add(advanced(self.at_unix_ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_advances_at_the_power_and_restarts_at_a_reload() {
        let e = Energy {
            start_mj: 5_000,
            at_unix_ms: 1_000,
            power_mw: 200_000,
            reset_at_unix_ms: Some(11_000),
        };
        assert_eq!(e.counter_mj(1_000), 5_000);
        // 200 W for 2.5 s = 500 J.
        assert_eq!(e.counter_mj(3_500), 505_000);
        assert_eq!(e.counter_mj(10_999), 5_000 + 1_999_800);
        assert_eq!(e.counter_mj(11_000), 0);
        assert_eq!(e.counter_mj(12_000), 200_000);
    }
}
