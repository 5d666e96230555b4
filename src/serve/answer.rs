//! A `--remote` host's `/snapshot` answer, read as the hostile input it
//! may be. The body is bounded ([`super::remote::BODY_LIMIT`]); within it,
//! the devices, processes and backend lines a host may send are capped
//! while the JSON is read, so a host that sends 300,000 processes costs
//! one process's memory past the cap, not 300,000 of them; what was left
//! out is said on a backend line of the host's. Then the snapshot goes
//! through the checks every local source's figures go through
//! ([`crate::collect::plausible`]), and its attribution is computed here
//! from what is kept: a host's own sums are not taken on trust.

use crate::snapshot::{Attribution, Backend, BackendStatus, Device, Process, Snapshot, SCHEMA_VERSION};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;

/// Devices kept of one host: a DGX-class machine with 16 GPUs, each cut
/// into 7 MIG instances, lists 128.
pub const MAX_DEVICES: usize = 256;
/// Processes kept of one host (every process of it, as `serve` lists
/// them): those on a GPU or running a model first.
pub const MAX_PROCESSES: usize = 4096;
/// Backend lines kept of one host (a host has one per source).
pub const MAX_BACKENDS: usize = 64;

/// The name of the backend line that says what was left out.
pub const CAP_BACKEND: &str = "remote answer";

/// Reads a host's answer: capped, checked, its attribution recomputed.
pub fn read(body: &[u8]) -> Result<Snapshot, String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let answer = de
        .deserialize_map(AnswerVisitor)
        .and_then(|answer| de.end().map(|()| answer))
        .map_err(|e| format!("not a gputaskman snapshot: {e}"))?;
    if answer.rest.schema_version != SCHEMA_VERSION {
        return Err(format!(
            "snapshot schema version {}, this build reads {SCHEMA_VERSION}",
            answer.rest.schema_version
        ));
    }
    Ok(answer.settle(CAP_BACKEND))
}

/// A host's snapshot rebuilt from what another source holds of it
/// (Prometheus's series), put through the same caps and checks as an
/// answer read by [`read`]; what was left out is said on a backend line
/// named `cap_backend`.
pub fn within_caps(mut snapshot: Snapshot, cap_backend: &str) -> Snapshot {
    let devices = std::mem::take(&mut snapshot.devices);
    let processes = std::mem::take(&mut snapshot.processes);
    let backends = std::mem::take(&mut snapshot.backends);
    let mut answer = Answer {
        devices: Capped::default(),
        processes: Capped::default(),
        backends: Capped::default(),
        rest: snapshot,
    };
    for d in devices {
        answer.devices.offer(d, MAX_DEVICES, device_first);
    }
    for p in processes {
        answer.processes.offer(p, MAX_PROCESSES, process_first);
    }
    for b in backends {
        answer.backends.offer(b, MAX_BACKENDS, backend_first);
    }
    answer.settle(cap_backend)
}

/// No device is kept before another.
fn device_first(_: &Device) -> bool {
    false
}

/// Processes on a GPU or running a model are kept first.
fn process_first(p: &Process) -> bool {
    !p.gpu.is_empty() || !p.models.is_empty()
}

/// Backend lines that are not OK are kept first.
fn backend_first(b: &Backend) -> bool {
    b.status != BackendStatus::Ok
}

/// The answer as read: the capped lists apart, the rest a snapshot with
/// those lists empty.
struct Answer {
    devices: Capped<Device>,
    processes: Capped<Process>,
    backends: Capped<Backend>,
    rest: Snapshot,
}

impl Answer {
    /// The snapshot of what was kept: a backend line named `cap_backend`
    /// says what was left out, every figure goes through
    /// [`crate::collect::plausible`], and the attribution is computed from
    /// the rows kept.
    fn settle(self, cap_backend: &str) -> Snapshot {
        let cut: Vec<String> = [
            self.devices.said("devices", MAX_DEVICES),
            self.processes.said("processes", MAX_PROCESSES),
            self.backends.said("backend lines", MAX_BACKENDS),
        ]
        .into_iter()
        .flatten()
        .collect();
        let (preferred_left_out, processes_sent) = (self.processes.preferred_left_out, self.processes.sent);
        let mut snapshot = self.rest;
        snapshot.devices = self.devices.kept();
        snapshot.processes = self.processes.kept();
        snapshot.backends = self.backends.kept();
        // A process left out may have held memory on any device: no device's
        // list is whole, so nothing there is "unattributed".
        if preferred_left_out > 0 {
            for d in &mut snapshot.devices {
                d.process_list_complete = false;
            }
        }
        if !cut.is_empty() {
            snapshot.backends.push(Backend {
                name: cap_backend.into(),
                status: BackendStatus::Error,
                detail: format!(
                    "cut to this view's caps: {}{}",
                    cut.join(", "),
                    if processes_sent > MAX_PROCESSES {
                        " (GPU and model processes kept first)"
                    } else {
                        ""
                    }
                ),
            });
        }
        crate::collect::plausible::check(&mut snapshot.devices, &mut snapshot.processes);
        snapshot.attribution = Attribution::compute(&snapshot.devices, &snapshot.processes);
        snapshot
    }
}

