//! Values no device can have are not facts. A driver that returns garbage
//! (a counter read as -1, a field the card does not fill, a corrupt
//! record), a hostile DRM client writing its own fdinfo figures, a runtime
//! API anyone can answer on a loopback port, a `--remote` host, or a buggy
//! source must not put `gpu 250%`, `temp 4294967295 C` or `tokens/s prompt
//! 1000349912608970.2` on screen or in /metrics: each out-of-range value
//! becomes null (unknown) with a note saying what was dropped. Run once per
//! sample over every source's devices, per-process figures and the models'
//! runtime and header figures, before anything is summed.

use crate::snapshot::{Device, Model, Process};

/// Above this a byte count is no GPU's: 1 PiB. The largest accelerators
/// hold a few hundred GiB; a figure of 2^63 would overflow any sum.
pub const MAX_BYTES: u64 = 1 << 50;
/// The hottest a working GPU reports is near 110 °C; above 200 °C the
/// sensor value is garbage.
const MAX_TEMPERATURE_C: u32 = 200;
/// NVML's fan speed is a share of the fan's rated maximum and "may exceed
/// 100% in certain cases" (nvml.h, nvmlDeviceGetFanSpeed); twice that is not.
const MAX_FAN_PERCENT: u32 = 200;
/// The most power one accelerator board draws is around 1.2 kW.
const MAX_POWER_W: f64 = 10_000.0;
/// GPU clocks are below 4 GHz, memory clocks below 20 GHz effective.
const MAX_CLOCK_MHZ: u32 = 100_000;
/// PCIe 7.0 x16 is ~256 GB/s each way.
const MAX_PCIE_BYTES_PER_S: u64 = 1 << 40;
const MAX_PCIE_GEN: u32 = 16;
const MAX_PCIE_WIDTH: u32 = 64;
/// Tokens a second one server processes: published prompt-processing
/// figures for one model on one node are near 10^5 (a small model, many
/// GPUs), so 10^7 is no server's.
const MAX_TOKENS_PER_S: f64 = 1e7;
/// Requests in one server's queue: vLLM's scheduler runs at most
/// `max_num_seqs` (default 256 to 1024) at once; a million is no server's.
const MAX_REQUESTS: u64 = 1_000_000;
/// A context of 2^32 tokens is no model's (the longest trained are 10^7).
const MAX_CONTEXT: u64 = 1 << 32;

/// Clears every implausible value of the sample, with a note on the device
/// or process it belonged to.
pub fn check(devices: &mut [Device], processes: &mut [Process]) {
    for device in devices.iter_mut() {
        check_device(device);
    }
    for process in processes.iter_mut() {
        let mut notes = Vec::new();
        for usage in &mut process.gpu {
            let total = devices
                .iter()
                .find(|d| d.index == usage.device)
                .and_then(|d| d.memory_total_bytes);
            // A process may spill past the card's own memory, never hold
            // more of it than the card has.
            let mut dropped = Dropped::default();
            dropped.bytes(&mut usage.vram_bytes, "vram", total.unwrap_or(MAX_BYTES));
            dropped.bytes(&mut usage.spill_bytes, "spill", MAX_BYTES);
            dropped.bytes(&mut usage.paged_bytes, "paged", MAX_BYTES);
            if usage.engines.values().any(|v| *v > 100) {
                let shown: Vec<String> = usage.engines.iter().map(|(k, v)| format!("{k} {v}%")).collect();
                dropped.0.push(shown.join(" "));
                usage.engines.clear();
            }
            notes.extend(dropped.note(&format!("on GPU {}", usage.device)));
        }
        process.notes.extend(notes);
        process.models.iter_mut().for_each(check_model);
    }
}

