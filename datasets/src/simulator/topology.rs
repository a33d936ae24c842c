//! The simulated fleet's layout: clusters → racks → hosts → 8 GPU slots, the
//! SKU of each cluster with its physical figures, and every GPU's identity
//! (UUID, names), all interned as `Arc<str>` once so that emitting a sample
//! clones pointers instead of formatting strings.
//!
//! Names follow the telemetry contract's examples: `node-0042`, `r07`,
//! `east-1`, and UUIDs shaped like DCGM's `GPU-xxxxxxxx-xxxx-…`.

use std::fmt::Write as _;
use std::sync::Arc;

use features::GpuId;

use super::rng::SimRng;

/// GPUs per host by default (`SimConfig::gpus_per_host`): an HGX / DGX
/// baseboard.
pub const GPUS_PER_HOST: usize = 8;

/// A GPU product, with the figures the physics needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sku {
    H100Sxm,
    H200Sxm,
    A100Sxm,
}

/// Physical figures of one SKU (NVIDIA datasheets; idle and thermal figures
/// from typical air-cooled HGX systems).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SkuSpec {
    /// `modelName` as DCGM / nvidia-smi report it.
    pub model_name: &'static str,
    /// Board power limit (TDP), W.
    pub tdp_w: f64,
    /// Power with no context running, W.
    pub idle_w: f64,
    /// Maximum (boost) SM clock, MHz.
    pub max_sm_mhz: f64,
    /// SM clock at idle, MHz.
    pub idle_sm_mhz: f64,
    /// Memory clock, MHz (HBM does not downclock at idle on these parts).
    pub mem_mhz: f64,
    /// Frame buffer, MiB.
    pub fb_mib: f64,
    /// Temperature at which the driver starts thermal slowdown, °C.
    pub slowdown_c: f64,
    /// Die temperature above inlet per watt at the median fan curve, °C/W.
    pub r_th: f64,
    /// PCIe generation of the host link.
    pub pcie_gen: f64,
}

impl Sku {
    /// Every SKU, in the order clusters cycle through them.
    pub const ALL: [Sku; 3] = [Sku::H100Sxm, Sku::H200Sxm, Sku::A100Sxm];

    /// The SKU's figures.
    pub const fn spec(self) -> &'static SkuSpec {
        match self {
            // H100 SXM5 80GB: 700 W, 1980 MHz boost, HBM3 2619 MHz.
            Sku::H100Sxm => &SkuSpec {
                model_name: "NVIDIA H100 80GB HBM3",
                tdp_w: 700.0,
                idle_w: 70.0,
                max_sm_mhz: 1980.0,
                idle_sm_mhz: 345.0,
                mem_mhz: 2619.0,
                fb_mib: 81_559.0,
                slowdown_c: 87.0,
                r_th: 0.070,
                pcie_gen: 5.0,
            },
            // H200 SXM 141GB: same die and power as H100, HBM3e 3201 MHz.
            Sku::H200Sxm => &SkuSpec {
                model_name: "NVIDIA H200",
                tdp_w: 700.0,
                idle_w: 75.0,
                max_sm_mhz: 1980.0,
                idle_sm_mhz: 345.0,
                mem_mhz: 3201.0,
                fb_mib: 143_771.0,
                slowdown_c: 87.0,
                r_th: 0.068,
                pcie_gen: 5.0,
            },
            // A100 SXM4 80GB: 400 W, 1410 MHz boost, HBM2e 1593 MHz.
            Sku::A100Sxm => &SkuSpec {
                model_name: "NVIDIA A100-SXM4-80GB",
                tdp_w: 400.0,
                idle_w: 55.0,
                max_sm_mhz: 1410.0,
                idle_sm_mhz: 210.0,
                mem_mhz: 1593.0,
                fb_mib: 81_920.0,
                slowdown_c: 85.0,
                r_th: 0.110,
                pcie_gen: 4.0,
            },
        }
    }
}

/// One GPU's identity and place. Replacements get their own entry.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, derived from the seed.
    pub uuid: GpuId,
    pub host: Arc<str>,
    pub rack: Arc<str>,
    pub cluster: Arc<str>,
    /// The SKU's `modelName`.
    pub model: Arc<str>,
    pub sku: Sku,
    /// Position on the baseboard, 0..gpus_per_host.
    pub slot: u8,
    /// Index of the slot in the fleet (host_index * gpus_per_host + slot).
    pub slot_index: usize,
    pub host_index: usize,
    pub rack_index: usize,
    /// The GPU this one replaced in the same slot, if it is a replacement.
    pub replaces: Option<GpuId>,
    /// When it started reporting (replacements only).
    pub active_from_ms: Option<i64>,
}

/// A rack: its name and cluster, and where its hosts are.
#[derive(Debug, Clone)]
pub(crate) struct RackInfo {
    pub name: Arc<str>,
    pub cluster: Arc<str>,
}

/// A host: its name, rack and slots.
#[derive(Debug, Clone)]
pub(crate) struct HostInfo {
    pub name: Arc<str>,
    pub rack: usize,
    pub cluster: usize,
    pub slots: std::ops::Range<usize>,
}

