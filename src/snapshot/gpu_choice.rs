//! `--gpu`'s choice of a device or a MIG instance.

/// What `--gpu` names: a device by index (a GPU in MIG mode with its
/// instances), or one MIG instance by its label (`0/1`, `0/1.2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuChoice {
    /// The device, or the GPU the instance is part of.
    pub index: u32,
    /// GPU instance id and compute instance id.
    pub instance: Option<(u32, u32)>,
}

impl std::str::FromStr for GpuChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<GpuChoice, String> {
        let want = || format!("{text:?}: give a device index (1) or a MIG instance (0/1, 0/1.2), as --list-gpus shows");
        let number = |t: &str| t.parse::<u32>().map_err(|_| want());
        let Some((index, instance)) = text.split_once('/') else {
            return Ok(GpuChoice {
                index: number(text)?,
                instance: None,
            });
        };
        let (gpu_instance, compute_instance) = instance.split_once('.').unwrap_or((instance, "0"));
        Ok(GpuChoice {
            index: number(index)?,
            instance: Some((number(gpu_instance)?, number(compute_instance)?)),
        })
    }
}

impl std::fmt::Display for GpuChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.instance {
            None => write!(f, "{}", self.index),
            Some((gi, 0)) => write!(f, "{}/{gi}", self.index),
            Some((gi, ci)) => write!(f, "{}/{gi}.{ci}", self.index),
        }
    }
}

impl GpuChoice {
    /// Whether `device` is shown: the device itself and, for a GPU, its
    /// MIG instances; for an instance, that instance only.
    pub fn matches(&self, device: &super::Device) -> bool {
        match self.instance {
            None => device.index == self.index || device.parent == Some(self.index),
            Some((gi, ci)) => {
                device.parent == Some(self.index)
                    && device
                        .mig
                        .as_ref()
                        .is_some_and(|m| (m.gpu_instance_id, m.compute_instance_id) == (gi, ci))
            }
        }
    }
}