/// A model's figures: what its runtime's API and log say (rates, queues,
/// buffers) and what its file's header makes of it.
fn check_model(m: &mut Model) {
    let mut dropped = Dropped::default();
    if let Some(a) = &mut m.activity {
        dropped.at_most(&mut a.requests_running, "requests running", "", MAX_REQUESTS);
        dropped.at_most(&mut a.requests_waiting, "requests waiting", "", MAX_REQUESTS);
        dropped.within(
            &mut a.prompt_tokens_per_second,
            "tokens/s prompt",
            "",
            0.0..=MAX_TOKENS_PER_S,
        );
        dropped.within(
            &mut a.generation_tokens_per_second,
            "tokens/s generation",
            "",
            0.0..=MAX_TOKENS_PER_S,
        );
        dropped.within(&mut a.kv_cache_used_ratio, "KV cache used ratio", "", 0.0..=1.0);
    }
    if let Some(r) = &mut m.reported {
        dropped.each_bytes([
            (&mut r.weights_bytes, "reported weights"),
            (&mut r.kv_bytes, "reported KV"),
            (&mut r.compute_bytes, "reported compute"),
            (&mut r.total_bytes, "reported total"),
            (&mut r.device_bytes, "reported on devices"),
        ]);
        r.buffers.retain(|b| {
            let keep = b.bytes <= MAX_BYTES;
            if !keep {
                dropped.0.push(format!("{} buffer {} B", b.kind, b.bytes));
            }
            keep
        });
    }
    if let Some(e) = &mut m.estimate {
        dropped.each_bytes([
            (&mut e.weights_bytes, "estimated weights"),
            (&mut e.kv_bytes, "estimated KV"),
            (&mut e.kv_bytes_per_token, "estimated KV per token"),
            (&mut e.recurrent_state_bytes, "estimated recurrent state"),
            (&mut e.kv_bytes_without_window, "estimated KV without window"),
        ]);
    }
    dropped.at_most(&mut m.context, "context", "", MAX_CONTEXT);
    dropped.at_most(&mut m.context_train, "trained context", "", MAX_CONTEXT);
    if let Some(total) = m.slots_total {
        dropped.at_most(&mut m.slots_busy, "slots busy", &format!(" of {total}"), total);
    }
    m.notes.extend(dropped.note("from the runtime"));
}

fn check_device(d: &mut Device) {
    let mut dropped = Dropped::default();
    dropped.bytes(&mut d.memory_total_bytes, "memory total", MAX_BYTES);
    let total = d.memory_total_bytes.unwrap_or(MAX_BYTES);
    dropped.bytes(&mut d.memory_used_bytes, "memory used", total);
    dropped.bytes(&mut d.memory_free_bytes, "memory free", total);
    dropped.bytes(&mut d.memory_reserved_bytes, "memory reserved", total);
    dropped.bytes(&mut d.shared_memory_used_bytes, "shared memory used", MAX_BYTES);
    dropped.at_most(&mut d.gpu_util_percent, "gpu", "%", 100);
    dropped.at_most(&mut d.memory_activity_percent, "mem activity", "%", 100);
    dropped.at_most(&mut d.fan_percent, "fan", "%", MAX_FAN_PERCENT);
    dropped.at_most(&mut d.temperature_c, "temperature", " C", MAX_TEMPERATURE_C);
    dropped.watts(&mut d.power_w, "power");
    dropped.watts(&mut d.power_limit_w, "power limit");
    if let Some(c) = &mut d.clocks {
        for (value, name) in [
            (&mut c.graphics_mhz, "graphics clock"),
            (&mut c.sm_mhz, "sm clock"),
            (&mut c.memory_mhz, "memory clock"),
            (&mut c.graphics_max_mhz, "max graphics clock"),
            (&mut c.memory_max_mhz, "max memory clock"),
        ] {
            dropped.at_most(value, name, " MHz", MAX_CLOCK_MHZ);
        }
    }
    if let Some(p) = &mut d.pcie {
        dropped.at_most(&mut p.link_gen, "pcie gen", "", MAX_PCIE_GEN);
        dropped.at_most(&mut p.max_link_gen, "max pcie gen", "", MAX_PCIE_GEN);
        dropped.at_most(&mut p.link_width, "pcie width", "x", MAX_PCIE_WIDTH);
        dropped.at_most(&mut p.max_link_width, "max pcie width", "x", MAX_PCIE_WIDTH);
        dropped.bytes(&mut p.tx_bytes_per_s, "pcie tx B/s", MAX_PCIE_BYTES_PER_S);
        dropped.bytes(&mut p.rx_bytes_per_s, "pcie rx B/s", MAX_PCIE_BYTES_PER_S);
    }
    d.notes.extend(dropped.note("from the driver"));
}

