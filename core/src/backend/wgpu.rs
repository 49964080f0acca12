//! Which adapters burn's `wgpu` backend can train on, asked of wgpu itself
//! before cubecl touches it: cubecl panics on its device thread when no
//! adapter answers, which would end the cell without a reason. A machine
//! without Vulkan is told what is missing (the loader or a driver) and how
//! to install it.

use libloading::Library;

/// The Vulkan loader of this platform: without it wgpu has no Vulkan at all.
pub const LOADER: &str = if cfg!(windows) { "vulkan-1.dll" } else { "libvulkan.so.1" };

/// The kind of adapter, in the order replicas are given them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AdapterKind {
    Discrete,
    Integrated,
    Virtual,
    /// A software rasteriser computing on the CPU (Mesa's lavapipe, SwiftShader).
    Software,
}

/// One adapter wgpu offers for compute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adapter {
    pub kind: AdapterKind,
    /// Its index among the adapters of its kind, as cubecl counts them.
    pub index: usize,
    /// E.g. "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub name: String,
    /// The graphics API: "vulkan", "metal", "dx12".
    pub api: String,
    /// The driver and its version, e.g. "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)".
    pub driver: String,
}

impl Adapter {
    /// How results name the device: "llvmpipe (…) on vulkan, driver …, software".
    pub fn describe(&self) -> String {
        let kind = match self.kind {
            AdapterKind::Discrete => "discrete GPU",
            AdapterKind::Integrated => "integrated GPU",
            AdapterKind::Virtual => "virtual GPU",
            AdapterKind::Software => "software, on the CPU",
        };
        format!("{} on {} ({}; {kind})", self.name, self.api, self.driver)
    }
}

