//! The kubelet's pod-resources `List` answer (a gRPC message the node's
//! kubelet writes, shaped by every pod's spec): any bytes give allocations
//! or an error, never a panic; every allocation read names a device the
//! answer holds, and assigning them to devices gives each device only
//! allocations of ids that name it.
#![no_main]

use gputaskman::collect::kubelet;
use gputaskman::snapshot::Device;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Framed as the client frames it, and as the bytes come.
    let mut framed = vec![0];
    framed.extend((data.len() as u32).to_be_bytes());
    framed.extend_from_slice(data);
    for body in [data, &framed[..]] {
        let Ok(allocations) = kubelet::allocations(body) else { continue };
        let mut devices: Vec<Device> = (0..3)
            .map(|i| Device {
                index: i,
                backend: "nvml".into(),
                uuid: allocations.get(i as usize).map(|a| a.device_id.clone()),
                process_list_complete: true,
                ..Device::default()
            })
            .collect();
        let backend = kubelet::assign(&mut devices, &[], &allocations);
        assert!(backend.detail.starts_with("pod-resources: "), "{}", backend.detail);
        for d in &devices {
            for a in d.pods.as_deref().unwrap_or_default() {
                // No process anywhere: nothing is in use, all is known.
                assert_eq!(a.in_use, Some(false), "{a:?}");
                assert!(allocations.iter().any(|x| x.device_id == a.device_id), "{a:?}");
            }
        }
    }
});