/// The whole layout; `gpus[i]` is the original GPU of slot `i`.
#[derive(Debug, Clone)]
pub(crate) struct Fleet {
    pub gpus: Vec<GpuInfo>,
    pub hosts: Vec<HostInfo>,
    pub racks: Vec<RackInfo>,
    /// GPUs a full host holds.
    pub per_host: usize,
}

const REGIONS: [&str; 5] = ["east", "west", "central", "north", "south"];

/// The name of cluster `i`: `east-1`, `west-1`, …, `east-2`, ….
pub fn cluster_name(i: usize) -> String {
    format!("{}-{}", REGIONS[i % REGIONS.len()], i / REGIONS.len() + 1)
}

/// A random DCGM-style UUID.
pub fn random_uuid(rng: &mut SimRng) -> GpuId {
    let hi = rng.next_u64();
    let lo = rng.next_u64();
    let mut s = String::with_capacity(40);
    let _ = write!(
        s,
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        hi >> 16 & 0xFFFF,
        hi & 0xFFFF,
        lo >> 48,
        lo & 0xFFFF_FFFF_FFFF
    );
    s.into()
}

impl Fleet {
    /// Lays out `gpus` slots, `gpus_per_host` to a host (the last may hold
    /// fewer); cluster `c` is SKU `Sku::ALL[c % 3]`.
    pub fn build(
        gpus: usize,
        gpus_per_host: usize,
        hosts_per_rack: usize,
        racks_per_cluster: usize,
        rng: &mut SimRng,
    ) -> Fleet {
        let per_host = gpus_per_host.max(1);
        let n_hosts = gpus.div_ceil(per_host);
        let n_racks = n_hosts.div_ceil(hosts_per_rack);
        let n_clusters = n_racks.div_ceil(racks_per_cluster);
        let clusters: Vec<Arc<str>> = (0..n_clusters).map(|i| cluster_name(i).into()).collect();
        let mut racks = Vec::with_capacity(n_racks);
        let mut hosts = Vec::with_capacity(n_hosts);
        let mut infos = Vec::with_capacity(gpus);
        for r in 0..n_racks {
            let cluster = r / racks_per_cluster;
            let first = r * hosts_per_rack;
            let last = (first + hosts_per_rack).min(n_hosts);
            let rack_name: Arc<str> = format!("r{:02}", r + 1).into();
            racks.push(RackInfo {
                name: rack_name.clone(),
                cluster: clusters[cluster].clone(),
            });
            let sku = Sku::ALL[cluster % Sku::ALL.len()];
            let model: Arc<str> = sku.spec().model_name.into();
            for h in first..last {
                let host_name: Arc<str> = format!("node-{:04}", h + 1).into();
                let s0 = h * per_host;
                let s1 = (s0 + per_host).min(gpus);
                hosts.push(HostInfo {
                    name: host_name.clone(),
                    rack: r,
                    cluster,
                    slots: s0..s1,
                });
                for s in s0..s1 {
                    infos.push(GpuInfo {
                        uuid: random_uuid(rng),
                        host: host_name.clone(),
                        rack: rack_name.clone(),
                        cluster: clusters[cluster].clone(),
                        model: model.clone(),
                        sku,
                        slot: (s - s0) as u8,
                        slot_index: s,
                        host_index: h,
                        rack_index: r,
                        replaces: None,
                        active_from_ms: None,
                    });
                }
            }
        }
        Fleet {
            gpus: infos,
            hosts,
            racks,
            per_host,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_names() {
        let mut rng = SimRng::new(3);
        let f = Fleet::build(1_000, GPUS_PER_HOST, 4, 8, &mut rng);
        assert_eq!(f.gpus.len(), 1_000);
        assert_eq!(f.hosts.len(), 125);
        assert_eq!(f.racks.len(), 32);
        assert_eq!(&*f.gpus[0].cluster, "east-1");
        assert_eq!(&*f.gpus[999].cluster, "north-1");
        assert_eq!(&*f.racks[31].cluster, "north-1");
        assert_eq!(&*f.gpus[0].host, "node-0001");
        assert_eq!(&*f.gpus[999].host, "node-0125");
        assert_eq!(&*f.gpus[999].rack, "r32");
        assert_eq!(f.gpus[999].slot, 7);
        let u = &f.gpus[0].uuid;
        assert_eq!(u.len(), 40);
        let parts: Vec<&str> = u.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [3, 8, 4, 4, 4, 12]
        );
        assert!(
            u[4..]
                .chars()
                .all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        let mut uuids: Vec<&str> = f.gpus.iter().map(|g| &*g.uuid).collect();
        uuids.sort_unstable();
        uuids.dedup();
        assert_eq!(uuids.len(), 1_000);
        assert_eq!(cluster_name(5), "east-2");
    }

    #[test]
    fn partial_last_host() {
        let f = Fleet::build(10, GPUS_PER_HOST, 4, 8, &mut SimRng::new(1));
        assert_eq!(f.hosts.len(), 2);
        assert_eq!(f.hosts[1].slots, 8..10);
        let four = Fleet::build(10, 4, 4, 8, &mut SimRng::new(1));
        assert_eq!(four.hosts.len(), 3);
        assert_eq!(four.hosts[2].slots, 8..10);
        assert_eq!(four.gpus[9].slot, 1);
    }
}