/// The values dropped from one device or process entry, as the source
/// gave them.
#[derive(Default)]
struct Dropped(Vec<String>);

impl Dropped {
    fn at_most<T: PartialOrd + Copy + std::fmt::Display>(
        &mut self,
        value: &mut Option<T>,
        name: &str,
        unit: &str,
        max: T,
    ) {
        if let Some(v) = value.filter(|v| *v > max) {
            self.0.push(format!("{name} {v}{unit}"));
            *value = None;
        }
    }

    fn bytes(&mut self, value: &mut Option<u64>, name: &str, max: u64) {
        self.at_most(value, name, " B", max);
    }

    /// Byte counts no device holds (over [`MAX_BYTES`]).
    fn each_bytes<const N: usize>(&mut self, fields: [(&mut Option<u64>, &str); N]) {
        for (value, name) in fields {
            self.bytes(value, name, MAX_BYTES);
        }
    }

    /// A figure outside `range`, or NaN, is dropped.
    fn within(&mut self, value: &mut Option<f64>, name: &str, unit: &str, range: std::ops::RangeInclusive<f64>) {
        if let Some(v) = value.filter(|v| !range.contains(v)) {
            self.0.push(format!("{name} {v}{unit}"));
            *value = None;
        }
    }

    fn watts(&mut self, value: &mut Option<f64>, name: &str) {
        self.within(value, name, " W", 0.0..=MAX_POWER_W);
    }