/// Of a list, the items kept (those preferred first) and how many were
/// sent.
struct Capped<T> {
    first: Vec<T>,
    others: Vec<T>,
    sent: usize,
    /// Items that would have been kept first, left out all the same.
    preferred_left_out: usize,
}

impl<T> Default for Capped<T> {
    fn default() -> Self {
        Capped {
            first: Vec::new(),
            others: Vec::new(),
            sent: 0,
            preferred_left_out: 0,
        }
    }
}

impl<T> Capped<T> {
    /// Keeps `item` while fewer than `cap` are kept; past that, a preferred
    /// item takes the place of one that is not.
    fn offer(&mut self, item: T, cap: usize, preferred: fn(&T) -> bool) {
        self.sent += 1;
        let first = preferred(&item);
        if self.first.len() + self.others.len() < cap {
            if first {
                self.first.push(item);
            } else {
                self.others.push(item);
            }
        } else if first && self.others.pop().is_some() {
            self.first.push(item);
        } else if first {
            self.preferred_left_out += 1;
        }
    }

    /// `"20000 devices sent, 256 kept"` when some were left out.
    fn said(&self, what: &str, cap: usize) -> Option<String> {
        let kept = self.first.len() + self.others.len();
        (self.sent > kept).then(|| format!("{} {what} sent, {kept} kept (at most {cap})", self.sent))
    }

    fn kept(self) -> Vec<T> {
        let mut kept = self.first;
        kept.extend(self.others);
        kept
    }
}

/// Reads a list keeping at most `cap` items, those `preferred` first; the
/// others are read one at a time and dropped.
struct CappedList<T> {
    cap: usize,
    preferred: fn(&T) -> bool,
    item: PhantomData<T>,
}

