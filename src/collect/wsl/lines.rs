//! The bridge's line format: what the Windows side sends, one sample at a
//! time, read by [`Parser`]. Pure, below both the bridge that feeds it and
//! the source that pairs what it reads.

use crate::collect::wddm::{self, Adapter, Luid, Reading};
use std::collections::BTreeMap;

/// The first line of every stream: the format's version.
pub const HELLO: &str = "gputaskman-bridge 1";
/// Bad lines kept per sample, word for word; the rest are counted.
pub(super) const MAX_ERRORS_KEPT: usize = 5;
/// Longest process name kept (Windows allows 260 characters in a path).
const MAX_NAME: usize = 128;

/// One sample the Windows side sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BridgeSample {
    pub reading: Reading,
    /// Windows process names (Get-Process's, without `.exe`) by PID.
    pub names: BTreeMap<u32, String>,
    /// Where each adapter sits on the PCI bus, to match NVML's devices.
    pub adapters: Vec<Adapter>,
    /// What the Windows side had to say (a counter set missing, ...).
    pub notes: Vec<String>,
    /// Lines that could not be read, and how many more there were.
    pub errors: Vec<String>,
}

/// What one line of the stream meant.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Nothing to act on yet (a line inside a sample).
    None,
    /// A sample ended.
    Sample(Box<BridgeSample>),
    /// The Windows side reports a failure (`error ...`), or the stream is not
    /// what this version speaks.
    Error(String),
}

/// Reads the bridge's line format:
///
/// ```text
/// gputaskman-bridge 1
/// begin <unix ms when the counters were collected>
/// <counter path>\t<value>          one per counter (see wddm::parse_line)
/// proc <windows pid> <process name>
/// adapter <luid high> <luid low> <pci bus> <device> <function>
/// note <text>
/// end
/// error <text>                     anywhere: what failed on the Windows side
/// ```
#[derive(Debug, Default)]
pub struct Parser {
    hello: bool,
    current: Option<BridgeSample>,
    errors_dropped: usize,
    /// Inside a sample whose `begin` was bad: its lines are skipped.
    skipping: bool,
}

impl Parser {
    pub fn line(&mut self, line: &str) -> Event {
        let line = line.trim_end_matches(['\r', '\n']);
        if !self.hello {
            if line == HELLO {
                self.hello = true;
                return Event::None;
            }
            if line.trim().is_empty() {
                return Event::None;
            }
            return Event::Error(format!(
                "the bridge said {:?} where {HELLO:?} was expected",
                wddm::clip(line)
            ));
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "begin" => {
                self.errors_dropped = 0;
                let cut_short = self.current.take().is_some();
                // Without its time a sample cannot be measured against the
                // next (a 0 would make a 56-year window): dropped.
                let Some(at_ms) = rest.trim().parse::<u64>().ok().filter(|&t| t > 0) else {
                    self.skipping = true;
                    return Event::Error(format!("a sample with a bad time {:?}: dropped", wddm::clip(rest)));
                };
                self.skipping = false;
                self.current = Some(BridgeSample {
                    reading: Reading::new(at_ms),
                    ..BridgeSample::default()
                });
                return match cut_short {
                    true => Event::Error("a sample ended without `end`: dropped".into()),
                    false => Event::None,
                };
            }
            "error" => return Event::Error(format!("Windows side: {}", wddm::clip(rest))),
            _ => {}
        }
        let Some(sample) = self.current.as_mut() else {
            if self.skipping {
                self.skipping = word != "end";
                return Event::None;
            }
            return match line.trim().is_empty() {
                true => Event::None,
                false => Event::Error(format!("a line outside a sample: {:?}", wddm::clip(line))),
            };
        };
        let result = match word {
            "end" => {
                let mut done = self.current.take().expect("checked above");
                if self.errors_dropped > 0 {
                    done.errors.push(format!("and {} more bad lines", self.errors_dropped));
                }
                return Event::Sample(Box::new(done));
            }
            "proc" => parse_proc(rest).map(|(pid, name)| {
                sample.names.insert(pid, name);
            }),
            "adapter" => parse_adapter(rest).map(|a| sample.adapters.push(a)),
            "note" => {
                if sample.notes.len() < MAX_ERRORS_KEPT {
                    sample.notes.push(wddm::clip(rest));
                }
                Ok(())
            }
            _ => wddm::parse_line(line).map(|v| {
                if let Some(v) = v {
                    sample.reading.add(v);
                }
            }),
        };
        if let Err(e) = result {
            if sample.errors.len() < MAX_ERRORS_KEPT {
                sample.errors.push(e);
            } else {
                self.errors_dropped += 1;
            }
        }
        Event::None
    }
}

fn parse_proc(rest: &str) -> Result<(u32, String), String> {
    let bad = || format!("not a process line: {:?}", wddm::clip(rest));
    let (pid, name) = rest.split_once(' ').ok_or_else(bad)?;
    let pid = pid.parse().map_err(|_| bad())?;
    let name: String = name.trim().chars().filter(|c| !c.is_control()).take(MAX_NAME).collect();
    if name.is_empty() {
        return Err(bad());
    }
    Ok((pid, name))
}

fn parse_adapter(rest: &str) -> Result<Adapter, String> {
    let bad = || format!("not an adapter line: {:?}", wddm::clip(rest));
    let f: Vec<&str> = rest.split_whitespace().collect();
    let [high, low, bus, device, function] = f.as_slice() else {
        return Err(bad());
    };
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| bad());
    let dec = |s: &str| s.parse::<u32>().map_err(|_| bad());
    let luid = Luid {
        high: hex(high)?,
        low: hex(low)?,
    };
    Ok(Adapter::at(luid, dec(bus)?, dec(device)?, dec(function)?))
}