/// Which adapters `count` replicas of a process train on, the process's
/// first replica taking adapter `first` (processes on one machine take
/// consecutive adapters). Hardware adapters are given one a replica;
/// where a machine has only software adapters, every replica and process
/// computes on the first of them, as replicas on `flex` share the CPU.
pub fn assign(adapters: &[Adapter], first: usize, count: usize) -> Result<Vec<Adapter>, String> {
    let hardware: Vec<&Adapter> = adapters.iter().filter(|a| a.kind != AdapterKind::Software).collect();
    if hardware.is_empty() {
        let software = adapters.first().ok_or_else(|| "wgpu offers no adapter".to_string())?;
        return Ok(vec![software.clone(); count]);
    }
    if first + count > hardware.len() {
        return Err(format!(
            "this process trains {count} replica(s) from adapter {first}, but wgpu offers {} hardware adapter(s) ({}); lower `devices` or the processes on this machine",
            hardware.len(),
            hardware.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(hardware[first..first + count].iter().map(|a| (*a).clone()).collect())
}

/// Why wgpu offers no adapter on this machine, and how to fix it: the
/// Vulkan loader is missing, or it is there with no driver behind it.
pub fn missing(loader: &str) -> String {
    // SAFETY: loading the Vulkan loader runs only its own initialisers.
    let has_loader = unsafe { Library::new(loader) }.is_ok();
    if cfg!(target_os = "linux") && !has_loader {
        format!(
            "backend \"wgpu\" found no Vulkan: the loader {loader} cannot be loaded; install it (Debian/Ubuntu: `apt install libvulkan1 mesa-vulkan-drivers`, Fedora: `dnf install vulkan-loader mesa-vulkan-drivers`) and your GPU's driver, or train on backend = \"flex\""
        )
    } else {
        format!(
            "backend \"wgpu\" found no adapter: the Vulkan loader ({loader}) is there but no driver answers; install your GPU's Vulkan driver, or Mesa's software one (Debian/Ubuntu: `apt install mesa-vulkan-drivers`, which provides lavapipe), or train on backend = \"flex\""
        )
    }
}

/// The adapters wgpu offers on this machine, in the order replicas take
/// them, or why there are none.
#[cfg(feature = "wgpu")]
pub fn probe() -> Result<Vec<Adapter>, String> {
    // The one graphics API cubecl's runtime picks: Metal on macOS, Vulkan elsewhere.
    let backends = if cfg!(target_os = "macos") { ::wgpu::Backends::METAL } else { ::wgpu::Backends::VULKAN };
    let instance = ::wgpu::Instance::new(::wgpu::InstanceDescriptor {
        backends,
        ..::wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let found = block_on(instance.enumerate_adapters(backends));
    let mut adapters: Vec<Adapter> = Vec::new();
    for adapter in found {
        let info = adapter.get_info();
        let kind = match info.device_type {
            ::wgpu::DeviceType::DiscreteGpu => AdapterKind::Discrete,
            ::wgpu::DeviceType::IntegratedGpu => AdapterKind::Integrated,
            ::wgpu::DeviceType::VirtualGpu => AdapterKind::Virtual,
            ::wgpu::DeviceType::Cpu => AdapterKind::Software,
            // cubecl cannot address an adapter of no known type.
            ::wgpu::DeviceType::Other => continue,
        };
        let index = adapters.iter().filter(|a| a.kind == kind).count();
        let driver = [info.driver.as_str(), info.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        adapters.push(Adapter {
            kind,
            index,
            name: info.name,
            api: info.backend.to_str().to_string(),
            driver,
        });
    }
    adapters.sort_by_key(|a| (a.kind, a.index));
    if adapters.is_empty() {
        return Err(missing(LOADER));
    }
    Ok(adapters)
}

/// [`probe`], asked once a process: what a config's validation checks.
pub fn available() -> Result<Vec<Adapter>, String> {
    #[cfg(feature = "wgpu")]
    {
        static ADAPTERS: std::sync::OnceLock<Result<Vec<Adapter>, String>> = std::sync::OnceLock::new();
        ADAPTERS.get_or_init(probe).clone()
    }
    #[cfg(not(feature = "wgpu"))]
    Err("backend \"wgpu\" needs benchkit built with `--features wgpu`".into())
}

/// The adapters' futures resolve at once on native platforms; poll until they do.
#[cfg(feature = "wgpu")]
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::yield_now();
    }
}

/// cubecl's name for `adapter`.
#[cfg(feature = "wgpu")]
pub fn device(adapter: &Adapter) -> burn::backend::wgpu::WgpuDevice {
    use burn::backend::wgpu::WgpuDevice;
    match adapter.kind {
        AdapterKind::Discrete => WgpuDevice::DiscreteGpu(adapter.index),
        AdapterKind::Integrated => WgpuDevice::IntegratedGpu(adapter.index),
        AdapterKind::Virtual => WgpuDevice::VirtualGpu(adapter.index),
        AdapterKind::Software => WgpuDevice::Cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(kind: AdapterKind, index: usize, name: &str) -> Adapter {
        Adapter { kind, index, name: name.into(), api: "vulkan".into(), driver: "d 1.0".into() }
    }

    #[test]
    fn hardware_adapters_go_one_a_replica_from_the_process_s_first() {
        let all = [
            adapter(AdapterKind::Discrete, 0, "a"),
            adapter(AdapterKind::Discrete, 1, "b"),
            adapter(AdapterKind::Integrated, 0, "c"),
            adapter(AdapterKind::Software, 0, "llvmpipe"),
        ];
        let names = |v: Vec<Adapter>| v.into_iter().map(|a| a.name).collect::<Vec<_>>();
        assert_eq!(names(assign(&all, 0, 2).unwrap()), ["a", "b"]);
        assert_eq!(names(assign(&all, 1, 2).unwrap()), ["b", "c"]);
        let e = assign(&all, 2, 2).unwrap_err();
        assert!(e.contains("from adapter 2") && e.contains("3 hardware adapter(s) (a, b, c)"), "{e}");
    }

    #[test]
    fn a_software_adapter_alone_is_shared_by_every_replica() {
        let all = [adapter(AdapterKind::Software, 0, "llvmpipe")];
        let got = assign(&all, 3, 2).unwrap();
        assert_eq!(got, vec![all[0].clone(), all[0].clone()]);
        assert!(assign(&[], 0, 1).is_err());
    }

    #[test]
    fn a_missing_loader_is_named_with_the_packages_to_install() {
        let e = missing("libvulkan-absent.so.1");
        if cfg!(target_os = "linux") {
            assert!(e.contains("libvulkan-absent.so.1 cannot be loaded"), "{e}");
            assert!(e.contains("libvulkan1 mesa-vulkan-drivers"), "{e}");
        }
        assert!(e.contains("backend = \"flex\""), "{e}");
    }

    #[test]
    fn a_device_is_described_with_its_api_driver_and_kind() {
        let a = adapter(AdapterKind::Software, 0, "llvmpipe (LLVM 15.0.6, 256 bits)");
        assert_eq!(a.describe(), "llvmpipe (LLVM 15.0.6, 256 bits) on vulkan (d 1.0; software, on the CPU)");
    }
}
