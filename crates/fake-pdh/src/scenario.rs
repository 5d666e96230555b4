//! The JSON scenario: which counter sets exist, which counters each has, and
//! every instance's values. Unknown fields are errors, so typos are caught.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Counter sets by their English names (`GPU Process Memory`, ...).
    #[serde(default)]
    pub sets: BTreeMap<String, Set>,
    /// Injected return codes: function name (`PdhCollectQueryData`) → PDH_STATUS.
    #[serde(default)]
    pub errors: BTreeMap<String, u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Set {
    /// The counters this Windows defines in the set: adding another one
    /// fails with PDH_CSTATUS_NO_COUNTER (an old Windows without Local
    /// Usage leaves it out).
    pub counters: Vec<String>,
    /// Instance name (`pid_P_luid_0xH_0xL_phys_N`, with `#N` for a
    /// duplicate) → counter name → value. A counter an instance lacks is
    /// not in that counter's array.
    #[serde(default)]
    pub instances: BTreeMap<String, BTreeMap<String, Value>>,
}

/// A raw counter value.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Fixed(u64),
    /// A cumulative time in 100 ns units (Running Time) that grows by
    /// `busy_percent` of the time since the query was opened, so two
    /// collections give that engine busy figure.
    Busy {
        start: u64,
        busy_percent: u32,
    },
}

impl Value {
    /// The value `elapsed_100ns` after the query was opened.
    pub fn at(self, elapsed_100ns: u64) -> u64 {
        match self {
            Value::Fixed(v) => v,
            Value::Busy { start, busy_percent } => {
                start.saturating_add(elapsed_100ns.saturating_mul(u64::from(busy_percent.min(100))) / 100)
            }
        }
    }
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, String> {
        fake_dll::load_scenario("fake-pdh", path)
    }

    /// The set of this English name, in any case (PDH's names are).
    pub fn set(&self, name: &str) -> Option<(&str, &Set)> {
        self.sets
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(k, v)| (k.as_str(), v))
    }
}

impl Set {
    pub fn counter(&self, name: &str) -> Option<&str> {
        self.counters
            .iter()
            .find(|c| c.eq_ignore_ascii_case(name))
            .map(String::as_str)
    }

    /// Every (instance, value) of one counter, for instances matching
    /// `instance` (None: the `*` wildcard).
    pub fn values<'a>(&'a self, counter: &'a str, instance: Option<&'a str>) -> impl Iterator<Item = (&'a str, Value)> {
        self.instances
            .iter()
            .filter(move |(name, _)| instance.is_none_or(|i| i.eq_ignore_ascii_case(name)))
            .filter_map(move |(name, values)| {
                let v = values.iter().find(|(c, _)| c.eq_ignore_ascii_case(counter))?.1;
                Some((name.as_str(), *v))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_grows_by_its_share_of_the_elapsed_time() {
        let v = Value::Busy {
            start: 1000,
            busy_percent: 40,
        };
        assert_eq!(v.at(0), 1000);
        assert_eq!(v.at(10_000_000), 4_001_000, "40 % of one second");
        let over = Value::Busy {
            start: 0,
            busy_percent: 250,
        };
        assert_eq!(over.at(100), 100, "no engine is busier than 100 %");
        assert_eq!(Value::Fixed(7).at(123), 7);
    }

    #[test]
    fn typos_in_a_scenario_are_errors() {
        let bad = r#"{"sets": {"GPU Engine": {"counter": ["Running Time"]}}}"#;
        assert!(serde_json::from_str::<Scenario>(bad).is_err());
        let good = r#"{"sets": {"GPU Engine": {"counters": ["Running Time"],
            "instances": {"pid_1_luid_0x0_0x1_phys_0_eng_0_engtype_3D": {"Running Time": {"start": 5, "busy_percent": 10}}}}}}"#;
        let s: Scenario = serde_json::from_str(good).unwrap();
        let (name, set) = s.set("gpu engine").unwrap();
        assert_eq!(name, "GPU Engine");
        let counter = set.counter("running time").unwrap();
        let values: Vec<_> = set.values(counter, None).collect();
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].1.at(0), 5);
        assert_eq!(set.values(counter, Some("pid_2_luid_0x0_0x1_phys_0")).count(), 0);
    }
}