    fn note(self, whose: &str) -> Option<String> {
        (!self.0.is_empty()).then(|| format!("implausible values {whose} shown as n/a: {}", self.0.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Clocks;

    fn device() -> Device {
        Device {
            index: 0,
            backend: "nvml".into(),
            memory_total_bytes: Some(80 << 30),
            memory_used_bytes: Some(10 << 30),
            memory_free_bytes: Some(70 << 30),
            gpu_util_percent: Some(55),
            temperature_c: Some(61),
            power_w: Some(310.5),
            fan_percent: Some(104),
            ..Device::default()
        }
    }

    fn process(vram: Option<u64>, engines: &[(&str, u32)]) -> Process {
        let mut p = crate::snapshot::tests::process(42, &[(0, vram)]);
        p.gpu[0].engines = engines.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        p
    }

    #[test]
    fn plausible_values_are_kept_as_they_are() {
        let mut devices = vec![device()];
        let mut processes = vec![process(Some(4 << 30), &[("sm", 100), ("mem", 0)])];
        let before = (devices.clone(), processes.clone());
        check(&mut devices, &mut processes);
        assert_eq!((devices, processes), before);
    }

    #[test]
    fn values_no_gpu_has_become_unknown_with_a_note() {
        let mut d = Device {
            gpu_util_percent: Some(250),
            temperature_c: Some(u32::MAX),
            memory_free_bytes: Some(81 << 30),
            power_w: Some(f64::NAN),
            clocks: Some(Clocks {
                sm_mhz: Some(u32::MAX),
                memory_mhz: Some(2619),
                ..Clocks::default()
            }),
            ..device()
        };
        check(std::slice::from_mut(&mut d), &mut []);
        assert_eq!(d.gpu_util_percent, None);
        assert_eq!(d.temperature_c, None);
        assert_eq!(d.memory_free_bytes, None, "free > total");
        assert_eq!(d.memory_used_bytes, Some(10 << 30));
        assert_eq!(d.power_w, None);
        assert_eq!(d.fan_percent, Some(104), "NVML's fan may pass 100%");
        let clocks = d.clocks.unwrap();
        assert_eq!((clocks.sm_mhz, clocks.memory_mhz), (None, Some(2619)));
        assert_eq!(
            d.notes,
            ["implausible values from the driver shown as n/a: memory free 86973087744 B, gpu 250%, temperature 4294967295 C, power NaN W, sm clock 4294967295 MHz"]
        );
    }

    #[test]
    fn a_process_holding_more_than_the_card_or_busier_than_100_percent_is_unknown() {
        let mut devices = vec![device()];
        let mut processes = vec![
            process(Some(1 << 63), &[("sm", 12)]),
            process(Some(1 << 30), &[("sm", u32::MAX), ("mem", 3)]),
        ];
        check(&mut devices, &mut processes);
        assert_eq!(processes[0].gpu[0].vram_bytes, None);
        assert_eq!(processes[0].gpu[0].engines["sm"], 12);
        assert_eq!(
            processes[0].notes,
            ["implausible values on GPU 0 shown as n/a: vram 9223372036854775808 B"]
        );
        assert_eq!(processes[1].gpu[0].vram_bytes, Some(1 << 30));
        assert!(processes[1].gpu[0].engines.is_empty());
        assert_eq!(
            processes[1].notes,
            ["implausible values on GPU 0 shown as n/a: mem 3% sm 4294967295%"]
        );
        // Without a known total, the bound is 1 PiB.
        devices[0].memory_total_bytes = None;
        let mut huge = vec![process(Some(MAX_BYTES + 1), &[])];
        check(&mut devices, &mut huge);
        assert_eq!(huge[0].gpu[0].vram_bytes, None);
    }

    fn served_model() -> Model {
        Model {
            context: Some(8192),
            context_train: Some(131_072),
            slots_total: Some(4),
            slots_busy: Some(2),
            activity: Some(crate::snapshot::ModelActivity {
                requests_running: Some(2),
                requests_waiting: Some(0),
                prompt_tokens_per_second: Some(5_120.5),
                generation_tokens_per_second: Some(0.0),
                kv_cache_used_ratio: Some(1.0),
                ..Default::default()
            }),
            reported: Some(crate::snapshot::ModelReported {
                weights_bytes: Some(600 << 20),
                buffers: vec![crate::snapshot::ReportedBuffer {
                    device: "CUDA0".into(),
                    kind: "model".into(),
                    bytes: 600 << 20,
                    device_memory: true,
                }],
                ..Default::default()
            }),
            ..Model::default()
        }
    }

    #[test]
    fn a_runtimes_plausible_figures_are_kept_as_they_are() {
        let mut p = process(Some(1 << 30), &[]);
        p.models = vec![served_model()];
        let before = p.clone();
        check(&mut [device()], std::slice::from_mut(&mut p));
        assert_eq!(p, before);
    }

    #[test]
    fn a_runtimes_figures_no_server_has_become_unknown_with_a_note() {
        let mut m = served_model();
        m.context_train = Some(u64::MAX);
        m.slots_busy = Some(9);
        let a = m.activity.as_mut().unwrap();
        a.requests_waiting = Some(u64::MAX);
        a.prompt_tokens_per_second = Some(1_000_349_912_608_970.2);
        a.generation_tokens_per_second = Some(f64::NAN);
        a.kv_cache_used_ratio = Some(7.0);
        let r = m.reported.as_mut().unwrap();
        r.kv_bytes = Some(1 << 60);
        r.buffers[0].bytes = 1 << 62;
        let mut p = process(Some(1 << 30), &[]);
        p.models = vec![m];
        check(&mut [device()], std::slice::from_mut(&mut p));
        let m = &p.models[0];
        let a = m.activity.as_ref().unwrap();
        assert_eq!(
            (a.requests_running, a.requests_waiting, a.prompt_tokens_per_second),
            (Some(2), None, None)
        );
        assert_eq!((a.generation_tokens_per_second, a.kv_cache_used_ratio), (None, None));
        let r = m.reported.as_ref().unwrap();
        assert_eq!(
            (r.weights_bytes, r.kv_bytes, r.buffers.len()),
            (Some(600 << 20), None, 0)
        );
        assert_eq!((m.context, m.context_train, m.slots_busy), (Some(8192), None, None));
        assert_eq!(
            m.notes,
            ["implausible values from the runtime shown as n/a: requests waiting 18446744073709551615, tokens/s prompt 1000349912608970.3, tokens/s generation NaN, KV cache used ratio 7, reported KV 1152921504606846976 B, model buffer 4611686018427387904 B, trained context 18446744073709551615, slots busy 9 of 4"]
        );
    }
}
