//! The ggml backend a model runs on: the compute estimate, `-fa auto` and
//! placement each depend on it, so it sits below all three.

/// The backend whose compute buffer is estimated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Backend {
    Cpu,
    Cuda,
    Vulkan,
    Metal,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
            Backend::Vulkan => "vulkan",
            Backend::Metal => "metal",
        }
    }

    /// The name llama.cpp gives the first device's buffers in its log.
    pub fn buffer_name(self) -> &'static str {
        match self {
            Backend::Cpu => "CPU",
            Backend::Cuda => "CUDA0",
            Backend::Vulkan => "Vulkan0",
            Backend::Metal => "MTL0",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(Backend::Cpu),
            "cuda" => Ok(Backend::Cuda),
            "vulkan" => Ok(Backend::Vulkan),
            "metal" => Ok(Backend::Metal),
            _ => Err(format!("unknown backend {s:?} (cpu, cuda, vulkan or metal)")),
        }
    }
}
