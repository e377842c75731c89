//! Which implementation of each kernel runs. A commit switches a kernel to a slower variant
//! through a TOML file (`--variants FILE`) or a flag; the demo's history is made of such
//! commits. Missing sections and keys mean the fast variants.

use std::fmt;
use std::path::Path;

use clap::ValueEnum;
use serde::Deserialize;

use crate::error::KernelError;

/// Every kernel's variant choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variants {
    /// `[bus]`.
    #[serde(default)]
    pub bus: BusVariant,
    /// `[log_read]`.
    #[serde(default)]
    pub log_read: LogReadVariant,
    /// `[fair_queue]`.
    #[serde(default)]
    pub fair_queue: FairQueueVariant,
    /// `[ring]`.
    #[serde(default)]
    pub ring: RingVariant,
    /// `[vm_scale]`.
    #[serde(default)]
    pub vm_scale: VmScaleVariant,
}

/// `[bus]`: backend, wake-up policy and publish mode of the broadcast bus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BusVariant {
    /// Which backend.
    #[serde(default)]
    pub backend: BusBackend,
    /// When subscribers are woken.
    #[serde(default)]
    pub wake: WakeMode,
    /// How bursts are published.
    #[serde(default)]
    pub publish: PublishMode,
}

/// `[log_read]`: how sealed segments are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogReadVariant {
    /// How sealed segments are read.
    #[serde(default)]
    pub sealed_reader: SealedReader,
}

/// `[fair_queue]`: the scheduler under test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairQueueVariant {
    /// The scheduler under test.
    #[serde(default)]
    pub scheduler: SchedulerKind,
}

/// `[ring]`: how `record()` reaches the store's file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingVariant {
    /// How `record()` writes.
    #[serde(default)]
    pub store: StoreKind,
}

/// `[vm_scale]`: how much history each micro-VM's store keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmScaleVariant {
    /// How long the finest (one-second) tier of each VM's store reaches back.
    #[serde(default)]
    pub seconds_tier: SecondsTier,
}

macro_rules! variant_enum {
    ($(#[$doc:meta])* $name:ident { $(#[$vdoc:meta])* $default:ident => $dname:literal, $($(#[$odoc:meta])* $other:ident => $oname:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ValueEnum)]
        #[serde(rename_all = "lowercase")]
        pub enum $name {
            $(#[$vdoc])*
            #[default]
            $default,
            $($(#[$odoc])* $other),+
        }

        impl $name {
            /// The spelling used in files, flags and reports.
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::$default => $dname,
                    $(Self::$other => $oname),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

variant_enum!(
    /// Broadcast bus backend.
    BusBackend {
        /// Structure of arrays: per-slot subscriber bitmask, clone once, last reader takes.
        Soa => "soa",
        /// A classic bounded broadcast: locked tail, locked slots, a clone per reader.
        Classic => "classic",
    }
);

variant_enum!(
    /// When a publisher wakes sleeping subscribers.
    WakeMode {
        /// Once per batch, only if someone went to sleep since the last wake.
        Edge => "edge",
        /// After every message.
        Every => "every",
    }
);

variant_enum!(
    /// How the bursty benchmark publishes a burst.
    PublishMode {
        /// The whole burst in one call: one reservation, one wake.
        Batch => "batch",
        /// One call per message.
        Single => "single",
    }
);

variant_enum!(
    /// Reader for sealed log segments.
    SealedReader {
        /// Copy out of a memory map.
        Mmap => "mmap",
        /// `pread` through a buffer, as for the active segment.
        Read => "read",
    }
);

variant_enum!(
    /// Multi-tenant scheduler.
    SchedulerKind {
        /// Deficit round robin across tenants, with priorities, deadlines and backpressure.
        Drr => "drr",
        /// One first-in first-out queue for everyone.
        Fifo => "fifo",
    }
);

variant_enum!(
    /// Metrics store write path.
    StoreKind {
        /// A 16-byte store into the mapped slab.
        Mmap => "mmap",
        /// A `pwrite()` system call per record.
        Write => "write",
    }
);

variant_enum!(
    /// Span of the one-second tier of a VM's metrics store.
    SecondsTier {
        /// An hour of seconds (rondo's layout, 1.1 MB per 16 series).
        Hour => "hour",
        /// A day of seconds: 24 times the slots, and the memory to read them back.
        Day => "day",
    }
);

impl Variants {
    /// Parses a variants file's text.
    pub fn from_toml(text: &str) -> Result<Self, KernelError> {
        toml::from_str(text).map_err(|e| KernelError::Variants(e.to_string()))
    }

    /// Reads and parses a variants file.
    pub fn load(path: &Path) -> Result<Self, KernelError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KernelError::Variants(format!("cannot read {}: {e}", path.display())))?;
        Self::from_toml(&text)
            .map_err(|e| KernelError::Variants(format!("{}: {e}", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_means_fast_variants() {
        let v = Variants::from_toml("").unwrap();
        assert_eq!(v.bus.backend, BusBackend::Soa);
        assert_eq!(v.log_read.sealed_reader, SealedReader::Mmap);
        assert_eq!(v.fair_queue.scheduler, SchedulerKind::Drr);
        assert_eq!(v.ring.store, StoreKind::Mmap);
        assert_eq!(v.vm_scale.seconds_tier, SecondsTier::Hour);
    }

    #[test]
    fn sections_choose_slow_variants() {
        let v = Variants::from_toml(
            "[bus]\nbackend = \"classic\"\n[log_read]\nsealed_reader = \"read\"\n\
             [fair_queue]\nscheduler = \"fifo\"\n[ring]\nstore = \"write\"\n\
             [vm_scale]\nseconds_tier = \"day\"\n",
        )
        .unwrap();
        assert_eq!(v.bus.backend, BusBackend::Classic);
        assert_eq!(v.bus.wake, WakeMode::Edge);
        assert_eq!(v.log_read.sealed_reader, SealedReader::Read);
        assert_eq!(v.fair_queue.scheduler, SchedulerKind::Fifo);
        assert_eq!(v.ring.store, StoreKind::Write);
        assert_eq!(v.vm_scale.seconds_tier, SecondsTier::Day);
    }

    #[test]
    fn unknown_keys_and_values_are_clear_errors() {
        let err = Variants::from_toml("[bus]\nbackend = \"fast\"\n").unwrap_err();
        assert!(err.to_string().contains("fast"), "{err}");
        let err = Variants::from_toml("[bus]\nbakend = \"soa\"\n").unwrap_err();
        assert!(err.to_string().contains("bakend"), "{err}");
        let err = Variants::from_toml("[gpu]\nx = 1\n").unwrap_err();
        assert!(err.to_string().contains("gpu"), "{err}");
    }
}