impl<T> CappedList<T> {
    fn new(cap: usize, preferred: fn(&T) -> bool) -> Self {
        CappedList {
            cap,
            preferred,
            item: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for CappedList<T> {
    type Value = Capped<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Capped<T>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for CappedList<T> {
    type Value = Capped<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Capped<T>, A::Error> {
        let mut capped = Capped::default();
        while let Some(item) = seq.next_element::<T>()? {
            capped.offer(item, self.cap, self.preferred);
        }
        Ok(capped)
    }
}

/// The snapshot's fields other than the capped lists and the attribution
/// (recomputed): kept as JSON values to build the rest of the snapshot
/// from. Any other key is skipped unread, so no unknown field costs memory.
fn plain_fields() -> &'static [String] {
    static FIELDS: OnceLock<Vec<String>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let schema = crate::snapshot::json_schema();
        schema["properties"]
            .as_object()
            .map(|p| p.keys().filter(|k| !CAPPED.contains(&k.as_str())).cloned().collect())
            .unwrap_or_default()
    })
}

/// The lists read capped, and the attribution, which is recomputed.
const CAPPED: [&str; 4] = ["devices", "processes", "backends", "attribution"];

struct AnswerVisitor;

impl<'de> Visitor<'de> for AnswerVisitor {
    type Value = Answer;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a snapshot")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Answer, A::Error> {
        let mut plain = serde_json::Map::new();
        let (mut devices, mut processes, mut backends) = (None, None, None);
        let mut has_attribution = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "devices" => devices = Some(map.next_value_seed(CappedList::new(MAX_DEVICES, device_first))?),
                "processes" => processes = Some(map.next_value_seed(CappedList::new(MAX_PROCESSES, process_first))?),
                "backends" => backends = Some(map.next_value_seed(CappedList::new(MAX_BACKENDS, backend_first))?),
                "attribution" => {
                    map.next_value::<IgnoredAny>()?;
                    has_attribution = true;
                }
                k if plain_fields().iter().any(|f| f == k) => {
                    plain.insert(key, map.next_value()?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let missing = |field| serde::de::Error::missing_field(field);
        let devices = devices.ok_or_else(|| missing("devices"))?;
        let processes = processes.ok_or_else(|| missing("processes"))?;
        let backends = backends.ok_or_else(|| missing("backends"))?;
        if !has_attribution {
            return Err(missing("attribution"));
        }
        for list in ["devices", "processes", "backends"] {
            plain.insert(list.into(), serde_json::Value::Array(Vec::new()));
        }
        plain.insert(
            "attribution".into(),
            serde_json::to_value(Attribution::default()).map_err(serde::de::Error::custom)?,
        );
        let rest = serde_json::from_value(serde_json::Value::Object(plain)).map_err(serde::de::Error::custom)?;
        Ok(Answer {
            devices,
            processes,
            backends,
            rest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::GpuUsage;

    fn snapshot() -> Snapshot {
        crate::serve::metrics::tests::snapshot()
    }

    #[test]
    fn a_snapshot_within_the_caps_reads_as_it_was_sent() {
        let sent = snapshot();
        let got = read(&serde_json::to_vec(&sent).unwrap()).unwrap();
        assert_eq!(got, sent);
    }

    #[test]
    fn every_field_of_a_snapshot_is_read_capped_or_kept() {
        // A field added to the snapshot must reach the view: it is either
        // one of the capped lists or one of the plain fields.
        let sent = serde_json::to_value(snapshot()).unwrap();
        for key in sent.as_object().unwrap().keys() {
            assert!(
                CAPPED.contains(&key.as_str()) || plain_fields().contains(key),
                "{key} would be dropped"
            );
        }
        assert!(plain_fields().iter().any(|f| f == "host"), "{:?}", plain_fields());
    }

    #[test]
    fn lists_past_their_caps_are_cut_gpu_processes_first_and_said_so() {
        let mut sent = snapshot();
        let device = sent.devices[0].clone();
        sent.devices = (0..MAX_DEVICES as u32 + 10)
            .map(|index| Device {
                index,
                ..device.clone()
            })
            .collect();
        let template = sent.processes[0].clone();
        let on_gpu = |pid: u32| Process {
            pid,
            gpu: vec![GpuUsage::memory_only(0, Some(1 << 20), "nvml")],
            models: Vec::new(),
            ..template.clone()
        };
        let idle = |pid: u32| Process {
            pid,
            gpu: Vec::new(),
            models: Vec::new(),
            ..template.clone()
        };
        // Idle processes fill the cap, then GPU processes come: they take
        // the idle ones' places.
        sent.processes = (0..MAX_PROCESSES as u32).map(idle).collect();
        sent.processes.extend((100_000..100_010).map(on_gpu));
        let got = read(&serde_json::to_vec(&sent).unwrap()).unwrap();
        assert_eq!(got.devices.len(), MAX_DEVICES);
        assert_eq!(got.devices.last().unwrap().index, MAX_DEVICES as u32 - 1);
        assert_eq!(got.processes.len(), MAX_PROCESSES);
        let gpu_pids: Vec<u32> = got
            .processes
            .iter()
            .filter(|p| !p.gpu.is_empty())
            .map(|p| p.pid)
            .collect();
        assert_eq!(gpu_pids, (100_000..100_010).collect::<Vec<_>>());
        // Only idle processes were left out: every GPU list is whole.
        assert!(got.devices.iter().all(|d| d.process_list_complete));
        let note = got.backends.iter().find(|b| b.name == CAP_BACKEND).unwrap();
        assert_eq!(note.status, BackendStatus::Error);
        assert_eq!(
            note.detail,
            format!(
                "cut to this view's caps: {} devices sent, {MAX_DEVICES} kept (at most {MAX_DEVICES}), {} processes sent, \
                 {MAX_PROCESSES} kept (at most {MAX_PROCESSES}) (GPU and model processes kept first)",
                MAX_DEVICES + 10,
                MAX_PROCESSES + 10
            )
        );
        // More GPU processes than the cap: the lists are not whole.
        sent.processes = (0..MAX_PROCESSES as u32 + 1).map(on_gpu).collect();
        let got = read(&serde_json::to_vec(&sent).unwrap()).unwrap();
        assert!(got.devices.iter().all(|d| !d.process_list_complete));
        assert_eq!(got.attribution.devices[0].unattributed_bytes, None);
    }

    #[test]
    fn implausible_figures_from_a_host_are_unknown_with_a_note() {
        let mut sent = snapshot();
        sent.devices[0].memory_total_bytes = Some(1);
        sent.devices[0].memory_used_bytes = Some(1 << 54);
        sent.devices[0].gpu_util_percent = Some(u32::MAX);
        sent.processes[0].gpu[0].vram_bytes = Some(1 << 62);
        // The host's own sums are not taken on trust either.
        sent.attribution.measured_sum_bytes = Some(1 << 62);
        let got = read(&serde_json::to_vec(&sent).unwrap()).unwrap();
        let d = &got.devices[0];
        assert_eq!((d.memory_used_bytes, d.gpu_util_percent), (None, None));
        assert!(
            d.notes.iter().any(|n| n.contains("memory used 18014398509481984 B")),
            "{:?}",
            d.notes
        );
        assert!(d.notes.iter().any(|n| n.contains("gpu 4294967295%")), "{:?}", d.notes);
        assert_eq!(got.processes[0].gpu[0].vram_bytes, None);
        assert_ne!(got.attribution.measured_sum_bytes, Some(1 << 62));
    }

    #[test]
    fn garbage_and_missing_lists_are_errors_never_panics() {
        for body in [
            &b""[..],
            b"[]",
            b"{}",
            b"{\"devices\": {}}",
            b"{\"schema_version\": 1, \"devices\": [], \"processes\": [], \"backends\": []}",
            b"{\"devices\": [1]}",
        ] {
            assert!(read(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
        let mut sent = serde_json::to_value(snapshot()).unwrap();
        sent["schema_version"] = 2.into();
        let e = read(&serde_json::to_vec(&sent).unwrap()).unwrap_err();
        assert!(e.contains("schema version 2"), "{e}");
    }
}
